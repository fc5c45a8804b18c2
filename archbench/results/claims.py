"""Published values: the numbers a paper prints, as data a campaign is compared with.

Throughputs a paper prints in tables import through :mod:`archbench.importer` (each row a
published img/s, GFLOP/s or bandwidth). The *derived* values it prints -- a speedup, an
efficiency, an I/O overhead, a range such as "1.7-6.9x" -- are *claims*, one per row of
a claims file (a CSV whose name is ``claims.csv`` or ends in ``-claims.csv``, e.g.
``data/published/bsc-2019/bsc-2019-claims.csv``). Columns, in any order:

====================  ========  ===========================================================
column                required  meaning
====================  ========  ===========================================================
metric                yes       what is claimed (:data:`METRICS`: throughput, speedup, ...)
value                 one of    the published value
low / high            these     a published range (one bound alone: "over 6", "below 2300")
unit                  yes       the value's unit (:data:`METRICS` lists each metric's units)
tolerance             no        how far archbench may differ before it is flagged: a number
                                in ``unit``, or "N%" of the published value (or of the
                                bound it passes); default :data:`DEFAULT_TOLERANCE`
source                yes       where the paper prints it: paper, section, table/figure
note                  no        free text (e.g. what the paper's wording was)
identity columns      no        the configuration the value belongs to (:data:`IDENTITY`,
                                and every setting column of the import format:
                                :func:`identity_columns`), named as in the import format:
                                system, framework, model, kernel, device, data, batch, nodes,
                                workers, gpus, threads, ...
baseline              no        for speedup and kernel_speedup: the count the ratio is
                                relative to (e.g. 2 for "from two to four GPUs")
====================  ========  ===========================================================

A claim applies to every configuration of the campaign that agrees with the identity
columns it gives (and only those it gives: a claim without ``model`` holds for every
model). A text cell ``!x`` matches anything but ``x`` (e.g. ``mkl_env`` ``!none``: any MKL
setting). When the campaign is checked, a claim that no configuration of it can match (a
name it does not run, an identity column the metric's table does not have, a baseline
count its series lack) is refused (:mod:`archbench.results.claims_vs_plan`). The
settings an import row defaults are the exception
(:func:`archbench.results.imports.setting_defaults`, today the framework): a claim (or an
imported throughput) that names none is TensorFlow's
(:data:`archbench.core.fields.DEFAULT_FRAMEWORK`), as every
claim was before PyTorch ran beside it; a PyTorch claim says ``framework`` ``pytorch``.

A malformed file raises :class:`archbench.results.imports.ImportFormatError` with one line naming
the file, row and column. The file checks of :mod:`archbench.importer` apply (a missing,
non-UTF-8 or header-only file, a repeated column, a wrong field count, a cell that is not
printable); besides, text identity cells are names (up to 64 letters, digits, ``_ . + -``,
after an optional ``!``), value, low and high are finite plain decimals of at most 1e21 in
magnitude, a tolerance is a non-negative number or percentage, counts are 1 to 1,000,000
(problem and tile sizes up to 2**50), the unit is one of the metric's, and a throughput,
GFLOP/s or bandwidth ``value`` or ``low`` is within the physical bound of the hardware its
identity columns count (:func:`archbench.workloads.ceiling.beyond_peak`; a claim that
gives no nodes, workers or GPUs holds for any scale and is not bounded). Two claims
of one metric for one configuration (the same identity columns and baseline) must be
able to hold together: a file in which no value lies within both claims' tolerances
(4,000 and 9,000 img/s at 10%) is refused naming both rows; one value stated twice (an
abstract's 1.7x for a section's 1.74x) passes.

:func:`check_imports` checks a campaign's ``imports:`` (import and claims files) when the
workflow is planned; ``python -m archbench.results.claims FILE...`` checks files and prints
their claims.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from archbench.core.csvfile import ImportFormatError, at_row, clean_text, parse_number, read_rows, show
from archbench.results.imports import (
    INT_COLUMNS,
    MAX_VALUE,
    NAME,
    RECORD_FIELD,
    UNITS,
    canonical_unit,
    mapping_of,
    parse_cell,
    outside_matrix_of,
    read_values,
    scaling_unit,
    setting_columns,
    setting_defaults,
)
from archbench.workloads.ceiling import beyond_peak
from archbench.workloads.names import registered


@dataclass(frozen=True)
class Metric:
    """Where archbench's value of a metric comes from: the registered table ``table`` of
    :mod:`archbench.results.tables`, its column ``column``, converted to a claim's unit by
    ``units[unit]``; ``series``/``count``: how a ``baseline`` claim finds its base row;
    ``candidates``: for a table that keeps the best of several rows, the table of all of
    them (a claim may match any before the campaign has run, :mod:`archbench.results.claims_vs_plan`)."""

    table: str
    column: str
    units: dict
    series: tuple = ()
    count: str = ""
    candidates: str = ""


RATIO = {"x": 1.0}


def _units_of(base: str) -> dict:
    """Every import unit (:data:`archbench.results.imports.UNITS`) the tables give in ``base``,
    with its value per one ``base``."""
    return {unit: per for unit, (of, per) in UNITS.items() if of == base}


METRICS: dict[str, Metric] = {
    # img/s of a configuration, at its best parameter-server count and variable update
    "throughput": Metric("best_configuration", "value", {"img/s": 1.0}, candidates="summary"),
    # the best img/s per inter-op setting of an inter/intra-op sweep (CESGA 2018 Table 2)
    "best_throughput": Metric("inter_intra_best", "img_s", {"img/s": 1.0},
                              candidates="inter_intra_sweep"),
    "speedup": Metric("node_scaling", "speedup", RATIO,
                      ("experiment", "system", "model", "series"), "count"),
    "efficiency": Metric("node_scaling", "efficiency", {"fraction": 1.0, "%": 100.0}),
    "thread_efficiency": Metric("thread_efficiency", "efficiency", {"fraction": 1.0, "%": 100.0}),
    "vendor_speedup": Metric("vendor_speedup", "speedup", RATIO),
    "process_speedup": Metric("process_layout", "speedup", RATIO),
    "io_overhead": Metric("io_overhead", "io_overhead_percent", {"%": 1.0}),
    "gflops": Metric("kernel_gflops", "gflops", _units_of("GFLOP/s")),
    "kernel_speedup": Metric("kernel_gflops", "speedup", RATIO,
                             ("experiment", "system", "kernel", "problem_size", "tile_size"),
                             "workers"),
    "bandwidth": Metric("stream_bandwidth", "bandwidth_gb_s", _units_of("GB/s")),
}
DEFAULT_TOLERANCE = "10%"  # a reproduction within 10% of the paper is not flagged

INT_IDENTITY = ("batch", "nodes", "workers", "gpus", "gpus_per_node", "processes_per_node",
                "threads", "inter_threads", "problem_size", "tile_size", "parameter_servers",
                "cores", "baseline")
BOOL_IDENTITY = ("vendor_library_enabled",)
TEXT_IDENTITY = ("system", "framework", "model", "kernel", "device", "data", "strategy", "vendor_library",
                 "variable_update", "inter_setting", "intra_setting", "mkl_env")
IDENTITY = TEXT_IDENTITY + INT_IDENTITY + BOOL_IDENTITY
CLAIM_FIELDS = ("metric", "value", "low", "high", "unit", "tolerance", "source", "note")
# import-format names -> the tables' column names (the first a table has is used)
TABLE_NAMES = {"batch": ("batch_per_process",), "threads": ("intra_threads", "threads")}
# counts that are not part of a published throughput's identity: they grow with its
# scaling unit (as archbench.results.tables.scaling.GROWS_WITH), or are settings tried per size
_PACKING = ("nodes", "workers", "gpus", "processes_per_node", "gpus_per_node")
NOT_IDENTITY = {"nodes": ("workers", "gpus"), "workers": _PACKING, "gpus": _PACKING}
IMPORT_SKIPPED = ("experiment", "experiment_type", "arch", "scaling_unit", "repetition",
                  "global_batch", "parameter_servers", "variable_update", "throughput",
                  "unit", "error", "source")


def identity_columns() -> tuple[str, ...]:
    """:data:`IDENTITY` and every setting column of the import format it lacks
    (:func:`archbench.results.imports.setting_columns`: a setting declared later), read
    when asked."""
    return IDENTITY + tuple(c for c in setting_columns() if c not in IDENTITY)


def is_claims_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a claims file (``claims.csv`` or ``*-claims.csv``)."""
    stem = Path(path).stem
    return Path(path).suffix == ".csv" and (stem == "claims" or stem.endswith("-claims"))


