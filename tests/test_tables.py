"""Derived tables on small hand-checked inputs (docs/metrics.md).

Every expected value below is worked out by hand from the metric definitions, not taken
from the code's output. Inputs are tidy-table rows (one per run, as ``record.flatten``
gives); ``run`` fills the identity columns a test does not care about.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from archbench.results import tables
from archbench.results.artifacts import to_csv, to_latex, to_markdown, write_table
from archbench.results.tables import TABLES, build_table, build_tables

T_975_DOF2 = 4.302652729749464  # Student t, 97.5% quantile, 2 degrees of freedom (table value)


def run(throughput, status="ok", **fields) -> dict:
    row = {"experiment": "e", "experiment_type": "thread_scaling", "system": "sysa",
           "arch": "x86_64", "kind": "train", "model": "resnet50", "data": "synthetic",
           "strategy": "single", "nodes": 1, "processes_per_node": 1, "workers": 1,
           "intra_threads": 1, "inter_threads": 1, "batch_per_process": 32,
           "vendor_library": "onednn", "vendor_library_enabled": True,
           "throughput": throughput, "throughput_unit": "img/s" if throughput is not None else "",
           "status": status, "reason": "" if status == "ok" else f"test {status}",
           "config_id": None}
    row.update(fields)
    return row


def runs(values, **fields) -> list[dict]:
    return [run(v, repetition=i, **fields) for i, v in enumerate(values)]


def frame(*groups) -> pd.DataFrame:
    return pd.DataFrame([r for g in groups for r in g])


def only(table: pd.DataFrame, **match) -> pd.Series:
    sel = pd.Series(True, index=table.index)
    for name, value in match.items():
        sel &= table[name].astype(object).eq(value).fillna(False).astype(bool)
    assert sel.sum() == 1, f"expected one row for {match}, got {int(sel.sum())}"
    return table[sel].iloc[0]


# ------------------------------------------------------------------------- summary
@pytest.fixture
def summary_input() -> pd.DataFrame:
    return frame(
        runs([10.0, 12.0, 14.0], intra_threads=1),            # spread 4 > 10% of 12
        runs([100.0, 101.0, 102.0], intra_threads=2),         # spread 2 < 10% of 101
        [run(None, "oom", intra_threads=4, repetition=0),      # every run failed
         run(None, "oom", intra_threads=4, repetition=1),
         run(None, "timeout", intra_threads=4, repetition=2)],
        [run(20.0, intra_threads=8, repetition=0), run(22.0, intra_threads=8, repetition=1),
         run(None, "timeout", intra_threads=8, repetition=2)],  # partial
    )


def test_summary_statistics_per_configuration(summary_input):
    s = tables.summarise(summary_input)
    assert len(s) == 4
    a = only(s, intra_threads=1)
    assert a["n"] == 3
    assert a["mean"] == pytest.approx(12.0)
    assert a["std"] == pytest.approx(2.0)  # sample std: sqrt((4 + 0 + 4) / 2)
    assert (a["min"], a["max"]) == (10.0, 14.0)
    assert a["error"] == pytest.approx(4.0)
    half = T_975_DOF2 * 2.0 / math.sqrt(3)
    assert a["ci95_low"] == pytest.approx(12.0 - half, rel=1e-6)
    assert a["ci95_high"] == pytest.approx(12.0 + half, rel=1e-6)
    assert bool(a["spread_flag"]) is True
    assert a["status"] == "ok" and a["n_failed"] == 0 and a["unit"] == "img/s"

    b = only(s, intra_threads=2)
    assert b["mean"] == pytest.approx(101.0) and b["std"] == pytest.approx(1.0)
    assert b["error"] == pytest.approx(2.0)
    assert bool(b["spread_flag"]) is False


def test_a_configuration_run_in_two_framework_versions_states_both():
    """PyTorch 1.13.1 (Debian's, ppc64le) and 2.14.1 runs of one configuration (an image
    rebuilt between repetitions) are never one silent number: the summary names both."""
    s = tables.summarise(frame(
        runs([10.0, 11.0], framework="pytorch", framework_version="1.13.1", intra_threads=1),
        [run(30.0, framework="pytorch", framework_version="2.14.1", intra_threads=1, repetition=2)],
        runs([5.0], framework="pytorch", framework_version="1.13.1", intra_threads=2)))
    assert only(s, intra_threads=1)["framework_version"] == "1.13.1 | 2.14.1"
    assert only(s, intra_threads=2)["framework_version"] == "1.13.1"


def test_summary_counts_failures_and_keeps_values_empty(summary_input):
    s = tables.summarise(summary_input)
    failed = only(s, intra_threads=4)
    assert failed["n"] == 0 and failed["n_failed"] == 3
    assert failed["status"] == "oom"
    assert failed["failures"] == "oom:2, timeout:1"
    for name in ("mean", "std", "min", "max", "error", "ci95_low"):
        assert pd.isna(failed[name]), name  # empty, never zero

    partial = only(s, intra_threads=8)
    assert partial["n"] == 2 and partial["n_failed"] == 1
    assert partial["mean"] == pytest.approx(21.0)
    assert partial["status"] == "partial" and partial["failures"] == "timeout:1"


def test_failed_configuration_is_written_as_failure_not_zero(summary_input, tmp_path):
    s = tables.summarise(summary_input)
    write_table(s, csv=tmp_path / "s.csv", md=tmp_path / "s.md", tex=tmp_path / "s.tex")
    back = pd.read_csv(tmp_path / "s.csv")
    row = back[back["intra_threads"] == 4].iloc[0]
    assert pd.isna(row["mean"]) and row["status"] == "oom"
    md_row = [line for line in (tmp_path / "s.md").read_text().splitlines()
              if "oom:2" in line]
    assert len(md_row) == 1
    cells = [c.strip() for c in md_row[0].strip("|").split("|")]
    header = [c.strip() for c in (tmp_path / "s.md").read_text().splitlines()[0].strip("|").split("|")]
    mean_cell = cells[header.index("mean")]
    assert mean_cell == "oom"
    assert "0.000" not in cells


# ------------------------------------------------------------------ thread efficiency
def test_thread_efficiency_from_one_thread():
    df = frame(runs([10.0], intra_threads=1), runs([18.0], intra_threads=2),
               runs([30.0], intra_threads=4),
               # vendor library off, no 1-thread run: no baseline
               runs([9.0], intra_threads=2, vendor_library_enabled=False))
    t = tables.thread_efficiency(df)
    on = t[t["vendor_library_enabled"].eq(True).fillna(False).astype(bool)]
    # e_t = p_t / (t * p_1): 10/(1*10), 18/(2*10), 30/(4*10)
    assert on.sort_values("threads")["efficiency"].tolist() == pytest.approx([1.0, 0.9, 0.75])
    assert set(on["img_s_1thread"]) == {10.0}
    off = only(t, vendor_library_enabled=False)
    assert pd.isna(off["efficiency"]) and off["status"] == "no baseline"


def test_thread_efficiency_baseline_failure_is_named():
    df = frame([run(None, "oom", intra_threads=1)], runs([18.0], intra_threads=2))
    row = only(tables.thread_efficiency(df), threads=2)
    assert pd.isna(row["efficiency"]) and row["status"] == "baseline oom"


# --------------------------------------------------------------------- vendor speedup
def test_vendor_speedup_on_over_off():
    df = frame(runs([26.0, 26.0], vendor_library_enabled=True, intra_threads=2),
               runs([20.0, 20.0], vendor_library_enabled=False, intra_threads=2),
               runs([40.0], vendor_library_enabled=True, intra_threads=4),
               [run(None, "oom", vendor_library_enabled=False, intra_threads=4)])
    t = tables.vendor_speedup(df)
    assert len(t) == 2
    two = only(t, intra_threads=2)
    assert (two["img_s_on"], two["img_s_off"]) == (26.0, 20.0)
    assert two["speedup"] == pytest.approx(1.3)
    four = only(t, intra_threads=4)
    assert pd.isna(four["speedup"]) and four["status"] == "off oom"


# ---------------------------------------------------------------------- hybrid best
def test_best_hybrid_per_system_and_model():
    hybrid = dict(experiment="hyb", experiment_type="hybrid")
    df = frame(
        runs([50.0], processes_per_node=1, intra_threads=4, **hybrid),
        runs([58.0, 62.0], processes_per_node=2, intra_threads=2, **hybrid),
        runs([55.0], processes_per_node=4, intra_threads=1, **hybrid),
        runs([7.0], processes_per_node=4, intra_threads=1, model="alexnet", **hybrid),
        runs([9.0], processes_per_node=2, intra_threads=2, model="alexnet", **hybrid),
        [run(None, "oom", system="sysb", processes_per_node=2, intra_threads=2, **hybrid),
         run(None, "timeout", system="sysb", processes_per_node=4, intra_threads=1, **hybrid)],
    )
    configs = tables.hybrid_configurations(df)
    assert set(configs["configuration"]) == {"1x4", "2x2", "4x1"}
    best = tables.best_hybrid(df)
    assert len(best) == 3 and set(best["experiment"]) == {"hyb"}
    a = only(best, system="sysa", model="resnet50")
    assert a["configuration"] == "2x2" and a["img_s"] == pytest.approx(60.0)
    assert a["n_configurations"] == 3 and a["status"] == "ok"
    assert only(best, system="sysa", model="alexnet")["configuration"] == "2x2"
    b = only(best, system="sysb")
    assert b["status"] == "all failed" and pd.isna(b["img_s"])
    assert b["n_failed_configurations"] == 2


# ------------------------------------------------------------ node scaling, heat map
@pytest.fixture
def scaling_input() -> pd.DataFrame:
    parts = []
    values = {("sysa", "synthetic"): (100.0, 190.0, 360.0), ("sysa", "real"): (80.0, 150.0, 280.0),
              ("sysb", "synthetic"): (50.0, 90.0, 160.0), ("sysb", "real"): (40.0, 76.0, None)}
    for (system, data), series in values.items():
        for nodes, value in zip((1, 2, 4), series):
            status = "ok" if value is not None else "failed"
            parts.append([run(value, status, experiment="scale", experiment_type="node_scaling",
                              system=system, data=data, nodes=nodes, workers=nodes,
                              strategy="horovod", intra_threads=4)])
    return frame(*parts)


def test_node_speedup_and_efficiency(scaling_input):
    t = tables.node_scaling(scaling_input)
    assert set(t["scaling_unit"]) == {"nodes"}
    a = t[(t["system"] == "sysa") & (t["data"] == "synthetic")].sort_values("count")
    # S_n = P_n / P_1, E_n = P_n / (n P_1)
    assert a["speedup"].tolist() == pytest.approx([1.0, 1.9, 3.6])
    assert a["efficiency"].tolist() == pytest.approx([1.0, 0.95, 0.9])
    failed = only(t, system="sysb", data="real", count=4)
    assert pd.isna(failed["speedup"]) and failed["status"] == "failed"


def test_node_scaling_baseline_is_smallest_count():
    df = frame(*[runs([v], experiment_type="node_scaling", strategy="horovod", nodes=n, workers=n)
                 for n, v in ((2, 100.0), (4, 180.0), (8, 320.0))])
    t = tables.node_scaling(df).sort_values("count")
    assert t["baseline_count"].tolist() == [2, 2, 2]
    assert t["speedup"].tolist() == pytest.approx([1.0, 1.8, 3.2])
    # E = P_n / ((n / b) P_b): 180 / (2 * 100), 320 / (4 * 100)
    assert t["efficiency"].tolist() == pytest.approx([1.0, 0.9, 0.8])


def ppn_run(value, ppn, nodes=1, **fields):
    """A ppn sweep run on a 4-core node: intra-op threads = cores / ppn - 1 (at least 1)."""
    return run(value, experiment="ppn", experiment_type="ppn_sweep", strategy="horovod",
               nodes=nodes, processes_per_node=ppn, workers=nodes * ppn,
               intra_threads=max(1, 4 // ppn - 1), **fields)


def test_ppn_sweep_on_one_node_scales_over_workers_at_fixed_threads():
    # on 4 cores: 1 ppn x 3 threads, 2 ppn x 1 thread, 4 ppn x 1 thread. Only the last two
    # keep the threads per process: they are the series over workers; 1 x 3 is a series
    # of its own (the single- vs multi-process comparison is the process_layout table).
    df = pd.DataFrame([ppn_run(10.0, 1), ppn_run(18.0, 2), ppn_run(30.0, 4)])
    table = tables.node_scaling(df)
    assert set(table["scaling_unit"]) == {"workers"} and table["series"].nunique() == 2
    alone = only(table, processes_per_node=1)
    assert (alone["baseline_count"], alone["efficiency"]) == (1, 1.0)
    t = table[table["intra_threads"].eq(1)].sort_values("count")
    assert t["count"].tolist() == [2, 4] and t["processes_per_node"].tolist() == [2, 4]
    assert t["speedup"].tolist() == pytest.approx([1.0, 30.0 / 18.0])
    assert t["efficiency"].tolist() == pytest.approx([1.0, 30.0 / (2 * 18.0)])
    h = tables.efficiency_heatmap(df)
    row = h[h["series"].eq(t["series"].iloc[0])]
    assert len(h) == 2 and len(row) == 1
    assert [float(row[c].iloc[0]) for c in ("2", "4")] == pytest.approx([1.0, 30.0 / 36.0])


def test_ppn_sweep_over_nodes_scales_each_layout_over_nodes():
    df = pd.DataFrame([ppn_run(10.0, 1, scaling_unit="nodes"),
                       ppn_run(18.0, 1, nodes=2, scaling_unit="nodes"),
                       ppn_run(16.0, 2, scaling_unit="nodes"),
                       ppn_run(32.0, 2, nodes=2, scaling_unit="nodes")])
    t = tables.node_scaling(df)
    assert set(t["scaling_unit"]) == {"nodes"}
    assert only(t, processes_per_node=1, count=2)["speedup"] == pytest.approx(1.8)
    assert only(t, processes_per_node=2, count=2)["speedup"] == pytest.approx(2.0)
    assert t["series"].nunique() == 2
    assert len(tables.efficiency_heatmap(df)) == 2


def test_two_packings_of_one_worker_count_stay_two_series():
    # 8 workers as 8 ppn x 1 node and as 4 ppn x 2 nodes (1 thread each) never share a point
    df = pd.DataFrame([ppn_run(40.0, 4), ppn_run(70.0, 8), ppn_run(76.0, 4, nodes=2),
                       ppn_run(140.0, 8, nodes=2)])
    t = tables.node_scaling(df)
    assert not t.duplicated(["series", "count"]).any()
    assert t.groupby("series")["count"].apply(sorted).tolist() == [[4, 8], [8, 16]]
    assert only(t, processes_per_node=4, count=8)["efficiency"] == pytest.approx(76.0 / 80.0)


def test_efficiency_heatmap_is_system_by_data_by_nodes(scaling_input):
    h = tables.efficiency_heatmap(scaling_input)
    assert len(h) == 4  # 2 systems x 2 data
    assert {(r.system, r.series.split(",")[0]) for r in h.itertuples()} == {
        ("sysa", "synthetic data"), ("sysa", "real data"), ("sysb", "synthetic data"),
        ("sysb", "real data")}
    assert [c for c in h.columns if c.isdigit()] == ["1", "2", "4"]
    real = h["series"].str.startswith("real")
    cell = h[real & h["system"].eq("sysa")]["4"].iloc[0]
    assert float(cell) == pytest.approx(280.0 / (4 * 80.0))
    assert h[real & h["system"].eq("sysb")]["4"].iloc[0] == "failed"


# ------------------------------------------------------------------------ I/O overhead
def test_io_overhead_percent(scaling_input):
    t = tables.io_overhead(scaling_input)
    a = t[t["system"] == "sysa"].sort_values("nodes")
    # (syn - real) / syn * 100
    assert a["io_overhead_percent"].tolist() == pytest.approx(
        [20.0, 40.0 / 190.0 * 100, 80.0 / 360.0 * 100])
    b4 = only(t, system="sysb", nodes=4)
    assert pd.isna(b4["io_overhead_percent"]) and b4["status"] == "real failed"


# --------------------------------------------------------------------- Horovod tuning
def tuning_runs(values, cycle, fusion_mb, allreduces, status="ok", **fields) -> list[dict]:
    """Runs of one Horovod tuning setting (2 ranks on one node); the knobs and the counted
    allreduces are record metrics, the setting's hash suffix makes the config id unique."""
    knobs = {"metric_horovod_cycle_time": cycle, "metric_horovod_fusion_threshold": fusion_mb * 2**20}
    return [run(v, status, experiment="tune", experiment_type="horovod_tuning", strategy="horovod",
                processes_per_node=2, workers=2, global_batch=64, repetition=i,
                config_id=f"resnet50_b32_{cycle:g}_{fusion_mb:g}_{int(cycle * 100 + fusion_mb):08x}",
                **knobs, **({"metric_allreduces_per_step": allreduces} if status == "ok" else {}),
                **fields)
            for i, v in enumerate(values)]


