"""The two record sets a comparison reads (:mod:`archbench.results.comparison`): a results
folder's records or a collected table, each side's records kept by filters on the tidy
table's columns, and a campaign's ``compare_with:`` baseline. A results folder's records
that contradict its spec files (``specs/<campaign>/<digest>.json``) are left out with the
reason, as collection leaves them out (:func:`read_folder`)."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from archbench.plan.plan_match import plans_of, spec_measurements
from archbench.results.collect import Plans, collect, record_files
from archbench.results.tables.common import KEYS, normalise
from archbench.workloads.ceiling import beyond_peak
from archbench.workloads.names import unregistered

DEFAULT_THRESHOLD = 0.02  # the practical band of a comparison (docs/compare.md)
HEX_FIELDS = ("git_commit", "image_sha256", "config_hash")  # "=" matches a prefix


class CompareError(ValueError):
    """A comparison that cannot be made: a missing results folder, a bad filter."""


@dataclass(frozen=True)
class Filter:
    """One condition on a tidy-table column: ``column op value`` (op: =, !=, >=, <)."""

    column: str
    op: str
    value: str

    def mask(self, frame: pd.DataFrame) -> pd.Series:
        """Rows of ``frame`` that satisfy the condition (a missing value only ``!=``)."""
        if self.column not in frame:
            raise CompareError(f"filter {self}: no column '{self.column}' in the records")
        column = frame[self.column]
        target: object = self.value
        if pd.api.types.is_bool_dtype(column):
            target = {"true": True, "on": True, "yes": True, "1": True,
                      "false": False, "off": False, "no": False, "0": False}.get(self.value.lower())
            if target is None:
                raise CompareError(f"filter {self}: '{self.value}' is not true or false")
        elif pd.api.types.is_numeric_dtype(column) and _is_number(self.value):
            target = float(self.value)
        else:
            column = column.astype("string")
        if self.op in ("=", "!=") and self.column in HEX_FIELDS:
            hit = column.str.startswith(self.value)
        elif self.op in ("=", "!="):
            hit = column == target
        else:
            hit = column >= target if self.op == ">=" else column < target
        hit = pd.Series(hit, index=frame.index).astype("boolean")
        if self.op == "!=":
            return (~hit).fillna(True).astype(bool)
        return hit.fillna(False).astype(bool)

    def __str__(self) -> str:
        return f"{self.column}{self.op}{self.value}"


FILTER = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(!=|>=|<|=)(.*)$")


def parse_filter(text: str) -> Filter:
    """``KEY=VALUE``, ``KEY!=VALUE``, ``KEY>=VALUE`` or ``KEY<VALUE`` as a :class:`Filter`."""
    found = FILTER.match(text.strip())
    if not found:
        raise CompareError(f"filter '{text}': expected KEY=VALUE, KEY!=VALUE, KEY>=VALUE or KEY<VALUE")
    return Filter(*found.groups())


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def raw_folder(source: str | os.PathLike) -> Path | None:
    """The ``raw/`` folder of a results folder ``source`` (``source/raw``, ``source`` itself
    when it is one, or ``source/results/raw``), None when it has none."""
    path = Path(source)
    return next((p for p in (path / "raw", path, path / "results" / "raw")
                 if p.name == "raw" and p.is_dir()), None)


def is_table(source: str | os.PathLike) -> bool:
    """True when ``source`` is a collected table (``measurements.csv`` or ``.parquet``)."""
    return Path(source).is_file() and Path(source).suffix in (".csv", ".parquet")


def record_paths(source: str | os.PathLike) -> list[Path]:
    """The record files of a results folder (``raw/<system>/<experiment>/<config_id>/rep<k>.json``)
    or, for a collected table, the table itself."""
    if is_table(source):
        return [Path(source)]
    raw = raw_folder(source)
    if raw is None:
        raise CompareError(f"{source}: not a results folder (no raw/ in it) nor a measurements table")
    return record_files(raw)


def folder_plans(raw: Path) -> Plans:
    """What the spec files beside a ``raw/`` folder (``specs/<campaign>/<digest>.json``)
    planned for each of its record paths (:func:`archbench.plan.plan_match.plans_of`);
    none when it has no spec files (records copied without them are checked for sense only)."""
    return plans_of(raw.parent, spec_measurements(raw.parent))


def read_folder(source: str | os.PathLike) -> tuple[pd.DataFrame, list[str]]:
    """The tidy table of a results folder's records and one line for each record left out:
    invalid, nonsensical, or not what the folder's spec files planned for its path."""
    raw = raw_folder(source)
    return collect(record_paths(source), folder_plans(raw) if raw is not None else None)