def _tolerance(text: str) -> str:
    if not 0 <= parse_number(text.removesuffix("%")) <= MAX_VALUE:
        raise ValueError(f"'{show(text)}' is not a non-negative number up to {MAX_VALUE:g}")
    return text


def _claim_cell(name: str, cell: str) -> object:
    """One typed cell of a claims file; raises ValueError with the reason."""
    text = clean_text(cell)
    if name in ("value", "low", "high"):
        if abs(number := parse_number(text)) > MAX_VALUE:
            raise ValueError(f"'{show(text)}' is beyond {MAX_VALUE:g}")
        return number
    if name == "tolerance":
        return _tolerance(text)
    if name == "metric" and text not in METRICS:
        raise ValueError(f"'{show(text)}' is not one of {', '.join(METRICS)}")
    if name == "unit":
        return canonical_unit(text) or text
    if name in INT_IDENTITY:
        return parse_cell(text, name if name in INT_COLUMNS else "nodes")  # counts >= 1
    if name in BOOL_IDENTITY:
        return parse_cell(text, name)
    if name in TEXT_IDENTITY and not NAME.fullmatch(text.removeprefix("!")):
        raise ValueError(f"'{show(text)}' is not a name (up to 64 letters, digits, _ . + -; ! before: not)")
    if name not in IDENTITY and name in setting_columns():
        return parse_cell(text, name)  # a setting column typed by its Setting
    return text


