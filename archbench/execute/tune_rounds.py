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

from archbench.core.fields import NUMERICS_DEFAULTS
from archbench.core.metrics import DEFAULT_STATISTIC
from archbench.core.record import RecordError, raw_path, read_record
from archbench.plan.experiment_types.tune import plan_of, point_fields, study_key
from archbench.plan.placeholders import choice_file, study_dir
from archbench.plan.tuner import StudyMismatch, Tuner, key

JOURNAL = "study.journal"
AGAIN = "delete it and the round is chosen again from the study"


class StudyError(ValueError):
    """A study's journal, round file or record that is damaged or not this study's: one
    line naming the file."""


def storage(directory: Path) -> JournalStorage:
    """The study's Optuna storage: an append-only journal file in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(directory / JOURNAL)))


def check_journal(directory: Path) -> None:
    """StudyError naming the journal when it is not a file of JSON lines, or is missing or
    empty while a round file of the study exists (its trials would be lost)."""
    journal = directory / JOURNAL
    if journal.exists() and not journal.is_file():
        raise StudyError(f"{journal}: unreadable study journal (not a regular file)")
    try:
        lines = journal.read_bytes().splitlines() if journal.exists() else []
    except OSError as exc:
        raise StudyError(f"{journal}: unreadable study journal ({exc.strerror})") from None
    for number, line in enumerate(lines, 1):
        try:
            json.loads(line)
        except ValueError:
            raise StudyError(f"{journal}: damaged study journal (line {number} is not JSON); "
                             "move the study folder away to start the study again") from None
    rounds = sorted(directory.glob("round*.json"), key=lambda p: (len(p.name), p.name))
    if not lines and rounds:
        raise StudyError(f"{journal}: holds no trial of round {rounds[0].stem[5:]}, which {rounds[0]} "
                         "names (emptied or removed: move the study folder away to start again)")


def tuner_of(experiment: dict, system: dict, directory: Path, *, statistic: str = DEFAULT_STATISTIC) -> Tuner:
    """The tuner of a tune experiment on ``system``, its study in ``directory`` (checked:
    StudyError naming a damaged journal or one of another study), its trials valued by
    the campaign's ``statistic``."""
    plan = plan_of(experiment, system)
    check_journal(directory)
    try:
        return Tuner(plan.space, plan.rounds, seed=plan.seed, storage=storage(directory),
                     statistic=statistic, study_key=study_key(plan, experiment))
    except StudyMismatch as exc:
        raise StudyError(f"{directory / JOURNAL}: {exc}") from None


def read_round(placeholders: list[dict], tuner: Tuner, *, system: dict, results: str | Path) -> dict:
    """The round file of ``placeholders`` (one round), checked against the study: every
    entry what the study chose for its measurement; StudyError naming the file otherwise."""
    path = choice_file(results, placeholders[0])
    try:
        chosen = json.loads(path.read_text())
    except OSError as exc:
        raise StudyError(f"{path}: unreadable round file ({exc.strerror})") from None
    except ValueError as exc:
        raise StudyError(f"{path}: damaged round file (not JSON: {exc}); {AGAIN}") from None
    if not isinstance(chosen, dict):
        raise StudyError(f"{path}: damaged round file (not a JSON object); {AGAIN}")
    r = placeholders[0]["tune_round"]
    planned = {raw_path(m) for m in placeholders}
    for name in chosen:
        if name not in planned:
            raise StudyError(f"{path}: {name}: not a measurement of this round; {AGAIN}")
    if not tuner.asked(r):
        if all(isinstance(e, dict) and set(e) == {"error"} for e in chosen.values()) and len(chosen) == len(planned):
            return chosen
        raise StudyError(f"{directory_journal(path)}: holds no trial of round {r + 1}, which {path} names "
                         "(move the study folder away to start again)")
    expected = json.loads(json.dumps(round_choices(placeholders, tuner, system=system)))
    for name, entry in expected.items():
        if name not in chosen:
            raise StudyError(f"{path}: {name}: missing; {AGAIN}")
        if chosen[name] != entry:
            raise StudyError(f"{path}: {name}: not what the study chose for it; {AGAIN}")
    return chosen


def directory_journal(round_file: Path) -> Path:
    return round_file.parent / JOURNAL