def read_side(source: str | os.PathLike, filters: Sequence[Filter] = ()) -> tuple[pd.DataFrame, list[str]]:
    """The tidy table of one side and the lines naming the records left out as invalid:
    ``source`` is a results folder holding ``raw/`` (or that ``raw/`` folder, or a folder
    holding ``results/raw/``), or a collected table (``measurements.csv``/``.parquet``);
    only the rows every filter keeps."""
    if is_table(source):
        from archbench.results.artifacts import read_measurements
        frame, errors = read_measurements(source), []
    else:
        frame, errors = read_folder(source)
        frame = normalise(frame)
    for condition in filters:
        frame = frame[condition.mask(frame)]
    return frame.reset_index(drop=True), errors


def implausible_row(frame: pd.DataFrame) -> str:
    """"" when every row of a measurements table names registered models and kernels and
    states a throughput its hardware can deliver (the bound records are held to,
    :func:`archbench.workloads.ceiling.beyond_peak`), else one line naming the first
    other row: "line <n>: <field>: <why>" (the header is line 1). Records were checked
    when collected; a table's rows may have been written by anyone."""
    for number, values in enumerate(frame.to_dict("records")):
        row = {k: (None if not isinstance(v, str) and pd.isna(v) else v) for k, v in values.items()}
        nameless = unregistered({"model": row.get("model"), "kernel": row.get("kernel")})
        if nameless:
            return f"line {number + 2}: {nameless}"
        if row.get("status", "ok") == "ok" and (impossible := beyond_peak(row)):
            return f"line {number + 2}: throughput: {impossible}"
    return ""


@dataclass(frozen=True)
class Baseline:
    """A campaign's ``compare_with``: the baseline's results, the threshold, the across fields."""

    results: str
    threshold: float = DEFAULT_THRESHOLD
    across: tuple[str, ...] = ()


def baseline(setting: str | dict, own: str | os.PathLike = "results") -> Baseline:
    """A campaign's ``compare_with`` (a path, or ``{results, threshold, across}``), checked:
    a results folder or collected table other than the campaign's own ``own`` folder, and
    identity fields to compare across. CompareError names what is wrong."""
    found = Baseline(setting) if isinstance(setting, str) else Baseline(
        setting["results"], float(setting.get("threshold", DEFAULT_THRESHOLD)),
        tuple(setting.get("across", ())))
    record_paths(found.results)  # raises for neither a results folder nor a table
    raw = raw_folder(found.results)
    if raw is not None and raw.resolve() == (Path(own) / "raw").resolve():
        raise CompareError(f"{found.results}: the campaign's own results, not a baseline")
    unknown = [f for f in found.across if f not in KEYS]
    if unknown:
        raise CompareError(f"across: {', '.join(unknown)}: not identity fields ({', '.join(KEYS)})")
    return found


def implied_across(base: Sequence[Filter], new: Sequence[Filter]) -> list[str]:
    """Identity fields both sides pin with ``=`` to different values: the comparison is
    across them (e.g. ``vendor_library_enabled=true`` vs ``=false``)."""
    pinned = [{f.column: f.value for f in side if f.op == "=" and f.column in KEYS}
              for side in (base, new)]
    return sorted(c for c in pinned[0].keys() & pinned[1].keys() if pinned[0][c] != pinned[1][c])