def read_claims(path: str | os.PathLike) -> pd.DataFrame:
    """The claims of one claims file (see the module docstring), one row each."""
    path = Path(path)
    identity = identity_columns()
    header, rows = read_rows(path, [*CLAIM_FIELDS, *identity], "a claims file")
    for name in header:
        if name not in CLAIM_FIELDS and name not in identity:
            raise ImportFormatError(f"{path}: row 0 (header): column '{show(name)}': unknown column")
    for name in ("metric", "unit", "source"):
        if name not in header:
            raise ImportFormatError(f"{path}: row 0 (header): column '{name}': missing")
    claims = []
    for number, line, cells in rows:
        where = at_row(path, number, line)
        claim: dict = {}
        for name, cell in zip(header, cells):
            if cell.strip(" "):
                try:
                    claim[name] = _claim_cell(name, cell)
                except ValueError as exc:
                    raise ImportFormatError(f"{where}: column '{name}': {exc}") from None
        claims.append(_checked(claim, where, f"{path.name}, row {number}"))
    check_contradictions(path, claims, [line for _, line, _ in rows])
    return pd.DataFrame(claims, columns=[*CLAIM_FIELDS, "file", *identity])


def accepted(claim: dict) -> tuple[float, float]:
    """The values of the claim's metric, in its base unit (a fraction and a percentage of
    one efficiency compare equal), that ``vs_published`` finds within its tolerance: its
    value or range widened by the tolerance (of the value, or of the bound passed)."""
    per = METRICS[claim["metric"]].units[claim["unit"]]
    tolerance = str(claim.get("tolerance") or DEFAULT_TOLERANCE)

    def limit(reference: float) -> float:
        if tolerance.endswith("%"):
            return abs(reference) * float(tolerance[:-1]) / 100.0
        return float(tolerance)

    low, high = claim.get("low", claim.get("value")), claim.get("high", claim.get("value"))
    low = -float("inf") if low is None else low - limit(low)
    high = float("inf") if high is None else high + limit(high)
    return low / per, high / per


