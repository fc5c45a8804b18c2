"""The platform table (BSC 2019 Table I, OSU 2019 Table I): per system, what its system
file says and what its records show it ran with.

Unlike the other tables it reads the tidy table run by run (the summary has no CPU model,
hosts or framework version) and takes the campaign's resolved systems
(``archbench.plan.systems.resolve_system``), passed by the workflow.
"""

from __future__ import annotations

from typing import Mapping

import pandas as pd

from archbench.results.collect import env_text
from archbench.core.hardware import cores_of
from archbench.results.tables.common import empty, sort_rows

# what a system file says (partition, account, paths and runtime limits are site
# details, not the platform)
DEFINED = (
    "description", "arch", "cpu_model", "nodes", "sockets", "cores_per_socket",
    "cores_per_node", "threads_per_core", "memory_per_node_gb", "interconnect",
    "gpus_per_node", "gpu_model", "vendor_library", "launcher", "container_runtime", "image",
    "env",
)
# what the records show: tidy column -> table column (distinct values joined by " | ")
RECORDED = {
    "arch": "recorded_arch", "cpu_model": "recorded_cpu_model", "framework": "framework",
    "framework_version": "framework_version", "vendor_library": "recorded_vendor_library",
    "image": "recorded_image", "image_sha256": "image_sha256", "cuda_version": "cuda_version",
    "cudnn_version": "cudnn_version", "nccl_version": "nccl_version", "gpu_models": "recorded_gpu_models",
}
COUNTS = ("n_hosts", "max_nodes", "n_runs", "n_ok", "experiments")
PLATFORM_COLUMNS = ("system", "source", *DEFINED, *RECORDED.values(), *COUNTS, "status")


def _text(column: pd.Series) -> pd.Series:
    """A tidy column as stripped text, empty and missing values as missing."""
    text = column.astype("string").str.strip()
    return text.mask(text.eq("").fillna(True))


def _distinct(values: pd.Series, sep: str = " | ") -> object:
    found = sorted(set(values.dropna()))
    return sep.join(found) if found else pd.NA


def defined(system: Mapping) -> dict:
    """The platform columns of one resolved system definition."""
    row = {name: system.get(name) for name in DEFINED}
    row["cores_per_node"] = cores_of(dict(system))
    row["env"] = env_text(system.get("env") or {}) or None
    return row


def _versions(runs: pd.DataFrame) -> pd.Series:
    """The runs' framework versions, each named by its framework ("pytorch 2.7.1") where the
    runs ran more than one framework."""
    versions = _text(runs["framework_version"])
    names = _text(runs["framework"]) if "framework" in runs else pd.Series(pd.NA, index=runs.index)
    if names.dropna().nunique() < 2:
        return versions
    return (names.fillna("?") + " " + versions).mask(versions.isna())


def recorded(runs: pd.DataFrame) -> dict:
    """The platform columns the runs of one system (or one import) show."""
    row = {out: _distinct(_text(runs[col])) if col in runs else pd.NA
           for col, out in RECORDED.items()}
    if "framework_version" in runs:
        row["framework_version"] = _distinct(_versions(runs))
    hosts = _text(runs["hosts"]).dropna().str.split(",") if "hosts" in runs else pd.Series([])
    row["n_hosts"] = len({h.strip() for names in hosts for h in names if h.strip()})
    nodes = pd.to_numeric(runs["nodes"], errors="coerce") if "nodes" in runs else pd.Series([])
    row["max_nodes"] = int(nodes.max()) if nodes.notna().any() else pd.NA
    row["n_runs"] = len(runs)
    row["n_ok"] = int(runs["status"].eq("ok").fillna(False).sum()) if "status" in runs else 0
    row["experiments"] = _distinct(_text(runs["experiment"]), ", ") if "experiment" in runs else pd.NA
    return row


def _status(row: dict) -> str:
    if not row["n_runs"]:
        return "no runs"
    arch, seen = row.get("arch"), row.get("recorded_arch")
    if isinstance(arch, str) and isinstance(seen, str) and seen != arch:
        return f"arch differs: {arch} defined, {seen} recorded"
    return "ok"


def platform(df: pd.DataFrame, *, systems: Mapping[str, Mapping] | None = None) -> pd.DataFrame:
    """Platforms: one row per system of the campaign with what its system file says
    (CPU, sockets x cores per socket = cores per node, threads per core, memory,
    network, vendor library, launcher, image) and what its records show: CPU model,
    architecture, framework and version (each version named by its framework where the
    runs ran several), image and its sha256, vendor library (distinct values joined by
    " | "), hosts seen, the most nodes a run used, runs (ok), experiments.
    Systems only seen in the records or in an import (``source``: what the import says)
    get a row of their own; status names an architecture that differs from the
    definition, or "no runs"."""
    systems = dict(systems or {})
    runs = df.copy()
    for name in ("system", "source"):
        runs[name] = _text(runs[name]) if name in runs else pd.Series(pd.NA, index=runs.index, dtype="string")
    if runs.empty and not systems:
        return empty(PLATFORM_COLUMNS)
    rows = []
    imported = runs["source"].notna()
    own = runs[~imported]
    for name in sorted(set(systems) | set(own["system"].dropna())):
        row = {"system": name, "source": pd.NA, **{k: pd.NA for k in DEFINED}}
        if name in systems:
            row.update(defined(systems[name]))
        row.update(recorded(own[own["system"].eq(name).fillna(False)]))
        rows.append(row)
    for (name, source), part in runs[imported].groupby(["system", "source"], dropna=False):
        row = {"system": name, "source": source, **{k: pd.NA for k in DEFINED}}
        rows.append({**row, **recorded(part)})
    out = pd.DataFrame(rows)
    out["status"] = [_status(r) for r in out.to_dict("records")]
    for name in ("nodes", "sockets", "cores_per_socket", "cores_per_node", "threads_per_core",
                 "gpus_per_node", "n_hosts", "max_nodes", "n_runs", "n_ok"):
        out[name] = pd.to_numeric(out[name], errors="coerce").astype("Int64")
    out["memory_per_node_gb"] = pd.to_numeric(out["memory_per_node_gb"], errors="coerce")
    out["_imported"] = out["source"].notna()  # the campaign's systems first
    return sort_rows(out, ("_imported", "source", "system"))[list(PLATFORM_COLUMNS)]
