"""Energy per image beside throughput (docs/metrics.md, "Energy"): for every training
configuration, per energy source that measured its windows (NVML GPU board, RAPL CPU
package and DRAM, Slurm node), joules per image and images per kWh beside its img/s; a
configuration no sensor measured says so, and why (the records' ``energy`` entries)."""

from __future__ import annotations

import pandas as pd

from archbench.core.fields import EVERY_TABLE
from archbench.core import metrics
from archbench.results.tables.common import (
    HAS_MEAN,
    empty,
    is_summary,
    normalise,
    of_kind,
    sort_rows,
    summary_of,
)
from archbench.results.tables.frameworks import _identity
from archbench.workloads.energy import KEYS

# How far one configuration's repetitions may disagree on J/img before its row says so:
# the largest over the smallest. Power and throughput each move some per cent from run to
# run; a factor of 2 is no noise but a sensor or a run that differs.
DISAGREE = 2.0

GROUP = (
    "experiment", "system", "device", "framework", "model", *EVERY_TABLE,
    "data", "strategy", "nodes", "workers", "batch_per_process", "intra_threads", "variant",
)
ENERGY_COLUMNS = (
    *GROUP, "statistic", "n", "img_s", "img_s_min", "img_s_max", "source", "covers",
    "j_per_img", "img_per_kwh", "host_busy", "status",
)


def energy(df: pd.DataFrame, statistic: str | None = None) -> pd.DataFrame:
    """Energy per image (docs/metrics.md, "Energy"): per training configuration and energy
    source that measured its windows (``source``/``covers``: nvml gpu board, rapl cpu
    package, rapl dram, slurm node; each a separate row, never summed: they overlap),
    img/s (the campaign's statistic, min and max of the repetitions), J/img = joules over
    the window / images of all workers in it (mean over the runs that measured it) and
    img/kWh = 3.6e6 / (J/img). A configuration no sensor measured is one row without
    numbers whose status says, per source, why ("not measured: rapl cpu package, dram (no
    powercap RAPL zones ...); slurm node (not a Slurm job)"); a configuration that only failed, its failure.
    A source whose repetitions disagree by more than :data:`DISAGREE` x on J/img says so
    in its status ("measured; repetitions disagree: 0.156 to 1.56e+03 J/img")."""
    s = of_kind(summary_of(df, statistic), "train")
    if s.empty:
        return empty(ENERGY_COLUMNS)
    s = s.assign(img_s=s["value"], img_s_min=s["min"], img_s_max=s["max"])
    spread = _repetitions(None if is_summary(df) else df if "variant" in df else normalise(df))
    keys = _identity(s)
    rows = []
    for key, (_, config) in zip(keys, s.iterrows()):
        base = {c: config.get(c) for c in (*GROUP, "statistic", "n", "img_s", "img_s_min", "img_s_max")}
        if config["status"] not in HAS_MEAN:
            rows.append({**base, "status": config["status"]})
            continue
        measured = [(src, covers, config.get(f"j_per_img_{key}")) for (src, covers), key in KEYS.items()
                    if pd.notna(config.get(f"j_per_img_{key}"))]
        for src, covers, jpi in measured:
            low, high = spread.get((key, KEYS[src, covers]), (jpi, jpi))
            status = "measured" if high <= DISAGREE * low else (
                f"measured; repetitions disagree: {low:.3g} to {high:.3g} J/img")
            rows.append({**base, "source": src, "covers": covers, "j_per_img": float(jpi),
                         "img_per_kwh": metrics.images_per_kwh(float(jpi)) if jpi > 0 else None,
                         "status": status})
        if not measured:
            why = config.get("energy_status")
            why = str(why).replace(": not measured (", " (") if pd.notna(why) and why else ""
            rows.append({**base, "status": f"not measured: {why or 'the records hold no energy'}"})
    table = pd.DataFrame(rows).reindex(columns=list(ENERGY_COLUMNS))
    table["variant"] = table["variant"].astype("string").mask(table["variant"].eq("").fillna(False))
    return sort_rows(table, [*GROUP, "source", "covers"])


def _repetitions(runs: pd.DataFrame | None) -> dict[tuple, tuple[float, float]]:
    """(configuration identity, source key) -> (least, most) J/img over its ok runs that
    measured it; empty for a summary (its runs are gone)."""
    if runs is None or runs.empty or "status" not in runs:
        return {}
    ok = runs[runs["status"].eq("ok").fillna(False).astype(bool)]
    out: dict[tuple, tuple[float, float]] = {}
    for key in KEYS.values():
        column = f"energy_{key}_j_per_img"
        if column not in ok:
            continue
        for identity, value in zip(_identity(ok), pd.to_numeric(ok[column], errors="coerce")):
            if pd.notna(value):
                low, high = out.get((identity, key), (value, value))
                out[identity, key] = (min(low, float(value)), max(high, float(value)))
    return out