def check_contradictions(path: Path, claims: list[dict], lines: list[int]) -> None:
    """Raise ImportFormatError naming both rows when two ``claims`` (in file order, data
    row i on line ``lines[i-1]``) state one metric of one configuration (the same metric,
    identity columns and baseline) and no value satisfies both within their tolerances:
    ``vs_published`` would flag the campaign whatever it measures. A paper that states one
    value twice (in its abstract and a section, once rounded) passes."""
    seen: dict[tuple, list[int]] = {}
    identity_names = identity_columns()
    for number, claim in enumerate(claims, start=1):
        key = (claim["metric"], *((k, claim.get(k)) for k in identity_names))
        low, high = accepted(claim)
        for first in seen.get(key, []):
            earlier = claims[first - 1]
            other_low, other_high = accepted(earlier)
            if low <= other_high and other_low <= high:
                continue
            identity = ", ".join(f"{k}={_plain(claim[k])}" for k in identity_names if k in claim)
            raise ImportFormatError(
                f"{path}: rows {first} and {number} (lines {lines[first - 1]} and "
                f"{lines[number - 1]}): two {claim['metric']} claims of one configuration "
                f"({identity}) that cannot both hold: {_said(earlier)} and {_said(claim)} "
                "(keep the one the paper states, or widen a tolerance)")
        seen.setdefault(key, []).append(number)


def _plain(value: object) -> str:
    """A cell as written: counts without a decimal point."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _said(claim: dict) -> str:
    """A claim's value or range as written, with its unit and tolerance."""
    if "value" in claim:
        said = f"{claim['value']:g}"
    else:
        low, high = claim.get("low"), claim.get("high")
        said = f"{'' if low is None else f'{low:g}'}-{'' if high is None else f'{high:g}'}"
    return f"{said} {claim['unit']} (tolerance {claim.get('tolerance') or DEFAULT_TOLERANCE})"


def _checked(claim: dict, where: str, file: str) -> dict:
    """``claim`` after the checks that span columns."""
    for name in ("metric", "unit", "source"):
        if name not in claim:
            raise ImportFormatError(f"{where}: column '{name}': empty")
    metric = METRICS[claim["metric"]]
    if claim["unit"] not in metric.units:
        raise ImportFormatError(f"{where}: column 'unit': '{show(claim['unit'])}' is not a unit of "
                                f"{claim['metric']} ({', '.join(metric.units)})")
    if "value" in claim and ("low" in claim or "high" in claim):
        raise ImportFormatError(f"{where}: column 'value': give a value or low/high, not both")
    if not {"value", "low", "high"} & set(claim):
        raise ImportFormatError(f"{where}: column 'value': empty (give a value or low/high)")
    if claim.get("low", -float("inf")) > claim.get("high", float("inf")):
        raise ImportFormatError(f"{where}: column 'low': above high")
    if "baseline" in claim and not metric.series:
        raise ImportFormatError(f"{where}: column 'baseline': {claim['metric']} takes no baseline")
    if gap := _outside_matrix(claim):
        raise ImportFormatError(f"{where}: column '{gap[0]}': {gap[1]}")
    row = {RECORD_FIELD.get(name, name): value for name, value in claim.items()}
    for column in ("value", "low"):  # a claim may not imply more than the hardware can do
        if column in claim and (impossible := beyond_peak(row, claim[column], claim["unit"])):
            raise ImportFormatError(f"{where}: column '{column}': {impossible}")
    return {**setting_defaults(), **claim, "file": file}


