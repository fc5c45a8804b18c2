"""Find corrupt, truncated or nonsensical records, and records that are not what their
plan says (:func:`archbench.results.collect.read_planned`, the check collection uses too),
before a campaign runs and move them aside, so the workflow reruns those measurements
instead of aggregating them. Records the campaign does not plan are never moved (they may
be another campaign's): collection lists them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from archbench.core.record import RecordError
from archbench.results.collect import Plans, read_planned


def invalid_records(paths: Iterable[str | os.PathLike], plans: Plans | None = None) -> list[tuple[str, str]]:
    """(path, reason) for every existing file in ``paths`` that is not a valid record, or
    not what ``plans`` (by path) says it is."""
    found = []
    for path in paths:
        if not os.path.exists(path):
            continue
        try:
            read_planned(path, plans)
        except RecordError as exc:
            found.append((str(path), str(exc)))
    return found


def quarantine(path: str | os.PathLike, results_dir: str | os.PathLike, reason: str) -> Path:
    """Move ``path`` to <results>/quarantine/<same relative path>.<n> with a .reason file."""
    path, results_dir = Path(path), Path(results_dir)
    try:
        relative = path.relative_to(results_dir)
    except ValueError:
        relative = Path(path.name)
    target_dir = results_dir / "quarantine" / relative.parent
    target_dir.mkdir(parents=True, exist_ok=True)
    n = len(list(target_dir.glob(f"{relative.name}.*.reason")))
    target = target_dir / f"{relative.name}.{n}"
    os.replace(path, target)
    target.with_name(f"{target.name}.reason").write_text(reason + "\n")
    return target


def another_run_holds_locks(workdir: str | os.PathLike = ".") -> bool:
    """True when Snakemake's lock directory in ``workdir`` holds locks: another run of this
    working directory is live (or was killed and left them; Snakemake then refuses to run
    until ``--unlock``). A run that is about to be refused must move nothing."""
    locks = Path(workdir, ".snakemake", "locks")
    return locks.is_dir() and any(locks.iterdir())


def quarantine_invalid(paths: Iterable[str | os.PathLike], results_dir: str | os.PathLike,
                       dry_run: bool = False, plans: Plans | None = None) -> list[str]:
    """Move invalid records (and those ``plans`` contradicts) aside, or only report them
    on a dry run; one message each."""
    messages = []
    for path, reason in invalid_records(paths, plans):
        if dry_run:
            messages.append(f"invalid record, will be rerun: {reason}")
        else:
            target = quarantine(path, results_dir, reason)
            messages.append(f"invalid record moved to {target}, will be rerun: {reason}")
    return messages
