"""Stating another record's vendor evidence instead of probing again.

What ran does not change between runs whose probes would be the same (the same probe
settings, ``settings``: model, batch per process, image size, classes, threads, data
format, vendor flag and seed) on one system, image, framework version and code. A run
states the evidence such a run's own probe gathered instead of probing
(:func:`shared_evidence`), with ``source`` naming the record that probed: first another
repetition of its configuration (:func:`earlier_record`), else the last run of the
system, in any configuration or experiment, that probed with the same settings
(:func:`indexed_record`, named by :func:`remember`: a 2-rank Horovod run states the
evidence of the 1-process run with its per-process settings). A run finds none when the
others have not run yet or their probe failed: it probes, and the later ones state its
evidence.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Sequence

from archbench.core.files import MAX_RECORD_BYTES, atomic_write_text, read_regular
from archbench.core.provenance import PERFORMANCE_ENV
from archbench.workloads.training.vendor_evidence.precision import REQUEST_FIELDS

# record fields in which a run must equal the run whose evidence it states: where and from
# what it ran, and the settings the probe takes (evidence from before it stated its probe's
# settings is only offered to the repetitions of its configuration, whose hash covers
# the others)
SAME_FOR_EVIDENCE = ("arch", "cpu_model", "image", "image_sha256", "git_commit", "framework",
                     "framework_version", "device", "model", "batch_per_process", "image_size",
                     "intra_threads", "inter_threads", "vendor_library_enabled")
# thread counts a run that sets its intra-op threads tells its framework itself: the
# framework does not read these then (Snakemake sets them to a job's threads)
THREAD_COUNT_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# where a system's runs find the last record that probed with given settings: beside its
# experiments, <raw>/<system>/.vendor-probes/<probe key>.json, naming the record
PROBES_DIR = ".vendor-probes"


def gathered(record: dict) -> bool:
    """Whether ``record`` holds evidence its own probe gathered (a library, no ``source``)."""
    evidence = record.get("vendor_evidence")
    return (isinstance(evidence, dict) and evidence.get("library") is not None
            and not evidence.get("source"))


def _repetition(path: Path) -> int:
    digits = path.stem[len("rep"):]
    return int(digits) if digits.isdigit() else sys.maxsize


def earlier_record(output: str | os.PathLike, config_hash: str) -> Path | None:
    """The record beside ``output`` (another repetition in its configuration directory,
    the lowest first) whose own probe gave evidence for the configuration hashed
    ``config_hash``; None when there is none. Unreadable files are passed over: the worker
    checks the record it is given (:func:`shared_evidence`)."""
    output = Path(output)
    for path in sorted(output.parent.glob("rep*.json"), key=_repetition):
        if path.name == output.name:
            continue
        try:  # a regular file: a FIFO or device beside the record would hang the worker
            record = json.loads(read_regular(path, MAX_RECORD_BYTES))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("config_hash") == config_hash and gathered(record):
            return path
    return None


def probe_env(env: dict | None, intra_threads: int | None = 0) -> dict:
    """The performance settings of a record's environment that reach the probe: Slurm's
    and Horovod's left out (the probe is one process without either), the thread counts
    too where the run sets ``intra_threads``."""
    told = THREAD_COUNT_ENV if intra_threads else ()
    return {k: v for k, v in (env or {}).items()
            if k in PERFORMANCE_ENV and not k.startswith(("SLURM_", "HOROVOD_")) and k not in told}


def why_not_shared(earlier: dict, fields: dict, data_format: str = "NHWC", *,
                   settings: str | None = None) -> str:
    """Why this run (its record ``fields`` so far, its ``data_format``, its probe's
    ``settings``) may not state the evidence of record ``earlier``; "" when it may."""
    if not gathered(earlier):
        return "it holds no evidence of its own probe"
    if not earlier.get("run_id"):
        return "it names no run id"
    theirs = earlier["vendor_evidence"].get("settings")
    if settings is not None and theirs is not None and theirs != settings:
        return f"its probe's settings '{theirs}' are not this run's '{settings}'"
    for key in SAME_FOR_EVIDENCE:
        if earlier.get(key) != fields.get(key):
            return f"its {key} {earlier.get(key)!r} is not this run's {fields.get(key)!r}"
    for key, default in REQUEST_FIELDS.items():  # the numerics asked for (absent: the default)
        theirs, mine = earlier.get(key) or default, fields.get(key) or default
        if theirs != mine:
            return f"its {key} {theirs!r} is not this run's {mine!r}"
    threads = fields.get("intra_threads")
    if probe_env(earlier.get("env"), threads) != probe_env(fields.get("env"), threads):
        return (f"its environment {probe_env(earlier.get('env'), threads)} is not this run's "
                f"{probe_env(fields.get('env'), threads)}")
    theirs = ((earlier.get("metrics") or {}).get("data_format") or {}).get("value", "NHWC")
    if theirs != data_format:
        return f"its data format {theirs} is not this run's {data_format}"
    return ""


def source_name(path: str | os.PathLike, record: dict, output: str | os.PathLike | None) -> str:
    """How a run writing ``output`` names ``record`` (at ``path``) as its evidence's
    source: its run id within the run's own experiment folder, ``<experiment>/<run id>``
    from another one."""
    same = output is None or Path(output).resolve().parent.parent == Path(path).resolve().parent.parent
    return record["run_id"] if same else f"{record.get('experiment')}/{record['run_id']}"


def shared_evidence(path: str | os.PathLike, fields: dict, data_format: str = "NHWC", *,
                    settings: str | None = None, output: str | os.PathLike | None = None) -> dict | None:
    """The evidence of record ``path`` for the run writing ``output`` (its ``fields`` so
    far, its ``data_format`` and probe ``settings``), with ``source`` naming that record
    (:func:`source_name`), when it may state it (:func:`why_not_shared`); None (and why,
    on stderr) otherwise. The evidence is copied: it stays this record's if that record is
    rerun."""
    from archbench.core.record import RecordError, read_record
    try:
        earlier = read_record(path)
    except RecordError as exc:
        why = str(exc)
    else:
        why = why_not_shared(earlier, fields, data_format, settings=settings)
    if why:
        print(f"vendor evidence of {path} not stated: {why}; probing", file=sys.stderr)
        return None
    return {**earlier["vendor_evidence"], "source": source_name(path, earlier, output)}


def probe_key(settings_argv: Sequence[str], env: dict | None, intra_threads: int | None) -> str:
    """The name under which a system's runs find the last record that probed with the
    probe settings ``settings_argv`` (as planned) in environment ``env``."""
    text = json.dumps([list(settings_argv), probe_env(env, intra_threads)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def index_path(output: str | os.PathLike, key: str) -> Path | None:
    """Where the system of record ``output`` (``.../raw/<system>/<experiment>/<config>/
    rep<k>.json``) names the last record that probed under ``key``; None for a record
    outside that layout."""
    from archbench.core.record import RAW_LAYOUT
    output = Path(output)
    if not RAW_LAYOUT.search(output.as_posix()):
        return None
    return output.parents[2] / PROBES_DIR / f"{key}.json"


def indexed_record(output: str | os.PathLike, key: str) -> Path | None:
    """The record another run of ``output``'s system wrote whose own probe, under ``key``,
    gave evidence (:func:`remember`); None when there is none, or it is ``output`` itself.
    The worker checks the record it is given (:func:`shared_evidence`)."""
    index = index_path(output, key)
    if index is None:
        return None
    try:
        path = index.parent.parent / json.loads(read_regular(index, MAX_RECORD_BYTES))["record"]
        record = json.loads(read_regular(path, MAX_RECORD_BYTES, within=index.parent.parent))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if path.resolve() == Path(output).resolve() or not isinstance(record, dict) or not gathered(record):
        return None
    return path


def remember(output: str | os.PathLike, key: str, record: dict) -> None:
    """Name record ``output`` as the last one of its system whose own probe, under
    ``key``, gave evidence, if it is one (:func:`indexed_record`). A file system that
    refuses only costs the later runs a probe: the run's record is written."""
    index = index_path(output, key)
    if index is not None and gathered(record) and record["vendor_evidence"].get("settings"):
        relative = Path(output).resolve().relative_to(index.parent.parent.resolve())
        try:
            atomic_write_text(index, json.dumps({"record": relative.as_posix()}) + "\n")
        except OSError as exc:
            print(f"{index}: not written ({exc}); later runs probe for themselves", file=sys.stderr)
