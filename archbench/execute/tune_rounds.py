"""A tuning round as the workflow runs it (rule tune_round): tell the study the previous
round's records, ask it for this round's trials, and write the round file that says
what each of the round's placeholders runs (archbench/plan/placeholders.py); after the
last round, tell the study its records and write what it found (rule tune_best).

The study is Optuna's journal file beside the round files: asks and tells are kept by
round and slot there, so a round rerun after a kill writes the same file, and no trial
is lost or measured twice.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Mapping

from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from archbench.core.record import NUMERICS_DEFAULTS, RecordError, raw_path, read_record
from archbench.plan.experiment_types.tune import plan_of, point_fields
from archbench.plan.placeholders import choice_file, study_dir
from archbench.plan.tuner import Tuner, key

JOURNAL = "study.journal"


def storage(directory: Path) -> JournalStorage:
    """The study's Optuna storage: an append-only journal file in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(directory / JOURNAL)))


def tuner_of(experiment: dict, system: dict, directory: Path, *, statistic: str = "mean") -> Tuner:
    """The tuner of a tune experiment on ``system``, its study in ``directory``, its trials
    valued by the campaign's ``statistic``."""
    plan = plan_of(experiment, system)
    return Tuner(plan.space, plan.rounds, seed=plan.seed, storage=storage(directory),
                 statistic=statistic)


def measured_values(previous: list[dict], chosen: Mapping, results: str | Path) -> dict:
    """(trial, repetition) -> img/s of the previous round's records (None: not ok), from
    its placeholders and its round file's choices."""
    values: dict[tuple[int, int], float | None] = {}
    for m in previous:
        entry = chosen.get(raw_path(m))
        if not isinstance(entry, dict) or "error" in entry:
            continue
        try:
            record = read_record(Path(results, raw_path(m)))
        except RecordError:
            record = {}
        ok = record.get("status") == "ok" and record.get("throughput") is not None
        values[(entry["trial"]["number"], m["repetition"])] = float(record["throughput"]) if ok else None
    return values


def choose_round(placeholders: list[dict], previous: list[dict], *, experiment: dict,
                 system: dict, results: str | Path = "results", statistic: str = "mean") -> dict:
    """The round file of ``placeholders`` (one round of one study, every repetition):
    record path (``raw/...``) -> the measurement it runs, or {"error": why}. ``previous``:
    the placeholders of the round before (none for the first), whose records are told
    (each trial valued by ``statistic`` of its runs)."""
    r = placeholders[0]["tune_round"]
    tuner = tuner_of(experiment, system, study_dir(results, placeholders[0]), statistic=statistic)
    if r > 0:
        chosen = json.loads(choice_file(results, previous[0]).read_text())
        tuner.tell(r - 1, measured_values(previous, chosen, results))
    slots = tuner.slots(r)
    trials = list(dict.fromkeys(s.trial for s in slots))
    by_slot = {(trials.index(s.trial), s.repetition): s for s in slots}
    out = {}
    for m in placeholders:
        slot = by_slot.get((m["tuning"]["slot"], m["repetition"]))
        if slot is None:
            out[raw_path(m)] = {"error": f"round {r + 1}: no trial for slot {m['tuning']['slot']} "
                                         f"(the previous round left {len(trials)} to measure)"}
            continue
        out[raw_path(m)] = resolved(m, slot.point, slot.trial, system=system)
    return out


def resolved(placeholder: dict, point: dict, number: int, *, system: dict) -> dict:
    """What a placeholder runs as trial ``number`` at ``point``: its planned fields with
    the point's, its id and record path kept."""
    fields = point_fields(point, system)
    out = {k: v for k, v in placeholder.items() if k != "tune_round"}
    out.update({k: v for k, v in fields.items() if k != "tuning"})
    out["tuning"] = {**placeholder.get("tuning", {}), **fields["tuning"]}
    for name, default in NUMERICS_DEFAULTS.items():  # left out at their defaults, as planned
        if out.get(name) == default:
            out.pop(name)
    out["trial"] = {**placeholder["trial"], "number": number}
    return out


def finish(last: list[dict], *, experiment: dict, system: dict, results: str | Path = "results",
           statistic: str = "mean") -> dict:
    """Tell the study its last round's records (its top-rung trials complete) and return
    what it found: the best trial's number, point and img/s at full steps (``statistic``
    of its runs; None when every trial failed) and how many trials ended in each state."""
    tuner = tuner_of(experiment, system, study_dir(results, last[0]), statistic=statistic)
    r = last[0]["tune_round"]
    tuner.tell(r, measured_values(last, json.loads(choice_file(results, last[0]).read_text()), results))
    best = tuner.best()
    states = Counter(t.state.name.lower() for t in tuner.study.get_trials(deepcopy=False)
                     if "point" in t.user_attrs)
    found = None
    if best is not None:
        point, value = best
        number = next(t.number for t in tuner.study.get_trials(deepcopy=False)
                      if t.user_attrs.get("point") == key(point) and t.value == value)
        found = {"trial": number, "point": point, "img_s": value, "statistic": statistic}
    return {"best": found, "trials": dict(sorted(states.items()))}
