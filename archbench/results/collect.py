"""Collect result records into one tidy table (one row per record).

A record counts when it is valid and makes sense (:func:`archbench.workloads.sense.read_counted`)
and is what its plan says (:func:`archbench.plan.plan_match.mismatch`); every other record
file is excluded and named with its reason, and so is every record on disk that the
campaign does not plan ("not planned by campaign <name>"), which is left where it is (it
may be another campaign's).

A record that says ``device: gpu`` and ``status: ok`` is a GPU measurement only when every
device TensorFlow placed its step on is a GPU (``devices``); otherwise the table shows it
as failed with the reason and without its throughput: never a CPU number under a GPU name.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

from archbench.core import escape
from archbench.core.metrics import loss_tail, node_hours
from archbench.core.provenance import no_accelerator
from archbench.core.record import RecordError
from archbench.plan.plan_match import mismatch_any
from archbench.workloads import energy
from archbench.workloads.gpu import device_mismatch
from archbench.workloads.sense import measured_window_s, read_counted
from archbench.workloads.training.vendor_evidence.library import evidence_columns
from archbench.workloads.training.vendor_evidence.precision import precision_columns

Plans = Mapping[str, Sequence[Mapping]]  # record path -> the measurements planned for it



# The MKL/OpenMP runtime's environment variables (Intel OpenMP KMP_*, OpenMP OMP_*, GNU
# OpenMP GOMP_*, MKL_*): what CESGA 2018 calls a run's MKL settings (e.g. KMP_BLOCKTIME=0).
MKL_ENV_PREFIXES = ("KMP_", "OMP_", "GOMP_", "MKL_")
THREAD_COUNT_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def env_text(env: dict) -> str:
    """An environment as one text: ``NAME=value`` pairs sorted by name, joined by "; "."""
    return "; ".join(f"{name}={env[name]}" for name in sorted(env))


def mkl_env_text(env: dict) -> str:
    """The MKL/OpenMP runtime settings of ``env`` (names starting with one of
    ``MKL_ENV_PREFIXES``; thread counts, which the launcher sets per process and the
    record holds as columns, left out) as :func:`env_text`, or "none" when it sets none."""
    settings = {k: v for k, v in env.items()
                if k.startswith(MKL_ENV_PREFIXES) and k not in THREAD_COUNT_VARIABLES}
    return env_text(settings) or "none"


def flatten(record: dict) -> dict:
    """One tidy-table row: lists joined, ``metrics`` spread into ``metric_<name>`` columns,
    the environment the run had as ``env`` (:func:`env_text`) and its MKL/OpenMP part as
    ``mkl_env`` (:func:`mkl_env_text`), the vendor evidence as ``vendor_*`` columns
    (:func:`archbench.workloads.training.vendor_evidence.library.evidence_columns`), the requested
    and executed precision and their ``evidence_label`` (:func:`archbench.workloads.training.
    vendor_evidence.precision.precision_columns`), the window's energy per source
    (:func:`archbench.workloads.energy.columns`), the tuner's trial as ``trial_*`` columns
    (:func:`trial_columns`), ``host_other_cores`` (the record's ``host_load.other_cores``,
    beside its ``host_busy``), ``node_hours`` of the run (:func:`run_node_hours`), ``cpu_isa`` space-joined, ``loss_tail`` the mean
    loss of the last third of the measured steps (:func:`archbench.core.metrics.loss_tail`). A record whose
    ``device`` is not "gpu" states no CUDA stack (:func:`cpu_stack`)."""
    record = cpu_stack(record)
    row = {k: v for k, v in record.items()
           if k not in ("metrics", "env", "step_times_s", "losses", "vendor_evidence", "energy",
                        "trial", "host_load")}
    row["host_other_cores"] = (record.get("host_load") or {}).get("other_cores")
    row.update(trial_columns(record.get("trial")))
    row["node_hours"] = run_node_hours(record)
    row.update(evidence_columns(record.get("vendor_evidence")))
    row.update(energy.columns(record))
    row.update(precision_columns(record))
    row["cpu_isa"] = " ".join(record["cpu_isa"]) if isinstance(record.get("cpu_isa"), list) else None
    env = record.get("env") or {}
    row["env"] = env_text(env)
    row["mkl_env"] = mkl_env_text(env)
    row["hosts"] = ",".join(record.get("hosts", []))
    row["gpu_models"] = ",".join(record.get("gpu_models") or [])
    row["devices"] = ",".join(record.get("devices") or [])
    row["loss_tail"] = loss_tail(record.get("losses") or [])
    steps = record.get("step_times_s") or []
    row["n_steps_recorded"] = len(steps)
    row["measured_window_s"] = measured_window_s(record)
    for name, metric in sorted((record.get("metrics") or {}).items()):
        row[f"metric_{name}"] = metric["value"]
        row[f"metric_{name}_unit"] = metric["unit"]
    return row


TRIAL_KEYS = ("number", "round", "rung", "top_rung", "sweep", "exhaustive_node_hours",
              "budget_node_hours")


def trial_columns(trial: Mapping | None) -> dict:
    """The record's ``trial`` (experiment type tune) as ``trial_<key>`` columns, one per
    key of :data:`TRIAL_KEYS`; every one empty (None) for a record of no trial."""
    trial = trial or {}
    return {f"trial_{key}": trial.get(key) for key in TRIAL_KEYS}


def run_node_hours(record: Mapping) -> float | None:
    """Node-hours of a run = nodes x (end_time - start_time) in hours
    (:func:`archbench.core.metrics.node_hours`); None where a time does not parse."""
    try:
        return node_hours(record.get("nodes") or 1, record["start_time"], record["end_time"])
    except (KeyError, TypeError, ValueError):
        return None


def cpu_stack(record: dict) -> dict:
    """``record``, or when its ``device`` is not "gpu" (absent reads as cpu), a copy without
    a CUDA stack (:func:`archbench.core.provenance.no_accelerator`): a record written before
    provenance left it out of CPU runs may carry the versions of a CUDA build's libraries
    and the GPUs its host had, none of which its tensors met."""
    return record if record.get("device") == "gpu" else {**record, **no_accelerator()}


class DuplicateRunError(ValueError):
    """Two records claim the same run (config_id + repetition) of one experiment."""


def unproven_gpu(record: dict) -> dict:
    """``record``, or when it is an ok GPU measurement whose placed devices are not all
    GPUs, a copy with status failed, the reason, and no throughput."""
    if record.get("status") != "ok" or record.get("device") != "gpu":
        return record
    mismatch = device_mismatch("gpu", record.get("devices") or [])
    if not mismatch:
        return record
    return {**record, "status": "failed", "throughput": None,
            "reason": f"not a GPU measurement: {mismatch}"}


def records_to_frame(records: list[dict]) -> pd.DataFrame:
    """Tidy table of ``records`` sorted by run, one row each (GPU claims checked,
    :func:`unproven_gpu`); duplicates are an error."""
    records = [unproven_gpu(r) for r in records]
    keys = Counter((r["system"], r["experiment"], r["run_id"]) for r in records)
    doubled = sorted("/".join(k) for k, n in keys.items() if n > 1)
    if doubled:
        raise DuplicateRunError(f"runs recorded more than once: {', '.join(doubled[:5])}")
    frame = pd.DataFrame([flatten(r) for r in records])
    if frame.empty:
        return frame
    for name in ("trial_number", "trial_round", "trial_rung"):  # counts, not 1.0
        frame[name] = pd.to_numeric(frame[name]).astype("Int64")
    return frame.sort_values(["system", "experiment", "config_id", "repetition"],
                             kind="stable").reset_index(drop=True)


def read_planned(path: str | os.PathLike, plans: Plans | None = None) -> dict:
    """The record at ``path`` if it may count: valid, sensible
    (:func:`archbench.workloads.sense.read_counted`) and, where ``plans`` names what was
    planned for its path, what one of those plans says (:func:`archbench.plan.plan_match.mismatch`);
    RecordError naming the path and the reason otherwise."""
    record = read_counted(path)
    reason = mismatch_any(record, list((plans or {}).get(str(path), ())))
    if reason:
        raise RecordError(f"{path}: {reason}")
    return record


def collect(paths: Iterable[str | os.PathLike], plans: Plans | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Read records at ``paths`` (:func:`read_planned`); return (tidy table of those that
    count, one error line for each of the rest)."""
    records, errors = [], []
    for path in sorted(str(p) for p in paths):
        try:
            records.append(read_planned(path, plans))
        except RecordError as exc:
            errors.append(str(exc))
    return records_to_frame(records), errors