def test_horovod_tuning_img_s_allreduces_and_relative_to_best():
    df = frame(tuning_runs([10.0, 12.0], 1, 0, 161.0),          # no fusion: one per tensor
               tuning_runs([20.0, 22.0], 10, 64, 5.0),          # fused
               tuning_runs([19.0, 21.0], 10, 64, 4.0, model="alexnet"),  # its own best
               tuning_runs([None, None], 1, 64, None, status="oom"),
               runs([99.0], strategy="horovod", processes_per_node=2))  # not a tuning run
    t = tables.horovod_tuning(df)
    assert len(t) == 4
    no_fusion = only(t, model="resnet50", cycle_time_ms=1.0, fusion_threshold_mb=0.0)
    assert no_fusion["img_s"] == pytest.approx(11.0) and no_fusion["allreduces_per_step"] == 161
    assert no_fusion["relative_to_best"] == pytest.approx(11.0 / 21.0)
    assert no_fusion["error"] == pytest.approx(2.0) and no_fusion["n"] == 2
    fused = only(t, model="resnet50", cycle_time_ms=10.0)
    assert fused["relative_to_best"] == pytest.approx(1.0) and fused["allreduces_per_step"] == 5
    assert only(t, model="alexnet")["relative_to_best"] == pytest.approx(1.0)
    failed = only(t, status="oom")  # its setting named (failure records carry it)
    assert pd.isna(failed["img_s"]) and pd.isna(failed["allreduces_per_step"])
    assert (failed["cycle_time_ms"], failed["fusion_threshold_mb"]) == (1.0, 64.0)


