"""Collect result records into one tidy table (one row per record).

A record that says ``device: gpu`` and ``status: ok`` is a GPU measurement only when every
device TensorFlow placed its step on is a GPU (``devices``); otherwise the table shows it
as failed with the reason and without its throughput: never a CPU number under a GPU name.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Iterable

import pandas as pd

from archbench.gpu import device_mismatch
from archbench.record import flatten, read_records


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
    return frame.sort_values(["system", "experiment", "config_id", "repetition"],
                             kind="stable").reset_index(drop=True)


def collect(paths: Iterable[str | os.PathLike]) -> tuple[pd.DataFrame, list[str]]:
    """Read records at ``paths``; return (tidy table of the valid ones, error lines of the rest)."""
    records, errors = read_records(sorted(str(p) for p in paths))
    return records_to_frame(records), errors


def write_table(frame: pd.DataFrame, csv_path: str | os.PathLike, parquet_path: str | os.PathLike) -> None:
    """Write the tidy table as CSV and Parquet."""
    frame.to_csv(csv_path, index=False)
    frame.to_parquet(parquet_path, index=False)
