"""archbench against the papers: every published value beside the campaign's own value.

The published values are claims (:mod:`archbench.results.claims`): the throughputs of the
import files and the derived values of the claims files. archbench's value of a claim
comes from the table that defines its metric (:data:`archbench.results.claims.METRICS`), built
from the campaign's own records only (imported rows, which carry a ``source``, are left
out), so it is computed exactly as that table computes it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archbench.results.claims import DEFAULT_TOLERANCE, METRICS, TABLE_NAMES, identity_of
from archbench.results.tables.common import empty, normalise, summary_of
from archbench.results.tables.inter_intra import inter_intra_best, inter_intra_sweep
from archbench.results.tables.kernels import kernel_gflops, stream_bandwidth
from archbench.results.tables.processes import process_layout
from archbench.results.tables.scaling import best_choice, io_overhead, node_scaling
from archbench.results.tables.training import thread_efficiency, vendor_speedup

VS_PUBLISHED_COLUMNS = (
    "metric", "configuration", "matched", "unit", "published", "archbench", "difference",
    "relative_difference", "tolerance", "beyond_tolerance", "status", "source", "note",
)
# the columns that tell matched configurations apart (those the claim leaves open)
DESCRIBE = ("experiment", "system", "framework", "model", "kernel", "data",
            "vendor_library_enabled", "mkl_env", "batch_per_process", "nodes",
            "processes_per_node", "intra_threads", "threads", "inter_threads", "workers", "gpus",
            "problem_size", "tile_size", "inter_setting", "intra_setting", "cores", "count")
# each metric's table (and the candidates a best-of table picks from) from the summary
BUILDERS = {
    "summary": lambda s: s,
    "best_configuration": lambda s: best_choice(s[s["value"].notna()]),
    "inter_intra_best": inter_intra_best, "inter_intra_sweep": inter_intra_sweep,
    "node_scaling": node_scaling,
    "thread_efficiency": thread_efficiency, "vendor_speedup": vendor_speedup,
    "process_layout": process_layout, "io_overhead": io_overhead,
    "kernel_gflops": kernel_gflops, "stream_bandwidth": stream_bandwidth,
}


def vs_published(df: pd.DataFrame, published: pd.DataFrame | None = None, *,
                 statistic: str | None = None) -> pd.DataFrame:
    """archbench vs the published values: per published value (a throughput of an imported
    table, or a claim: speedup, efficiency, vendor speedup, I/O overhead ...) and every
    campaign configuration agreeing with the identity columns the paper gives, archbench's
    value in the paper's unit, difference = archbench - published (for a range: the
    distance outside it, 0 inside), relative_difference = difference / published, and
    beyond_tolerance when ``|difference|`` exceeds the tolerance (the claim's, else 10% of the
    published value). A published value the campaign has not measured is listed with an
    empty archbench value (status "not measured")."""
    if published is None or published.empty:
        return empty(VS_PUBLISHED_COLUMNS)
    tidy = normalise(df)
    own = tidy[tidy["source"].isna()]  # imported rows carry their source
    summary = summary_of(own, statistic)
    built: dict[str, pd.DataFrame] = {}
    rows = []
    for _, claim in published.iterrows():
        metric = METRICS[claim["metric"]]
        if metric.table not in built:
            built[metric.table] = BUILDERS[metric.table](summary).reset_index(drop=True)
        rows.extend(_compare(claim, built[metric.table]))
    return pd.DataFrame(rows, columns=list(VS_PUBLISHED_COLUMNS))


def _compare(claim: pd.Series, table: pd.DataFrame) -> list[dict]:
    """The rows of one claim: one per matching configuration with a value, else one."""
    metric = METRICS[claim["metric"]]
    identity = identity_of(claim)
    base = {"metric": claim["metric"], "configuration": _text(identity), "unit": claim["unit"],
            "published": _published_text(claim), "tolerance": DEFAULT_TOLERANCE if _blank(claim.get("tolerance")) else claim["tolerance"],
            "source": claim["source"], "note": "" if _blank(claim.get("note")) else claim["note"]}
    values = claim_values(claim, table)
    if values.empty:
        return [{**base, "matched": "", "archbench": np.nan, "difference": np.nan,
                 "relative_difference": np.nan, "beyond_tolerance": pd.NA,
                 "status": "not measured"}]
    out = []
    factor = metric.units[claim["unit"]]
    for index, value in values.items():
        ours = float(value) * factor
        difference, reference = _difference(claim, ours)
        limit = _limit(base["tolerance"], reference)
        beyond = bool(abs(difference) > limit + 1e-12)
        out.append({**base, "matched": _text(_described(table.loc[index], identity)),
                    "archbench": ours, "difference": difference,
                    "relative_difference": difference / reference if reference else np.nan,
                    "beyond_tolerance": beyond,
                    "status": "beyond tolerance" if beyond else "ok"})
    return out


def claim_values(claim: pd.Series, table: pd.DataFrame, rows: RowMatcher | None = None) -> pd.Series:
    """archbench's value for ``claim`` per matching table row (NaN values left out); a
    claim with a ``baseline`` divides by the value at that count of the same series.
    ``rows``: the :class:`RowMatcher` of ``table``, when it is kept across claims."""
    metric = METRICS[claim["metric"]]
    if table.empty:
        return pd.Series(dtype=float)
    mask = (rows or RowMatcher(table))(identity_of(claim))
    values = table.loc[mask, metric.column].astype(float)
    if not _blank(claim.get("baseline")):
        divisors = []
        for index in values.index:
            same = np.ones(len(table), dtype=bool)
            for column in metric.series:  # equal, or both empty
                cells, mine = table[column].astype("string"), table[column].astype("string")[index]
                same &= (cells.isna() if pd.isna(mine) else (cells == mine).fillna(False)).to_numpy()
            at_base = same & (pd.to_numeric(table[metric.count], errors="coerce") == int(claim["baseline"])).to_numpy()
            found = table.loc[at_base, metric.column].astype(float)
            divisors.append(found.iloc[0] if len(found) else np.nan)
        values = values / np.asarray(divisors, dtype=float)
    return values.dropna()


def matching_rows(table: pd.DataFrame, identity: dict) -> np.ndarray:
    """Rows of ``table`` that agree with every identity column (a missing column: none)."""
    return RowMatcher(table)(identity)


class RowMatcher:
    """:func:`matching_rows` of one table, each column compared with each value once (the
    claim check holds every claim against the same few tables)."""

    def __init__(self, table: pd.DataFrame):
        self.table = table
        self._hits: dict[tuple, np.ndarray] = {}

    def __call__(self, identity: dict) -> np.ndarray:
        mask = np.ones(len(self.table), dtype=bool)
        for name, wanted in identity.items():
            column = table_column(self.table, name)
            if column is None:
                return np.zeros(len(self.table), dtype=bool)
            mask &= self._hit(column, wanted)
        return mask

    def _hit(self, column: str, wanted: object) -> np.ndarray:
        if isinstance(wanted, (bool, np.bool_)):
            key = (column, "boolean", bool(wanted))
        elif isinstance(wanted, (int, float, np.integer, np.floating)):
            key = (column, "numeric", float(wanted))
        elif str(wanted).startswith("!"):
            key = (column, "not", str(wanted)[1:])
        else:
            key = (column, "string", str(wanted))
        if key not in self._hits:
            cells, kind, value = self.table[column], key[1], key[2]
            if kind == "boolean":
                hit = cells.astype("boolean") == value
            elif kind == "numeric":
                hit = pd.to_numeric(cells, errors="coerce") == value
            elif kind == "not":
                hit = cells.astype("string") != value
            else:
                hit = cells.astype("string") == value
            self._hits[key] = pd.Series(hit, index=self.table.index).fillna(False).astype(bool).to_numpy()
        return self._hits[key]


def table_column(table: pd.DataFrame, name: str) -> str | None:
    for candidate in (name, *TABLE_NAMES.get(name, ())):
        if candidate in table:
            return candidate
    return None


def _difference(claim: pd.Series, ours: float) -> tuple[float, float]:
    """(archbench - published, the published number it is measured against)."""
    if not _blank(claim.get("value")):
        return ours - float(claim["value"]), float(claim["value"])
    low, high = claim.get("low"), claim.get("high")
    if not _blank(low) and ours < float(low):
        return ours - float(low), float(low)
    if not _blank(high) and ours > float(high):
        return ours - float(high), float(high)
    return 0.0, float(low) if not _blank(low) else float(high)


def _limit(tolerance: str, reference: float) -> float:
    """The tolerance as an absolute difference: "N%" of ``reference``, else a number."""
    text = str(tolerance)
    if text.endswith("%"):
        return abs(reference) * float(text[:-1]) / 100.0
    return float(text)


def _published_text(claim: pd.Series) -> str:
    if not _blank(claim.get("value")):
        return _number(claim["value"])
    low = "" if _blank(claim.get("low")) else _number(claim["low"])
    high = "" if _blank(claim.get("high")) else _number(claim["high"])
    return f"{low}-{high}" if low and high else (f">= {low}" if low else f"<= {high}")


def _described(row: pd.Series, identity: dict) -> dict:
    """The matched row's describing columns the claim left open."""
    given = {c for name in identity for c in (name, *TABLE_NAMES.get(name, ()))}
    return {c: row[c] for c in DESCRIBE if c in row.index and c not in given and not _blank(row[c])}


def _text(items: dict) -> str:
    return ", ".join(f"{k}={_number(v)}" for k, v in items.items())


def _number(value: object) -> str:
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _blank(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)) or value == ""