def measured_values(previous: list[dict], chosen: Mapping, results: str | Path) -> dict:
    """(trial, repetition) -> img/s of the previous round's records (None: not ok, or no
    record), from its placeholders and its round file's choices (checked by
    :func:`read_round`). StudyError naming a record that is unreadable or another trial's."""
    values: dict[tuple[int, int], float | None] = {}
    for m in previous:
        entry = chosen[raw_path(m)]
        if "error" in entry:
            continue
        path = Path(results, raw_path(m))
        if not path.exists():
            values[(entry["trial"]["number"], m["repetition"])] = None
            continue
        try:
            record = read_record(path)
        except RecordError as exc:
            raise StudyError(str(exc)) from None
        trial, ok = record.get("trial"), record.get("status") == "ok"
        if ok or trial is not None:
            trial = trial or {}
            if trial.get("number") != entry["trial"]["number"]:
                raise StudyError(f"{path}: a record of trial {trial.get('number')}, its round file says "
                                 f"trial {entry['trial']['number']} (delete the record to measure it again)")
            if trial.get("study") != entry["trial"].get("study"):
                raise StudyError(f"{path}: a record of study {trial.get('study')}, not this one "
                                 f"({entry['trial'].get('study')}; delete the record to measure it again)")
        ok = ok and record.get("throughput") is not None
        values[(entry["trial"]["number"], m["repetition"])] = float(record["throughput"]) if ok else None
    return values


def tell_round(tuner: Tuner, placeholders: list[dict], *, system: dict, results: str | Path) -> None:
    """Tell the study one finished round's records (checked against its round file)."""
    chosen = read_round(placeholders, tuner, system=system, results=results)
    try:
        tuner.tell(placeholders[0]["tune_round"], measured_values(placeholders, chosen, results))
    except StudyMismatch as exc:
        raise StudyError(f"{directory_journal(choice_file(results, placeholders[0]))}: {exc}") from None


def round_choices(placeholders: list[dict], tuner: Tuner, *, system: dict) -> dict:
    """Record path (``raw/...``) -> what it runs in its round, or {"error": why}."""
    r = placeholders[0]["tune_round"]
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


def choose_round(placeholders: list[dict], previous: list[dict], *, experiment: dict,
                 system: dict, results: str | Path = "results", statistic: str = DEFAULT_STATISTIC) -> dict:
    """The round file of ``placeholders`` (one round of one study, every repetition):
    record path (``raw/...``) -> the measurement it runs, or {"error": why}. ``previous``:
    the placeholders of the round before (none for the first), whose records are told
    (each trial valued by ``statistic`` of its runs). StudyError naming a damaged or
    foreign journal, round file or record."""
    tuner = tuner_of(experiment, system, study_dir(results, placeholders[0]), statistic=statistic)
    if placeholders[0]["tune_round"] > 0:
        tell_round(tuner, previous, system=system, results=results)
    return round_choices(placeholders, tuner, system=system)


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


def finish(rounds: list[list[dict]], *, experiment: dict, system: dict,
           results: str | Path = "results", statistic: str = DEFAULT_STATISTIC) -> dict:
    """Tell the study every round's records again (the last round's trials complete; every
    told value checked against its records, so what it found comes from the records) and
    return what it found: the best trial whose runs all succeeded, its number, point and
    img/s at full steps (``statistic`` of its runs; None when none), its runs' count, how
    many trials ended in each state, and how many had a failed run. ``rounds``: the
    placeholders of each round of the study, in order."""
    tuner = tuner_of(experiment, system, study_dir(results, rounds[0][0]), statistic=statistic)
    for placeholders in rounds:
        tell_round(tuner, placeholders, system=system, results=results)
    best = tuner.best()
    measured = [t for t in tuner.study.get_trials(deepcopy=False) if "point" in t.user_attrs]
    states = Counter(t.state.name.lower() for t in measured)
    found = None
    if best is not None:
        point, value = best
        number = next(t.number for t in measured if t.user_attrs.get("point") == key(point) and t.value == value)
        found = {"trial": number, "point": point, "img_s": value, "statistic": statistic,
                 "runs": tuner.rounds[-1].repetitions}
    return {"best": found, "study": tuner.study_key, "trials": dict(sorted(states.items())),
            "trials_with_failed_runs": sum(bool(t.user_attrs.get("failed_runs")) for t in measured)}
