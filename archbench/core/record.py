"""Result records: one JSON file per run, validated, written atomically, read back strictly.

A record is a flat dict following :func:`schema` (``schemas/record.schema.json`` and the
identity fields of :mod:`archbench.core.fields`). The unit travels with
every value (``throughput`` + ``throughput_unit``; ``metrics[name] = {value, unit}``).
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema

from archbench.core.fields import FIELDS, RECORD_DEFAULTS
from archbench.core.files import MAX_RECORD_BYTES, UnsafeFile, atomic_path, read_regular
from archbench.core.storage import Unwritable

SCHEMA_VERSION = 1
# What a record that does not state a field holds: the identity fields' declarations
# (archbench.core.fields), then the rest.
DEFAULTS: dict[str, Any] = {
    **RECORD_DEFAULTS,
    "schema_version": SCHEMA_VERSION, "image": "host", "image_sha256": None,
    "framework_version": "", "cuda_version": None, "cudnn_version": None, "nccl_version": None,
    "gpu_models": [], "vendor_evidence": None, "vendor_mismatch": "", "devices": [],
    "warmup_steps": None, "measured_steps": None, "step_times_s": [],
    "throughput": None, "throughput_unit": "", "metrics": {}, "loss_first": None,
    "loss_last": None, "loss_decreased": None, "status": "ok", "reason": "",
    "log_path": None, "env": {}, "hosts": [], "cpu_model": "", "slurm_job_id": None,
    "slurm_nodes": None, "git_commit": None, "config_hash": None, "losses": [], "trial": None,
}


class RecordError(ValueError):
    """A record file that is missing, truncated, corrupt or does not follow the schema."""


@lru_cache(maxsize=1)
def schema() -> dict:
    """The JSON schema of a result record: ``schemas/record.schema.json`` with the property
    of every identity field (:meth:`archbench.core.fields.Field.schema`), required where the
    field is."""
    text = resources.files("archbench").joinpath("schemas/record.schema.json").read_text()
    loaded = json.loads(text)
    properties = {**{f.name: f.schema() for f in FIELDS}, **loaded["properties"]}
    required = [*loaded["required"], *(f.name for f in FIELDS if f.required)]
    return {**loaded, "required": required, "properties": properties}


def make_record(**fields: Any) -> dict:
    """Return a complete record: DEFAULTS overlaid with ``fields``, then validated."""
    unknown = set(fields) - set(schema()["properties"])
    if unknown:
        raise RecordError(f"unknown record field(s): {', '.join(sorted(unknown))}")
    record = {**DEFAULTS, **fields}
    record.setdefault("run_id", run_id(record))
    validate(record)
    return record


@lru_cache(maxsize=1)
def fast_check():
    """The record schema compiled to Python code: the check every read and write runs.

    (The schema uses only keywords that mean the same in draft 7, which fastjsonschema
    compiles; jsonschema is ~40x slower per record and only explains failures.)
    """
    return fastjsonschema.compile({k: v for k, v in schema().items() if k != "$schema"})


def bound(field: str, keyword: str) -> int | float:
    """The record schema's ``keyword`` (minimum, maximum, exclusiveMinimum) of numeric
    ``field``: the one definition of the bounds records and imports keep."""
    return schema()["properties"][field][keyword]


def validate(record: dict, source: str = "record") -> None:
    """Raise RecordError naming the first offending field if ``record`` breaks the schema
    (bounds included). Whether its values agree with each other is
    :func:`archbench.workloads.sense.problem`, checked where records are counted."""
    try:
        fast_check()(record)
    except fastjsonschema.JsonSchemaException:
        validator = jsonschema.Draft202012Validator(schema())
        error = jsonschema.exceptions.best_match(validator.iter_errors(record))
        if error is not None:  # None: the two validators disagree, trust the reference one
            where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
            raise RecordError(f"{source}: {where}: {error.message}") from None


SCRATCH_SUFFIX = ".worker"


def scratch_path(output: str | os.PathLike) -> Path:
    """Where the worker of the run that writes record ``output`` leaves its own record for
    its supervisor: a hidden file beside ``output``."""
    output = Path(output)
    return output.with_name(f".{output.name}{SCRATCH_SUFFIX}")


def is_scratch(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a worker's record for its supervisor (:func:`scratch_path`)."""
    name = Path(path).name
    return name.startswith(".") and name.endswith(f".json{SCRATCH_SUFFIX}")


