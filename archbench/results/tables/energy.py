"""Energy per image beside throughput (docs/metrics.md, "Energy"): for every training
configuration, per energy source that measured its windows (NVML GPU board, RAPL CPU
package and DRAM, Slurm node), joules per image and images per kWh beside its img/s; a
configuration no sensor measured says so, and why (the records' ``energy`` entries)."""

from __future__ import annotations

import pandas as pd

from archbench.core import metrics
from archbench.results.tables.common import HAS_MEAN, empty, of_kind, sort_rows, summary_of
from archbench.workloads.energy import KEYS

GROUP = (
    "experiment", "system", "device", "framework", "model", "precision", "math_mode", "graph",
    "data", "strategy", "nodes", "workers", "batch_per_process", "intra_threads", "variant",
)
ENERGY_COLUMNS = (
    *GROUP, "statistic", "n", "img_s", "img_s_min", "img_s_max", "source", "covers",
    "j_per_img", "img_per_kwh", "status",
)


def energy(df: pd.DataFrame) -> pd.DataFrame:
    """Energy per image (docs/metrics.md, "Energy"): per training configuration and energy
    source that measured its windows (``source``/``covers``: nvml gpu board, rapl cpu
    package, rapl dram, slurm node; each a separate row, never summed: they overlap),
    img/s (the campaign's statistic, min and max of the repetitions), J/img = joules over
    the window / images of all workers in it (mean over the runs that measured it) and
    img/kWh = 3.6e6 / (J/img). A configuration no sensor measured is one row without
    numbers whose status says, per source, why ("not measured: rapl cpu package, dram (no
    powercap RAPL zones ...); slurm node (not a Slurm job)"); a configuration that only failed, its failure."""
    s = of_kind(summary_of(df), "train")
    if s.empty:
        return empty(ENERGY_COLUMNS)
    s = s.assign(img_s=s["value"], img_s_min=s["min"], img_s_max=s["max"])
    rows = []
    for _, config in s.iterrows():
        base = {c: config.get(c) for c in (*GROUP, "statistic", "n", "img_s", "img_s_min", "img_s_max")}
        if config["status"] not in HAS_MEAN:
            rows.append({**base, "status": config["status"]})
            continue
        measured = [(src, covers, config.get(f"j_per_img_{key}")) for (src, covers), key in KEYS.items()
                    if pd.notna(config.get(f"j_per_img_{key}"))]
        for src, covers, jpi in measured:
            rows.append({**base, "source": src, "covers": covers, "j_per_img": float(jpi),
                         "img_per_kwh": metrics.images_per_kwh(float(jpi)) if jpi > 0 else None,
                         "status": "measured"})
        if not measured:
            why = config.get("energy_status")
            why = str(why).replace(": not measured (", " (") if pd.notna(why) and why else ""
            rows.append({**base, "status": f"not measured: {why or 'the records hold no energy'}"})
    table = pd.DataFrame(rows).reindex(columns=list(ENERGY_COLUMNS))
    table["variant"] = table["variant"].astype("string").mask(table["variant"].eq("").fillna(False))
    return sort_rows(table, [*GROUP, "source", "covers"])
