"""Time to accuracy (the quality gate; docs/metrics.md, "Time to accuracy"): per
configuration of the ``quality`` experiments, how many of its runs reached the target
validation accuracy, in how many steps and seconds, and the evidence label of the
precision that executed, so a faster precision or graph is seen to train the model."""

from __future__ import annotations

import pandas as pd

from archbench.results.tables.common import empty, of_kind, of_type, sort_rows, summary_of
from archbench.workloads.training.vendor_evidence.precision import REQUEST_FIELDS

GROUP = ("experiment", "system", "arch", "framework", "device", "model", "batch_per_process",
         "intra_threads", "vendor_library_enabled", *REQUEST_FIELDS, "variant")
TIME_TO_ACCURACY_COLUMNS = (
    *GROUP, "target_accuracy", "n", "n_reached", "reached", "steps_to_accuracy",
    "time_to_accuracy_s", "evidence_label", "host_busy", "status",
)


def reached_text(n: object, n_reached: object) -> object:
    """"yes" when every ok run reached the target, "no" when none did, else "k of n"; NA
    without an ok run."""
    if pd.isna(n) or pd.isna(n_reached) or int(n) == 0:
        return pd.NA
    n, k = int(n), int(n_reached)
    return "yes" if k == n else "no" if k == 0 else f"{k} of {n}"


def time_to_accuracy(df: pd.DataFrame) -> pd.DataFrame:
    """Time to accuracy (MLPerf Training's measure of a run; quality experiments): per
    system, framework, model, batch, threads and requested precision / fp32 math mode /
    graph, the target validation accuracy of the digits, the ok runs (n) and how many
    reached it (reached: yes, no or k of n; a run that did not reach it within its step
    cap is a result, not a failure), and over those that did the mean steps_to_accuracy
    and time_to_accuracy_s (seconds from the first training step to the evaluation that
    reached it, evaluations included; a compiled graph's compiling first step and the
    data loading are not on the clock). evidence_label names a precision asked for but
    not executed (e.g. "bf16 requested, fp32 executed")."""
    s = of_type(of_kind(summary_of(df), "train"), "time_to_accuracy")
    if s.empty:
        return empty(TIME_TO_ACCURACY_COLUMNS)
    s["n_reached"] = (s["accuracy_reached"] * s["n"]).round().astype("Int64")
    s["reached"] = [reached_text(n, k) for n, k in zip(s["n"], s["n_reached"])]
    s["reached"] = s["reached"].astype("string")
    return sort_rows(s[list(TIME_TO_ACCURACY_COLUMNS)].reset_index(drop=True), GROUP)