def write_record(path: str | os.PathLike, record: dict) -> Path:
    """Validate and write ``record`` atomically (temporary file + rename) and durably,
    flushed to disk, unless ``path`` is a worker's record for its supervisor: that one is
    read back at once and its durability is the supervisor's record's. Raises
    storage.Unwritable, leaving nothing behind, when it cannot be written."""
    validate(record)
    try:
        with atomic_path(path, fsync=not is_scratch(path)) as tmp:
            tmp.write_text(json.dumps(record, indent=1, sort_keys=True, allow_nan=False) + "\n")
    except OSError as exc:
        raise Unwritable(path, exc) from exc
    return Path(path)


def read_record(path: str | os.PathLike) -> dict:
    """Read one record; raise RecordError with the path if it is unreadable or invalid.
    The file is read through :func:`archbench.core.files.read_regular`: a regular file of
    at most :data:`MAX_RECORD_BYTES`, or a link to one inside its ``raw/`` folder (its own
    folder outside that layout)."""
    try:
        data = read_regular(path, MAX_RECORD_BYTES, within=_record_root(path))
    except UnsafeFile as exc:
        raise RecordError(f"{path}: not read as a record: {exc}") from None
    except OSError as exc:
        raise RecordError(f"{path}: unreadable record ({exc})") from exc
    try:
        record = json.loads(data.decode("utf-8"), parse_constant=_not_json)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError: ValueErrors
        raise RecordError(f"{path}: unreadable record ({exc})") from exc
    if not isinstance(record, dict):
        raise RecordError(f"{path}: a record must be a JSON object")
    validate(record, source=str(path))
    mismatch = location_mismatch(record, path)
    if mismatch:
        raise RecordError(f"{path}: {mismatch}")
    return record


def _record_root(path: str | os.PathLike) -> Path:
    """The folder a record's link may point into: the ``raw/`` folder above a record of
    the ``raw/<system>/<experiment>/<config_id>/rep<k>.json`` layout, else its own folder."""
    path = Path(path).absolute()
    return path.parents[3] if RAW_LAYOUT.search(path.as_posix()) else path.parent


def run_id(fields: dict) -> str:
    """A run's id within its experiment: ``<config_id>/rep<k>``."""
    return f"{fields['config_id']}/rep{fields['repetition']}"


def raw_path(fields: dict) -> str:
    """The results-relative path of a run's record (a measurement's or a record's fields):
    ``raw/<system>/<experiment>/<config_id>/rep<k>.json``."""
    return f"raw/{fields['system']}/{fields['experiment']}/{run_id(fields)}.json"


def _not_json(name: str) -> None:
    """Refuse NaN and Infinity, which Python's json reads but records never hold
    (:func:`write_record` writes strict JSON)."""
    raise ValueError(f"{name} is not a JSON number")


RAW_LAYOUT = re.compile(r"(?:^|/)raw/([^/]+)/([^/]+)/([^/]+)/rep(\d+)\.json$")


def location_mismatch(record: dict, path: str | os.PathLike) -> str:
    """Why a record does not belong where it sits (``raw/<system>/<experiment>/<config_id>/
    rep<k>.json``: another run's record copied or moved there), or "" when it does or the
    path is not in that layout."""
    found = RAW_LAYOUT.search(Path(path).as_posix())
    if not found:
        return ""
    system, experiment, config, rep = found.groups()
    expected = {"system": system, "experiment": experiment, "config_id": config,
                "repetition": int(rep), "run_id": run_id({"config_id": config, "repetition": rep})}
    wrong = [f"{key} {record.get(key)!r} (the path says {value!r})"
             for key, value in expected.items() if record.get(key) != value]
    return f"the record of another run: {', '.join(wrong)}" if wrong else ""
