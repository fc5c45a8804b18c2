"""Whether what a choice file says a placeholder runs is what its plan lets it run.

A placeholder (:mod:`archbench.plan.placeholders`: a `best` measurement, a tuner's trial)
runs the entry its choice file (``results/best/...``, ``results/tune/.../round<k>.json``)
holds for its record. archbench wrote that file, but it is a file on disk: a hand edit,
another version's file or a damaged one must not put environment variables, arguments
or another layout's identity in front of a worker. An entry may differ from its
placeholder only in the layout a choice makes (processes, threads, batch, the tuner's
searched settings and knobs), with values of the types the plan gives them; everything
else (``env``, the system, model, steps, limits, the record's identity) must be the
placeholder's own.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from archbench.core.fields import NUMERICS_DEFAULTS
from archbench.plan.experiment_types.tune import searched_settings

# The layout a choice makes: counts (the best layout's fields, and what follows from them).
COUNTS = ("processes_per_node", "intra_threads", "inter_threads", "batch_per_process",
          "workers", "global_batch")
MAX_COUNT = 2**30
# A placeholder's markers, which the entry resolving it drops.
MARKERS = ("best_of", "tune_round")
WORD = re.compile(r"^[A-Za-z0-9_.:+-]{1,64}$")


def is_scalar(value: Any) -> bool:
    """A value that can reach a command line as one plain word: a finite number, a
    boolean, or a short word of letters, digits and ``_.:+-``."""
    if isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return value == value and abs(value) < float("inf")
    return isinstance(value, str) and bool(WORD.match(value))


def is_count(value: Any) -> bool:
    """A non-negative integer count within the plan's bounds."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT


def chosen_keys(placeholder: Mapping[str, Any]) -> set[str]:
    """The top-level keys a choice may set: the layout, and a tuner's searched settings
    for a tuner's trial (a `best` layout keeps its sweep's numerics)."""
    searched = {s.planned for s in searched_settings() if "." not in s.planned}
    return {*COUNTS, *(searched if "trial" in placeholder else ())}


def may_drop(placeholder: Mapping[str, Any], key: str) -> bool:
    """Whether an entry may leave out a key its placeholder has: a placeholder's marker,
    or a numerics setting the entry then runs at its default (one it chose, or that the
    placeholder has at its default)."""
    if key in MARKERS:
        return True
    return key in NUMERICS_DEFAULTS and ("trial" in placeholder
                                         or placeholder[key] == NUMERICS_DEFAULTS[key])


def shown(key: Any) -> str:
    """A key as a message names it: itself when a plain word, else its repr."""
    return key if isinstance(key, str) and WORD.match(key) else repr(key)


def planned_tuning(placeholder: Mapping[str, Any]) -> dict:
    """The settings a placeholder's entry keeps under ``tuning``: its own, and the `best`
    sweep it takes its layout from."""
    own = dict(placeholder.get("tuning") or {})
    return {**own, "best_of": placeholder["best_of"]} if placeholder.get("best_of") else own


def refusal(placeholder: Mapping[str, Any], entry: Any) -> str | None:
    """Why ``entry`` may not run as ``placeholder`` ("key: reason", naming no value the
    entry holds), or None when it differs from it only in the layout a choice makes."""
    if not isinstance(entry, dict):
        return "not a measurement (a JSON object)"
    chosen = chosen_keys(placeholder)
    for key in sorted(set(placeholder) | set(entry), key=str):
        if key in ("tuning", "trial"):
            continue
        if key not in entry:
            if not may_drop(placeholder, key):
                return f"{key}: missing (its plan gives {placeholder[key]!r})"
        elif key in chosen:
            if not (is_count(entry[key]) if key in COUNTS else is_scalar(entry[key])):
                return f"{key}: no value its plan can give it"
        elif key not in placeholder:
            return f"{shown(key)}: not a key a choice sets (its plan has none)"
        elif key == "env" and isinstance(entry[key], dict) and entry[key] != placeholder[key]:
            name = next(k for k in sorted({*entry[key], *placeholder[key]}, key=str)
                        if entry[key].get(k, None) != placeholder[key].get(k, None))
            planned = placeholder[key].get(name)
            return (f"env.{shown(name)}: not what its plan gives "
                    f"({'unset' if planned is None else repr(planned)})")
        elif entry[key] != placeholder[key]:
            return f"{key}: not what its plan gives ({placeholder[key]!r})"
    tuning, kept = entry.get("tuning", {}), planned_tuning(placeholder)
    if not isinstance(tuning, dict) or not all(
            isinstance(k, str) and WORD.match(k) and (is_scalar(v) or kept.get(k) == v)
            for k, v in tuning.items()):
        return "tuning: not a mapping of settings to plain values"
    if "trial" in placeholder:
        trial, planned = entry.get("trial"), dict(placeholder["trial"])
        if not isinstance(trial, dict) or not is_count(trial.get("number")) \
                or {**trial, "number": None} != {**planned, "number": None}:
            return "trial: not the placeholder's trial with a trial number"
    elif "trial" in entry:
        return "trial: not a key a choice sets (its plan has none)"
    return None
