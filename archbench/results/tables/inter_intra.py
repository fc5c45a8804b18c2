"""Inter/intra-op thread sweep (docs/experiments.md, experiment 3; CESGA 2018, Figs. 2-7,
Table 2).

One process pinned to 1..node cores, TensorFlow's inter-op and intra-op thread counts
swept, with the MKL/OpenMP environment on and off. A thread count is a *setting* of the
sweep: a number (0 = TensorFlow decides, 1, 2) or ``cores``, the pinned core count, so
the series ``cores`` has a different count at every core count. Records keep only the
resolved count; the setting is read back from the sweep itself (:func:`thread_setting`):
a count is a number setting when some configuration of the sweep uses it on another core
count, and the ``cores`` setting when it equals the pinned cores and is not a number
setting, or when the sweep has a ``cores`` series at all. A configuration may belong to
both (inter-op 1 on 1 core is in the series 1 and in the series ``cores``): its label
is then "1 = cores".

The MKL/OpenMP settings are ``mkl_env``, the MKL/OpenMP runtime variables the runs had
(``archbench.results.collect.mkl_env_text``; "none" when none was set). A configuration whose
records do not name the cores it was pinned to (failure records written before they
carried their settings) shows neither cores nor MKL settings: both are unknown there.

``kmp_read_by`` says whether those settings can act at all: the OpenMP runtime mapped
into the run's process that reads KMP_BLOCKTIME/KMP_AFFINITY (libiomp5, libomp), or
"none" when the vendor probe saw none loaded (:func:`archbench.workloads.training.vendor_evidence.library.kmp_read_by`;
empty when the run was not probed). The pinned TensorFlow 2.18.1 wheel loads none: its
oneDNN runs on TensorFlow's own thread pool, so "none" there means the MKL settings rows
measure the same build twice, not an MKL effect.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archbench.core.fields import EVERY_TABLE
from archbench.results.tables.common import KEYS, empty, group_ids, of_kind, of_type, sort_rows, summary_of
from archbench.results.tables.training import best_per_group

CORES = "cores"  # the setting "as many threads as pinned cores"
SWEEP_GROUP = (
    "experiment", "system", "framework", *EVERY_TABLE,
    "model", "data", "vendor_library_enabled", "batch_per_process",
    "mkl_env",
)
STATS = ("statistic", "n", "img_s", "img_s_min", "img_s_max", "error", "host_busy")
INTER_INTRA_SWEEP_COLUMNS = (
    *SWEEP_GROUP, "kmp_read_by", "inter_setting", "inter_threads", "intra_setting",
    "intra_threads", "cores", *STATS, "status",
)
INTER_INTRA_BEST_COLUMNS = (
    *SWEEP_GROUP, "kmp_read_by", "inter_setting", "inter_threads", "intra_setting",
    "intra_threads", "cores", *STATS, "n_configurations", "n_failed_configurations", "status",
)
# the identity of one sweep: every configuration key but the swept ones (the variant
# hashes the cores and the environment, both columns of their own here)
_SWEPT = ("inter_threads", "intra_threads", "variant")


def _sweep_keys() -> list[str]:
    return [k for k in KEYS if k not in _SWEPT] + ["mkl_env"]


def thread_setting(frame: pd.DataFrame, column: str, keys: list[str]) -> pd.Series:
    """The setting of thread count ``column`` per row, within each sweep of ``keys``:
    "<k>", "cores" or "<k> = cores" (see the module docstring). Rows without cores count
    by their number only."""
    threads = frame[column].astype("Int64")
    cores = frame["cores"].astype("Int64")
    gid = pd.Series(group_ids(frame, keys), index=frame.index)
    equal = (threads == cores).fillna(False).astype(bool)
    # a number setting: the count also appears where it is not the pinned cores
    numbers = set(zip(gid[~equal], threads[~equal]))
    is_number = pd.Series([(g, t) in numbers for g, t in zip(gid, threads)], index=frame.index)
    has_cores = (equal & ~is_number).groupby(gid).transform("any").astype(bool)
    is_cores = equal & (has_cores | ~is_number)
    text = threads.astype("string").fillna("")
    label = np.where(is_cores & is_number, text + " = " + CORES,
                     np.where(is_cores, CORES, text))
    return pd.Series(label, index=frame.index, dtype="string").mask(threads.isna())


def _series(label: str) -> list[str]:
    """The settings a label belongs to: "1 = cores" is in the series 1 and cores."""
    return label.split(" = ") if isinstance(label, str) else [label]


def _order(setting: pd.Series) -> pd.Series:
    """Sort key of a setting: the numbers in order, then cores."""
    first = setting.astype(object).map(lambda s: _series(s)[0] if isinstance(s, str) else None)
    return pd.to_numeric(first.where(first != CORES), errors="coerce").fillna(np.inf)


def _labelled(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """The configurations of the types feeding ``table``, with their cores, MKL settings
    and thread settings, in table order."""
    s = summary_of(df)
    s = of_type(of_kind(s, "train"), table)
    if s.empty:
        return s
    s["cores"] = s["cores"].round().astype("Int64")
    s["mkl_env"] = s["mkl_env"].astype("string").mask(s["cores"].isna())  # unknown there
    keys = _sweep_keys()
    s["inter_setting"] = thread_setting(s, "inter_threads", keys)
    s["intra_setting"] = thread_setting(s, "intra_threads", keys)
    s["img_s"], s["img_s_min"], s["img_s_max"] = s["value"], s["min"], s["max"]
    s["_inter"], s["_intra"] = _order(s["inter_setting"]), _order(s["intra_setting"])
    return sort_rows(s, [*SWEEP_GROUP, "_inter", "_intra", "cores", "variant"])


def inter_intra_sweep(df: pd.DataFrame) -> pd.DataFrame:
    """Inter/intra-op sweep (experiment 3; CESGA 2018 Figs. 2-5 and 7): img/s of every
    configuration, one process pinned to ``cores`` cores, per inter-op and intra-op
    thread setting (a number, 0 = TensorFlow decides, or ``cores`` = the pinned cores; "1 =
    cores" where both coincide) and MKL/OpenMP environment (``mkl_env``; "none": none
    set), with n, min and max of the repetitions and error = max - min. A failed
    configuration keeps its row with its status and no values. ``mkl_env`` is what the runs
    were given, not an effect: KMP_* are read only by Intel's OpenMP runtime, which the
    pinned TensorFlow 2.18.1 wheel does not load (its oneDNN uses TensorFlow's own thread
    pool; a run's ``vendor_evidence.loaded_libraries`` names the runtimes its process
    mapped). On one 2-core AMD EPYC, ResNet-50 64x64 batch 16, the settings on/off ratio
    was 1.01 (stdev 0.05, 8 interleaved pairs; scripts/bench_mkl_settings.py): no
    measurable effect there."""
    s = _labelled(df, "inter_intra_sweep")
    if s.empty:
        return empty(INTER_INTRA_SWEEP_COLUMNS)
    return s[list(INTER_INTRA_SWEEP_COLUMNS)].reset_index(drop=True)


def inter_intra_best(df: pd.DataFrame) -> pd.DataFrame:
    """Best configuration per inter-op thread setting (experiment 3; CESGA 2018 Table 2):
    per system, framework, model, data, vendor flag, batch, MKL/OpenMP environment and
    inter-op setting (0, 1, 2, ... or ``cores``), the highest img/s over the intra-op settings and
    core counts of the sweep, with the intra-op setting and the cores that reached it
    (ties: fewer cores). A configuration in two series ("1 = cores") counts in both; a
    setting whose configurations all failed keeps a row with status "all failed"."""
    s = _labelled(df, "inter_intra_best")
    if s.empty:
        return empty(INTER_INTRA_BEST_COLUMNS)
    s["_series"] = s["inter_setting"].astype(object).map(_series)
    s = s.explode("_series")
    s["inter_setting"] = s["_series"].astype("string")
    s["_inter"] = _order(s["inter_setting"])
    s = sort_rows(s, [*SWEEP_GROUP, "_inter", "cores", "_intra", "variant"])
    keys = _sweep_keys() + ["inter_setting"]
    blank = ("inter_threads", "intra_setting", "intra_threads", "cores", "img_s_min",
             "img_s_max", "error")
    best = best_per_group(s, keys=keys, value="img_s", blank=blank)
    best["_inter"] = _order(best["inter_setting"])
    return sort_rows(best, [*SWEEP_GROUP, "_inter"])[list(INTER_INTRA_BEST_COLUMNS)]
