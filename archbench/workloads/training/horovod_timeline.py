"""Allreduce operations counted in a Horovod timeline (Chrome trace JSON, written by rank 0).

Horovod records, per tensor, a NEGOTIATE_ALLREDUCE phase and an ALLREDUCE phase whose
sub-activities include the collective itself (MPI_ALLREDUCE, GLOO_ALLREDUCE, ...). When
tensor fusion packs several tensors into one collective, its begin events are written
for every tensor of the fused batch one after the other, before any event ends; so one
collective is one run of consecutive collective begin events. Tensor fusion and the
cycle time (HOROVOD_FUSION_THRESHOLD, HOROVOD_CYCLE_TIME) change how many collectives a
training step needs, which is what experiment 6 plots throughput against.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AllreduceCount:
    """Allreduces of a stretch of a timeline (or per step, once divided by the steps)."""

    tensors: float  # tensors allreduced (one ALLREDUCE phase each)
    collectives: float  # allreduce operations actually run (a fused batch counts once)


def read_events(path: str | Path) -> list[dict]:
    """Events of a timeline file; Horovod leaves the JSON array open while it writes."""
    text = Path(path).read_text().strip().rstrip(",")
    if not text:
        return []
    if not text.endswith("]"):
        text += "]"
    return json.loads(text)


def settled_events(path: str | Path, interval_s: float = 0.05, timeout_s: float = 5.0) -> list[dict]:
    """Events of a timeline just stopped: Horovod's writer thread drains its queue and
    closes the file shortly after ``stop_timeline``; wait until its size holds still."""
    path, size, deadline = Path(path), -1, time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = path.stat().st_size if path.exists() else -1
        if now > 0 and now == size:
            break
        size = now
        time.sleep(interval_s)
    return read_events(path) if path.exists() else []


def _is_collective(name: str) -> bool:
    return name.endswith("_ALLREDUCE") and not name.startswith("NEGOTIATE_")


def count_allreduces(events: list[dict], skip: str = "") -> AllreduceCount:
    """Allreduce tensors and collectives in ``events``, leaving out the tensors whose
    name contains ``skip`` (when given)."""
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name" and "name" in e.get("args", {})}
    tensors = collectives = 0
    in_run = False
    for e in events:
        if e.get("ph") == "M":
            continue
        counted = not (skip and skip in names.get(e.get("pid"), ""))
        begin = e.get("ph") == "B" and counted
        if begin and e.get("name") == "ALLREDUCE":
            tensors += 1
        collective = begin and _is_collective(e.get("name", ""))
        if collective and not in_run:
            collectives += 1
        in_run = collective
    return AllreduceCount(tensors, collectives)
