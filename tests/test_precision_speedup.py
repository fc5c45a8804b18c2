"""The precision_speedup table: every precision / math mode / graph configuration over its
fp32-strict-eager twin, with the interval, the evidence label and the quality flag from
the losses the records keep; the other training tables keep the numerics settings apart."""

from __future__ import annotations

import pandas as pd
import pytest
from test_compare import ONEDNN, configuration, run_record

from archbench.core import metrics
from archbench.core.fields import config_id
from archbench.results.collect import records_to_frame
from archbench.results.figures import FIGURES, build_figure
from archbench.results.tables import TABLES, build_table

FP32 = {"precision": "fp32", "math_mode": "strict", "graph": "eager"}
BF16 = {"precision": "bf16", "math_mode": "strict", "graph": "eager"}
COMPILED = {"precision": "fp32", "math_mode": "strict", "graph": "compiled"}
BF16_EVIDENCE = {**ONEDNN, "executed_precision": "bf16"}
FP32_EVIDENCE = {**ONEDNN, "executed_precision": "fp32"}


def runs(numerics: dict, values, losses, *, evidence=FP32_EVIDENCE, threads: int = 1,
         status: str = "ok") -> list[dict]:
    """Records of one configuration with ``numerics``: a run per value of ``values``, each
    with the measured losses ``losses``."""
    conf = {**configuration(threads=threads), **numerics}
    conf["config_id"] = config_id(conf)
    out = []
    for rep, value in enumerate(values):
        record = run_record(conf, rep, value if status == "ok" else None, status=status,
                            vendor_evidence=evidence)
        out.append({**record, "losses": list(losses)})
    return out


def table_of(records: list[dict], statistic: str | None = None) -> pd.DataFrame:
    return build_table("precision_speedup", records_to_frame(records), statistic=statistic)


def test_loss_tail_and_tolerance():
    assert metrics.loss_tail([3.0, 2.0, 1.0, 1.0, 0.5, 0.5]) == pytest.approx(0.5)
    assert metrics.loss_tail([2.0]) == 2.0
    assert metrics.loss_tail([]) is None and metrics.loss_tail([1.0, float("nan")]) is None
    assert metrics.loss_departs(1.2, 1.0) and not metrics.loss_departs(1.09, 1.0)
    assert not metrics.loss_departs(0.115, 0.1) and metrics.loss_departs(0.125, 0.1)  # 0.02 floor


def test_bf16_and_compiled_over_their_fp32_twin():
    records = (runs(FP32, (10.0, 11.0, 12.0), (2.0, 1.5, 1.0))
               + runs(BF16, (20.0, 22.0, 24.0), (2.0, 1.5, 1.05), evidence=BF16_EVIDENCE)
               + runs(COMPILED, (13.0, 14.0), (2.0, 1.8, 1.6)))
    table = table_of(records)
    assert list(table.columns) == list(TABLES["precision_speedup"].build(
        records_to_frame([])).columns)
    assert len(table) == 2  # the twin itself is no row
    bf16 = table[table["precision"].eq("bf16")].iloc[0]
    assert bf16["speedup"] == pytest.approx(22.0 / 11.0)
    assert (bf16["img_s_twin"], bf16["n_twin"], bf16["img_s_min"], bf16["img_s_max"]) == (11.0, 3, 20, 24)
    assert bf16["speedup_ci95_low"] < 2.0 < bf16["speedup_ci95_high"]
    assert bf16["status"] == "ok" and bf16["evidence_label"] == ""
    assert bf16["executed_precision"] == "bf16"
    assert bf16["quality_flag"] is False or bf16["quality_flag"] == False  # noqa: E712 (1.05 vs 1.0)
    compiled = table[table["graph"].eq("compiled")].iloc[0]
    assert compiled["speedup"] == pytest.approx(13.5 / 11.0)
    assert compiled["loss_change"] == pytest.approx(0.6) and bool(compiled["quality_flag"])
    median = table_of(records, "median")
    assert set(median["statistic"]) == {"median"}


def test_a_bf16_run_that_executed_fp32_says_so_and_a_missing_twin_is_named():
    records = (runs(BF16, (10.0, 10.5), (1.0, 1.0), evidence=FP32_EVIDENCE)
               + runs(BF16, (9.0, 9.5), (1.0, 1.0), threads=2))
    records += runs(FP32, (10.0, 10.2), (1.0, 1.0))
    table = table_of(records)
    one = table[table["intra_threads"].eq(1)].iloc[0]
    assert one["evidence_label"] == "bf16 requested, fp32 executed"
    two = table[table["intra_threads"].eq(2)].iloc[0]
    assert two["status"] == "no twin" and pd.isna(two["speedup"])


def test_a_failed_twin_leaves_the_speedup_empty():
    records = runs(FP32, (None,), (), status="oom") + runs(BF16, (10.0,), (1.0,))
    row = table_of(records).iloc[0]
    assert row["status"] == "twin oom" and pd.isna(row["speedup"])


def test_no_numerics_configurations_give_an_empty_table_with_headers():
    table = table_of(runs(FP32, (10.0, 11.0), (1.0,)))
    assert table.empty and "speedup" in table and "quality_flag" in table


def test_other_training_tables_keep_bf16_apart_from_fp32():
    records = runs(FP32, (10.0, 11.0), (1.0,)) + runs(BF16, (30.0, 31.0), (1.0,))
    df = records_to_frame(records)
    summary = build_table("summary", df)
    assert sorted(summary["precision"]) == ["bf16", "fp32"]
    for name in ("thread_efficiency", "batch_scaling", "hybrid_configurations"):
        table = build_table(name, df)
        if not table.empty:
            assert "precision" in table and sorted(table["precision"]) == ["bf16", "fp32"], name


def test_the_figure_draws_every_configuration():
    records = (runs(FP32, (10.0, 11.0), (1.0,)) + runs(BF16, (20.0, 22.0), (1.0,))
               + runs(COMPILED, (12.0, 13.0), (1.5,)))
    assert FIGURES["precision_speedup"].table == "precision_speedup"
    figure = build_figure("precision_speedup", records_to_frame(records))
    labels = [t.get_text() for ax in figure.axes for t in ax.get_xticklabels()]
    assert any("bf16" in t for t in labels) and any("compiled" in t for t in labels)
    empty = build_figure("precision_speedup", records_to_frame(runs(FP32, (1.0,), (1.0,))))
    assert any("no data" in t.get_text() for ax in empty.axes for t in ax.texts)


def test_the_best_layout_is_chosen_within_one_precision():
    """hybrid_best picks a best layout per precision: a bf16 run never outranks the fp32
    ones it does not belong with."""
    records = []
    for numerics, scale in ((FP32, 1.0), (BF16, 3.0)):
        for ppn, threads in ((1, 2), (2, 1)):
            conf = {**configuration(threads=threads), **numerics, "experiment": "hybrid",
                    "experiment_type": "hybrid", "strategy": "horovod",
                    "processes_per_node": ppn, "workers": ppn, "global_batch": 8 * ppn}
            conf["config_id"] = config_id(conf)
            records += [run_record(conf, rep, scale * (10.0 + ppn)) for rep in range(2)]
    best = build_table("hybrid_best", records_to_frame(records))
    assert sorted(zip(best["precision"], best["configuration"], best["img_s"])) == [
        ("bf16", "2x1", 36.0), ("fp32", "2x1", 12.0)]