def record_files(raw: str | os.PathLike) -> list[Path]:
    """The record files under a ``raw/`` folder (``<system>/<experiment>/<config_id>/rep<k>.json``)."""
    return sorted(Path(raw).glob("*/*/*/rep*.json"))


def unplanned(raw: str | os.PathLike, planned: Iterable[str | os.PathLike], campaign: str) -> list[str]:
    """One line for each record file under ``raw`` that is none of the ``planned`` paths:
    ``<path>: not planned by campaign <campaign>``."""
    wanted = {Path(p).as_posix() for p in planned}
    return [f"{p.as_posix()}: not planned by campaign {campaign}"
            for p in record_files(raw) if p.as_posix() not in wanted]


def excluded_html(lines: Sequence[str]) -> str:
    """The excluded records (``<path>: <reason>`` lines) as the report shows them: a
    table of records and reasons."""
    rows = "".join("<tr><td>{}</td><td>{}</td></tr>\n".format(*map(escape.html, (line.split(": ", 1) + [""])[:2]))
                   for line in lines)
    body = (f"<table>\n<tr><th>record</th><th>why it is not counted</th></tr>\n{rows}</table>"
            if lines else "<p>No record was excluded.</p>")
    return f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head><body>\n{body}\n</body></html>\n"


def outcome_line(counted: int, excluded: int, listing: str | os.PathLike) -> str:
    """The line a collection ends with: records counted, records excluded, where they are listed."""
    return f"archbench: records: {counted} counted, {excluded} excluded (listed in {listing})"


def write_table(frame: pd.DataFrame, csv_path: str | os.PathLike, parquet_path: str | os.PathLike) -> None:
    """Write the tidy table as CSV and Parquet."""
    frame.to_csv(csv_path, index=False)
    frame.to_parquet(parquet_path, index=False)
