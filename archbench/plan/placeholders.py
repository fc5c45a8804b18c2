"""Measurements whose configuration the workflow chooses when they are about to run: a
node-scaling `best` measurement (its layout from its hybrid sweep's records) and a tuner's
trial (``tune_round``: its configuration from the round's file, archbench/execute/tune_rounds.py).
Each planned record path is fixed; what it runs is read from the choice file, keyed by
record path (``raw/...``), as the measurement, or ``{"error": why}``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping


def is_placeholder(measurement: Mapping[str, Any]) -> bool:
    """True for a measurement whose configuration is chosen at run time."""
    return bool(measurement.get("best_of")) or "tune_round" in measurement


def study_dir(results: str | os.PathLike, measurement: Mapping[str, Any]) -> Path:
    """The folder of a tune experiment's study for the measurement's system, framework and
    model, keyed by its study (``trial.study``: space, rounds, seed and budget), so an
    edited space or budget starts a study of its own beside the old one: the Optuna
    journal and one file per round."""
    key = (measurement.get("trial") or {}).get("study")
    return Path(results, "tune", measurement["system"], measurement["experiment"],
                f"{measurement['framework']}-{measurement['model']}" + (f"-{key}" if key else ""))


def choice_file(results: str | os.PathLike, measurement: Mapping[str, Any]) -> Path:
    """Where the workflow writes what a placeholder runs, under results folder ``results``."""
    if "tune_round" in measurement:
        return study_dir(results, measurement) / f"round{measurement['tune_round'] + 1}.json"
    return Path(results, "best", measurement["system"], f"{measurement['experiment']}.json")