def _outside_matrix(claim: dict) -> tuple[str, str] | None:
    """(column, why) when no framework the claim may mean runs its strategy x variable
    update x device (:func:`archbench.results.imports.outside_matrix_of`): the one it
    names, or, for ``!x``, every registered one but x; a ``!x`` cell of another column
    names nothing and is left out."""
    stated = {k: v for k, v in claim.items() if not str(v).startswith("!")}
    negated = str(claim.get("framework", "")).removeprefix("!") if "framework" not in stated else None
    meant = [stated] if not negated else [{**stated, "framework": f} for f in registered("framework")
                                          if f != negated]
    gaps = [outside_matrix_of(row) for row in meant]
    return gaps[0] if gaps and all(gaps) else None


def import_claims(path: str | os.PathLike, mapping: dict | None = None) -> pd.DataFrame:
    """The throughputs of one import file as claims (metric throughput, gflops or
    bandwidth by unit): identity = the columns the row gives, without the counts that grow
    with its scaling unit (the unit's own count stays) and without the per-size settings
    (parameter servers, variable update), as a published peak per size is compared with
    archbench's best setting per size."""
    path = Path(path)
    claims = []
    names = identity_columns()
    for number, values in read_values(path, mapping):
        metric = _throughput_metric(values["unit"])
        if metric is None:
            raise ImportFormatError(f"{path}: row {number}: column 'unit': '{values['unit']}' "
                                    "has no published-value metric")
        unit = scaling_unit(values)
        skipped = set(IMPORT_SKIPPED) | set(NOT_IDENTITY.get(unit or "", ()))
        identity = {**setting_defaults(),
                    **{k: v for k, v in values.items() if k in names and k not in skipped}}
        if unit:
            identity[unit] = values.get(unit)
        claims.append({**identity, "metric": metric, "value": values["throughput"],
                       "unit": values["unit"],
                       "source": values.get("source", f"{path.name}, row {number}"),
                       "note": f"imported from {path.name}", "file": f"{path.name}, row {number}"})
    return pd.DataFrame(claims, columns=[*CLAIM_FIELDS, "file", *names])


def _throughput_metric(unit: str) -> str | None:
    for name in ("throughput", "gflops", "bandwidth"):
        if unit in METRICS[name].units:
            return name
    return None


def load_published(paths: Iterable[str | os.PathLike],
                   mapping_dirs: Sequence[str | os.PathLike] = ()) -> pd.DataFrame:
    """Every claim of ``paths``: claims files as read, import files as their throughputs
    (each with its mapping sidecar, :func:`archbench.results.imports.find_mapping`)."""
    frames = []
    for path in paths:
        if is_claims_file(path):
            frames.append(read_claims(path))
        else:
            frames.append(import_claims(path, mapping_of(path, mapping_dirs)))
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=[*CLAIM_FIELDS, "file", *identity_columns()])
    return pd.concat(frames, ignore_index=True)


def check_imports(paths: Iterable[str | os.PathLike],
                  mapping_dirs: Sequence[str | os.PathLike] = ()) -> None:
    """Raise ImportFormatError (one line, e.g. 'FILE: no such import file') unless every
    file of a campaign's ``imports:`` reads as the jobs that merge and compare them read
    it: import files with their sidecars, and claims files. Fast (milliseconds for the
    shipped files), so the workflow runs it when planned and a malformed import stops
    it before any job."""
    load_published(list(paths), mapping_dirs)


def identity_of(claim: pd.Series) -> dict:
    """The identity columns ``claim`` gives (``baseline`` apart), in
    :func:`identity_columns` order."""
    return {k: claim[k] for k in identity_columns()
            if k != "baseline" and k in claim and not _missing(claim[k])}


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def main(argv: Sequence[str] | None = None) -> int:
    """Check published files (claims or import files) and print their claims."""
    parser = argparse.ArgumentParser(prog="python -m archbench.results.claims",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    try:
        claims = load_published(args.files)
    except ImportFormatError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(claims.dropna(axis=1, how="all").to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