# ----------------------------------------------------------------------------- kernels
def kernel_run(value, unit, kernel="matmul", size=1024, workers=1, status="ok", rep=0):
    """A kernel record as the workers write it on one 4-core node: one process per worker,
    the node's cores shared among them."""
    return run(value, status, experiment="kern", experiment_type="kernel", kind="kernel",
               model=None, kernel=kernel, data=None, strategy="workers", problem_size=size,
               tile_size=None if kernel == "stream" else 256, workers=workers,
               processes_per_node=workers, intra_threads=max(1, 4 // workers), inter_threads=0, batch_per_process=None, vendor_library=None,
               vendor_library_enabled=None, throughput_unit=unit, repetition=rep)


def test_kernel_gflops_and_speedup_from_smallest_workers():
    n = 1024
    flops = 2 * n**3 - n**2  # matmul flops 2N^3 - N^2
    seconds = {1: 0.2, 2: 0.11, 4: 0.0625}
    df = pd.DataFrame(
        [kernel_run(flops / t / 1e9, "GFLOP/s", workers=w) for w, t in seconds.items()]
        # a second size measured from 2 workers on, reported in MFLOP/s
        + [kernel_run(3000.0, "MFLOP/s", size=2048, workers=2),
           kernel_run(5400.0, "MFLOP/s", size=2048, workers=4)])
    t = tables.kernel_gflops(df)
    small = t[t["problem_size"] == 1024].sort_values("workers")
    assert small["gflops"].tolist() == pytest.approx([flops / t / 1e9 for t in seconds.values()])
    assert small["speedup"].tolist() == pytest.approx([1.0, 0.2 / 0.11, 0.2 / 0.0625])
    big = t[t["problem_size"] == 2048].sort_values("workers")
    assert big["gflops"].tolist() == pytest.approx([3.0, 5.4])
    assert big["baseline_workers"].tolist() == [2, 2]
    assert big["speedup"].tolist() == pytest.approx([1.0, 1.8])


def test_kernel_gpu_series_spans_its_gpus_per_node_and_stays_apart_from_cpus():
    """KTH/ORNL 2019 on 4-GPU nodes: 2 and 4 workers on one node (2 and 4 GPUs per node),
    8 on two; one worker per GPU. GPUs per node grow with the workers inside one series,
    and the CPU run of the same kernel is a series of its own."""
    def gpu_run(value, workers, nodes):
        return kernel_run(value, "GFLOP/s", workers=workers) | {
            "device": "gpu", "nodes": nodes, "processes_per_node": workers // nodes,
            "gpus_per_node": workers // nodes, "gpus": workers, "scaling_unit": "gpus"}
    df = pd.DataFrame([gpu_run(100.0, 2, 1), gpu_run(160.0, 4, 1), gpu_run(200.0, 8, 2),
                       kernel_run(10.0, "GFLOP/s", workers=2) | {"device": "cpu"},
                       kernel_run(15.0, "GFLOP/s", workers=4) | {"device": "cpu"}])
    t = tables.kernel_gflops(df)
    gpus = t[t["device"] == "gpu"].sort_values("workers")
    assert gpus["speedup"].tolist() == pytest.approx([1.0, 1.6, 2.0])
    assert gpus["gpus_per_node"].tolist() == [2, 4, 4]
    cpus = t[t["device"] == "cpu"].sort_values("workers")
    assert cpus["speedup"].tolist() == pytest.approx([1.0, 1.5])


def test_stream_bandwidth_per_size_in_gb_s():
    df = pd.DataFrame([kernel_run(5000.0, "MB/s", kernel="stream", size=2**20, rep=0),
                       kernel_run(7000.0, "MB/s", kernel="stream", size=2**20, rep=1),
                       kernel_run(8.0, "GB/s", kernel="stream", size=2**22),
                       kernel_run(1.0, "GiB/s", kernel="stream", size=2**24)])
    t = tables.stream_bandwidth(df).sort_values("problem_size")
    assert t["problem_size"].tolist() == [2**20, 2**22, 2**24]
    assert t["bandwidth_gb_s"].tolist() == pytest.approx([6.0, 8.0, 2**30 / 1e9])
    first = t.iloc[0]
    assert (first["bandwidth_min"], first["bandwidth_max"]) == pytest.approx((5.0, 7.0))
    assert first["error"] == pytest.approx(2.0)
    assert set(t["unit"]) == {"GB/s"}
    assert tables.kernel_gflops(df).empty  # bandwidth is not a flop rate


def test_fraction_of_peak():
    df = pd.DataFrame([
        kernel_run(50.0, "GFLOP/s"),
        run(10.0, experiment_type="thread_scaling", metric_flops_per_image=4e9),  # 40 GFLOP/s
        run(10.0, experiment_type="node_scaling", nodes=2, workers=2, intra_threads=2,
            metric_flops_per_image=4e9),                                        # 40 of 2 x 200
        kernel_run(30.0, "GFLOP/s") | {"system": "nopeak"},
    ])
    t = build_table("fraction_of_peak", df, peak={"sysa": {"gflops": 0.2, "unit": "TFLOP/s"}})
    assert len(t) == 4
    assert only(t, kind="kernel", system="sysa")["fraction_of_peak"] == pytest.approx(0.25)
    one = only(t, kind="train", nodes=1)
    assert one["achieved_gflops"] == pytest.approx(40.0)
    assert one["fraction_of_peak"] == pytest.approx(0.2)
    assert only(t, kind="train", nodes=2)["fraction_of_peak"] == pytest.approx(0.1)
    missing = only(t, system="nopeak")
    assert pd.isna(missing["fraction_of_peak"]) and missing["status"] == "no peak"


# ------------------------------------------------------------------------ empty input
@pytest.mark.parametrize("name", list(TABLES))
def test_empty_input_gives_empty_table_with_headers(name, tmp_path):
    for df in (pd.DataFrame(), pd.DataFrame(columns=["system", "throughput", "status"])):
        t = build_table(name, df)
        assert t.empty and len(t.columns) > 0
        assert to_csv(t).splitlines() == [",".join(t.columns)]
        assert to_markdown(t).count("\n") == 2
        assert "\\toprule" in to_latex(t)


def test_build_tables_builds_every_table():
    built = build_tables(frame(runs([10.0, 11.0])))
    assert list(built) == list(TABLES)
    assert len(built["summary"]) == 1 and built["summary"]["mean"].iloc[0] == pytest.approx(10.5)
    with pytest.raises(KeyError):
        build_table("no_such_table", pd.DataFrame())


def test_kernel_speedup_with_units_mixed_in_a_series():
    # an imported series may give 1 worker in MFLOP/s and 2 workers in GFLOP/s
    df = pd.DataFrame([kernel_run(2000.0, "MFLOP/s", workers=1),
                       kernel_run(3.6, "GFLOP/s", workers=2)])
    t = tables.kernel_gflops(df).sort_values("workers")
    assert t["gflops_baseline"].tolist() == pytest.approx([2.0, 2.0])
    assert t["speedup"].tolist() == pytest.approx([1.0, 1.8])


def test_efficiency_heatmap_keeps_series_apart(scaling_input):
    # the same scaling with the vendor library off is its own row, not merged away
    off = scaling_input[scaling_input["system"] == "sysa"].assign(
        vendor_library_enabled=False,
        throughput=lambda d: d["throughput"] * [1.0, 0.5, 0.25, 1.0, 0.5, 0.25][:len(d)])
    h = tables.efficiency_heatmap(pd.concat([scaling_input, off], ignore_index=True))
    assert len(h) == 6
    row = only(h, system="sysa", data="synthetic", vendor_library_enabled=False)
    assert float(row["2"]) == pytest.approx(95.0 / (2 * 100.0))


# ------------------------------------------------------------------------ host outliers
def host_runs(values_by_host: dict, **fields) -> list[dict]:
    """Runs of one configuration, ``values_by_host``: host (set) -> its throughputs."""
    rows, k = [], 0
    for host, values in values_by_host.items():
        for v in values:
            rows.append(run(v, repetition=k, hosts=host, config_id=fields.get("config_id"), **{
                key: value for key, value in fields.items() if key != "config_id"}))
            k += 1
    return rows


def test_host_outliers_flag_a_host_beyond_the_spread_limit_and_not_one_within():
    df = frame(
        # c1: host c is 20 % slow -> config mean 92; c: 80 -> -13 % (flagged); a, b: +8.7 %
        host_runs({"a": [100.0, 100.0], "b": [100.0], "c": [80.0, 80.0]},
                  config_id="c1", intra_threads=1),
        # c2: two host sets within 2 % of each other: nothing flagged
        host_runs({"n1,n2": [50.0, 51.0], "n3,n4": [52.0]}, config_id="c2", intra_threads=2),
        # c3: one host only: left out; a failed run on another host does not count as one
        host_runs({"a": [10.0, 30.0]}, config_id="c3", intra_threads=4)
        + [run(None, "failed", repetition=2, hosts="z", config_id="c3", intra_threads=4)],
    )
    t = build_table("host_outliers", df)
    assert set(t["config_id"]) == {"c1", "c2"} and len(t) == 5
    slow = only(t, config_id="c1", hosts="c")
    assert slow["config_value"] == pytest.approx(92.0) and slow["value"] == pytest.approx(80.0)
    assert slow["deviation_pct"] == pytest.approx(-100 * 12 / 92) and bool(slow["outlier"])
    assert (slow["n"], slow["n_hosts"], slow["statistic"]) == (2, 3, "mean")
    assert not only(t, config_id="c1", hosts="a")["outlier"]  # +8.7 %: within 10 %
    assert not t[t["config_id"] == "c2"]["outlier"].any()
    assert only(t, config_id="c2", hosts="n1,n2")["value"] == pytest.approx(50.5)


def test_host_outliers_report_the_campaigns_statistic():
    df = frame(host_runs({"a": [100.0, 100.0, 40.0], "b": [100.0]}, config_id="c1"))
    median = build_table("host_outliers", df, statistic="median")
    mean = build_table("host_outliers", df, statistic="mean")
    assert only(median, hosts="a")["value"] == pytest.approx(100.0)
    assert not only(median, hosts="a")["outlier"]  # median 100 against 100
    assert only(mean, hosts="a")["value"] == pytest.approx(80.0)
    assert bool(only(mean, hosts="b")["outlier"])  # 100 against 85: +17.6 %


# --------------------------------------------------------------- TensorFlow and PyTorch
def test_a_tensorflow_and_a_pytorch_run_of_one_configuration_are_two_rows():
    # rows without a framework (records before the field) are TensorFlow's
    df = frame(runs([10.0, 12.0]), runs([8.0, 9.0], framework="pytorch"),
               runs([20.0, 22.0], intra_threads=2),
               runs([16.0, 18.0], intra_threads=2, framework="pytorch"))
    summary = build_table("summary", df)
    assert len(summary) == 4
    assert only(summary, framework="tensorflow", intra_threads=1)["mean"] == pytest.approx(11.0)
    assert only(summary, framework="pytorch", intra_threads=1)["mean"] == pytest.approx(8.5)
    eff = build_table("thread_efficiency", df)  # e_t = p_t / (t p_1) within each framework
    assert only(eff, framework="tensorflow", threads=2)["efficiency"] == pytest.approx(21 / (2 * 11))
    assert only(eff, framework="pytorch", threads=2)["efficiency"] == pytest.approx(17 / (2 * 8.5))
    batches = build_table("batch_scaling", frame(
        runs([10.0], batch_per_process=8), runs([30.0], batch_per_process=16),
        runs([5.0], batch_per_process=8, framework="pytorch"),
        runs([20.0], batch_per_process=16, framework="pytorch")).assign(experiment_type="batch_sweep"))
    assert only(batches, framework="pytorch", batch_per_process=16)["relative"] == pytest.approx(4.0)
    assert only(batches, framework="tensorflow", batch_per_process=16)["relative"] == pytest.approx(3.0)


@pytest.mark.parametrize("name", [n for n, spec in TABLES.items()  # (one pair of them a row)
                                  if not spec.uses_published and n != "framework_comparison"])
def test_every_table_says_which_framework_a_row_ran_in(name):
    assert "framework" in build_table(name, pd.DataFrame()), name


def test_io_overhead_of_pytorch_runs():
    df = frame(runs([100.0, 100.0]), runs([80.0, 80.0], data="real"),
               runs([50.0, 50.0], framework="pytorch"),
               runs([45.0, 45.0], data="real", framework="pytorch"))
    t = build_table("io_overhead", df)
    assert len(t) == 2
    assert only(t, framework="tensorflow")["io_overhead_percent"] == pytest.approx(20.0)
    assert only(t, framework="pytorch")["io_overhead_percent"] == pytest.approx(10.0)
    assert "PyTorch" in only(t, framework="pytorch")["series"]


def test_vendor_evidence_of_each_framework_apart():
    evidence = {"vendor_evidence_library": "onednn", "vendor_optimized_share": 1.0,
                "vendor_reference_share": 0.0}
    df = frame(runs([10.0], vendor_evidence_version="3.5.0", **evidence),
               runs([8.0], framework="pytorch", vendor_evidence_version="3.12.0", **evidence))
    t = build_table("vendor_evidence", df)
    assert only(t, framework="tensorflow")["version"] == "3.5.0"
    assert only(t, framework="pytorch")["version"] == "3.12.0"
    assert set(t["status"]) == {"ok"}


def test_vendor_evidence_says_which_runs_state_another_runs_probe():
    """Two configurations of one group, three repetitions each: rep0 probed, rep1 and rep2
    state its evidence (source); one configuration's rep0 probe failed, so its rep1 probed
    and rep2 states rep1's. Shares are means over the distinct probes (0.9, 0.8, 0.6)."""
    def rep(config, k, share, source=None, library="onednn"):
        return run(10.0, config_id=config, repetition=k, run_id=f"{config}/rep{k}",
                   vendor_evidence_library=library, vendor_evidence_version="3.5.0",
                   vendor_optimized_share=share, vendor_evidence_source=source)
    df = frame([rep("a", 0, 0.9), rep("a", 1, 0.9, "a/rep0"), rep("a", 2, 0.9, "a/rep0"),
                rep("b", 0, None, library=None), rep("b", 1, 0.8), rep("b", 2, 0.8, "b/rep1"),
                rep("c", 0, 0.6)])
    row = only(build_table("vendor_evidence", df), model="resnet50")
    assert (row["n_runs"], row["n_probed"], row["n_shared"]) == (7, 3, 3)
    assert row["shared"] == "rep1 rep2 from rep0 | rep2 from rep1"
    assert row["optimized_share"] == pytest.approx((0.9 + 0.8 + 0.6) / 3)
    assert row["status"] == "ok" and row["library"] == "onednn"


def test_vendor_evidence_whose_probing_record_is_gone_still_counts_once():
    rows = [run(10.0, config_id="a", repetition=k, run_id=f"a/rep{k}", vendor_evidence_library="onednn",
                vendor_optimized_share=0.5, vendor_evidence_source="a/rep0") for k in (1, 2)]
    row = only(build_table("vendor_evidence", frame(rows)), model="resnet50")
    assert (row["n_probed"], row["n_shared"], row["status"]) == (0, 2, "ok")
    assert row["shared"] == "rep1 rep2 from rep0" and row["optimized_share"] == pytest.approx(0.5)


def test_framework_comparison_ratio_and_its_interval():
    """ratio = mean PyTorch / mean TensorFlow = 9 / 11; interval: Welch's t on ln img/s,
    d = mean ln(8, 9, 10) - mean ln(10, 11, 12) = -0.2020453, se = 0.0832209 (variances of
    the means of the logs 0.0030747 and 0.0038510), dof = 3.846889, t(0.975, dof) =
    2.820574: exp(d -/+ t se) = 0.646116 .. 1.033225."""
    df = frame(runs([10.0, 11.0, 12.0]), runs([8.0, 9.0, 10.0], framework="pytorch"),
               runs([20.0, 21.0], intra_threads=2),  # no PyTorch twin: no row
               runs([5.0], batch_per_process=64), runs([4.0], batch_per_process=64, framework="pytorch"),
               runs([7.0, 7.0], model="alexnet"),
               [run(None, "oom", model="alexnet", framework="pytorch", repetition=i) for i in (0, 1)])
    t = build_table("framework_comparison", df)
    assert len(t) == 3
    row = only(t, model="resnet50", batch_per_process=32)
    assert (row["n_tensorflow"], row["n_pytorch"]) == (3, 3)
    assert (row["img_s_tensorflow"], row["img_s_pytorch"]) == (11.0, 9.0)
    assert (row["img_s_min_pytorch"], row["img_s_max_pytorch"]) == (8.0, 10.0)
    assert row["cv_tensorflow"] == pytest.approx(1.0 / 11.0)  # std 1 / mean 11
    assert row["cv_pytorch"] == pytest.approx(1.0 / 9.0)
    assert row["ratio"] == pytest.approx(9.0 / 11.0)
    assert row["ratio_ci95_low"] == pytest.approx(0.6461162, rel=1e-6)
    assert row["ratio_ci95_high"] == pytest.approx(1.0332255, rel=1e-6)
    assert row["layout"] == "1 node x 1 ppn" and row["status"] == "ok"
    one = only(t, batch_per_process=64)  # one run a side: a ratio without an interval
    assert one["ratio"] == pytest.approx(0.8) and pd.isna(one["ratio_ci95_low"])
    failed = only(t, model="alexnet")
    assert pd.isna(failed["ratio"]) and failed["status"] == "pytorch oom"
    median = build_table("framework_comparison", df, statistic="median")
    assert only(median, model="resnet50", batch_per_process=32)["statistic"] == "median"


def test_framework_comparison_pairs_pytorch_loader_workers_with_tensorflow():
    """A PyTorch configuration's own setting (loader_workers) is part of its hash, not its
    twin's: the twins pair by the settings the runs record."""
    real = dict(data="real")
    df = frame(runs([10.0, 10.0], config_id="c_real", **real),
               runs([12.0, 12.0], framework="pytorch", metric_loader_workers=2,
                    config_id="c_real_pytorch_0123abcd", **real))
    row = only(build_table("framework_comparison", df), data="real")
    assert row["ratio"] == pytest.approx(1.2) and row["loader_workers"] == 2
    assert pd.isna(row["variant"])
