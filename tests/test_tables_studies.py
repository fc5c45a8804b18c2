"""The tables that regenerate the studies' single-node tables and figures: the inter/intra-op
sweep (CESGA 2018 Figs. 2-7, Table 2), single vs multi process (OSU 2019 Figs. 6, 10),
img/s vs batch size (OSU 2019 Figs. 1b, 11) and the platform table (BSC 2019 Table I,
OSU 2019 Table I).

Inputs are hand-made tidy-table rows (one per run, as ``record.flatten`` gives); every
expected number is worked out by hand in the comments, not taken from the code's output.
"""

from __future__ import annotations

import pandas as pd
import pytest

from archbench.core.fields import config_id
from archbench.core.record import make_record
from archbench.plan.experiment_types import feeding
from archbench.plan.systems import resolve_system
from archbench.results import tables
from archbench.results.artifacts import make_table_files, read_measurements, to_csv
from archbench.results.collect import flatten, records_to_frame
from archbench.results.tables import TABLES, build_table
from archbench.results.tables.batches import BATCH_SCALING_COLUMNS
from archbench.results.tables.inter_intra import INTER_INTRA_BEST_COLUMNS, INTER_INTRA_SWEEP_COLUMNS
from archbench.results.tables.platforms import PLATFORM_COLUMNS
from archbench.results.tables.processes import PROCESS_LAYOUT_COLUMNS

MKL_ON = "KMP_AFFINITY=granularity=fine,compact,1,0; KMP_BLOCKTIME=0"


def run(throughput, status="ok", **fields) -> dict:
    row = {"experiment": "e", "experiment_type": "thread_scaling", "system": "sysa",
           "arch": "x86_64", "kind": "train", "model": "resnet50", "data": "synthetic",
           "strategy": "single", "nodes": 1, "processes_per_node": 1, "workers": 1,
           "intra_threads": 1, "inter_threads": 1, "batch_per_process": 64,
           "vendor_library": "onednn", "vendor_library_enabled": True,
           "throughput": throughput, "throughput_unit": "img/s" if throughput is not None else "",
           "status": status, "reason": "" if status == "ok" else f"test {status}",
           "config_id": None}
    row.update(fields)
    return row


def runs(values, status="ok", **fields) -> list[dict]:
    return [run(v, status, repetition=i, **fields) for i, v in enumerate(values)]


def only(table: pd.DataFrame, **match) -> pd.Series:
    sel = pd.Series(True, index=table.index)
    for name, value in match.items():
        sel &= table[name].astype(object).eq(value).fillna(False).astype(bool)
    assert sel.sum() == 1, f"expected one row for {match}, got {int(sel.sum())}"
    return table[sel].iloc[0]


# -------------------------------------------------------------- inter/intra-op sweep
def sweep_runs(values, inter, intra, cores, mkl="none", status="ok", **fields) -> list[dict]:
    """Runs of one inter/intra configuration pinned to ``cores`` cores (a record metric);
    the config id's hash suffix stands for the cores and the environment, as
    campaign.config_id makes it."""
    variant = f"{cores or 0xffff:04x}{len(mkl):04x}"
    values = values if status == "ok" else [None] * len(values)
    extra = {} if cores is None else {"metric_cores": cores}
    return runs(values, status, experiment="ii", experiment_type="inter_intra", mkl_env=mkl,
                inter_threads=inter, intra_threads=intra,
                config_id=f"resnet50_b64_t{intra}_i{inter}_{variant}", **extra, **fields)


@pytest.fixture
def sweep() -> pd.DataFrame:
    """A CESGA-like sweep on 1, 2 and 4 cores: inter-op {1, cores} x intra-op {0, cores},
    MKL settings off; one configuration with them on; one that ran out of memory; one
    failure whose records do not name their cores."""
    return pd.DataFrame([r for g in (
        sweep_runs([5.0, 6.0, 10.0], 1, 0, 1),      # mean 7, median 6; inter "1 = cores"
        sweep_runs([6.0, 6.0, 6.0], 1, 1, 1),       # 6; inter and intra "1 = cores"
        sweep_runs([9.0, 11.0], 1, 0, 2),           # 10
        sweep_runs([12.0, 12.0], 1, 2, 2),          # 12
        sweep_runs([8.0], 2, 0, 2),                 # 8; inter "cores"
        sweep_runs([1.0, 1.0], 2, 2, 2, status="oom"),
        sweep_runs([20.0, 22.0, 30.0], 1, 0, 4),    # mean 24, median 22
        sweep_runs([23.0, 23.0, 23.0], 1, 4, 4),    # 23
        sweep_runs([15.0], 4, 0, 4),                # 15
        sweep_runs([14.0, 17.0], 4, 4, 4),          # mean = median 15.5
        sweep_runs([30.0], 1, 4, 4, mkl=MKL_ON),    # MKL settings on
        sweep_runs([1.0], 1, 0, None, status="timeout"),  # cores unknown
    ) for r in g])


def test_sweep_has_every_configuration_with_cores_and_settings(sweep):
    t = tables.inter_intra_sweep(sweep)
    assert tuple(t.columns) == INTER_INTRA_SWEEP_COLUMNS
    assert len(t) == 12
    # inter-op 1 is a number setting (it runs on 2 and 4 cores too) and, on 1 core, the
    # pinned cores as well; intra-op 1 only ever equals the cores: it is the setting cores
    one = only(t, cores=1, intra_threads=1)
    assert (one["inter_setting"], one["intra_setting"]) == ("1 = cores", "cores")
    assert only(t, cores=1, intra_threads=0)["intra_setting"] == "0"
    four = only(t, cores=4, inter_threads=4, intra_threads=4)
    assert (four["inter_setting"], four["intra_setting"]) == ("cores", "cores")
    assert four["img_s"] == pytest.approx(15.5)
    assert (four["img_s_min"], four["img_s_max"], four["n"]) == (14.0, 17.0, 2)
    assert four["error"] == pytest.approx(3.0) and four["mkl_env"] == "none"
    mean = only(t, cores=4, inter_threads=1, intra_threads=0, mkl_env="none")
    assert mean["img_s"] == pytest.approx(24.0) and mean["statistic"] == "mean"
    on = only(t, mkl_env=MKL_ON)
    assert (on["inter_setting"], on["intra_setting"], on["cores"], on["img_s"]) == ("1", "cores", 4, 30.0)


def test_sweep_keeps_failures_empty_and_unknown_settings_unknown(sweep):
    t = tables.inter_intra_sweep(sweep)
    oom = only(t, cores=2, inter_threads=2, intra_threads=2)
    assert oom["status"] == "oom" and oom["n"] == 0
    for name in ("img_s", "img_s_min", "img_s_max", "error"):
        assert pd.isna(oom[name]), name  # empty, never zero
    unknown = only(t, status="timeout")
    # its records do not name the cores: neither cores nor MKL settings are claimed
    assert pd.isna(unknown["cores"]) and pd.isna(unknown["mkl_env"])
    assert unknown["inter_setting"] == "1" and pd.isna(unknown["img_s"])


def test_best_per_inter_setting_is_cesga_table_2(sweep):
    b = tables.inter_intra_best(sweep)
    assert tuple(b.columns) == INTER_INTRA_BEST_COLUMNS
    off = b[b["mkl_env"].eq("none").fillna(False).astype(bool)]
    assert off["inter_setting"].tolist() == ["1", "cores"]
    # inter-op 1: 7, 6 (1 core), 10, 12 (2 cores), 24, 23 (4 cores) -> 24, intra 0, 4 cores
    one = only(off, inter_setting="1")
    assert (one["img_s"], one["intra_setting"], one["intra_threads"], one["cores"]) == (24.0, "0", 0, 4)
    assert (one["img_s_min"], one["img_s_max"], one["n"]) == (20.0, 30.0, 3)
    assert one["n_configurations"] == 6 and one["n_failed_configurations"] == 0
    # inter-op cores: 7, 6 (1 core: inter 1 = cores), 8, oom (2), 15, 15.5 (4) -> 15.5
    cores = only(off, inter_setting="cores")
    assert cores["img_s"] == pytest.approx(15.5)
    assert (cores["intra_setting"], cores["cores"], cores["inter_threads"]) == ("cores", 4, 4)
    assert cores["n_configurations"] == 6 and cores["n_failed_configurations"] == 1
    on = only(b, mkl_env=MKL_ON)
    assert (on["inter_setting"], on["img_s"], on["n_configurations"]) == ("1", 30.0, 1)
    unknown = only(b, status="all failed")  # the failure whose settings are unknown
    assert pd.isna(unknown["mkl_env"]) and pd.isna(unknown["img_s"]) and pd.isna(unknown["cores"])
    assert len(b) == 4


def test_best_per_inter_setting_with_the_median(sweep):
    b = build_table("inter_intra_best", sweep, statistic="median")
    one = only(b, mkl_env="none", inter_setting="1")
    # medians: 6, 6, 10, 12, 22, 23 -> 23 with intra = cores on 4 cores
    assert one["statistic"] == "median"
    assert (one["img_s"], one["intra_setting"], one["cores"]) == (23.0, "cores", 4)


def test_best_ties_go_to_fewer_cores():
    df = pd.DataFrame(sweep_runs([10.0], 1, 0, 2) + sweep_runs([10.0], 1, 0, 4)
                      + sweep_runs([9.0], 1, 0, 1))
    row = only(tables.inter_intra_best(df), inter_setting="1")
    assert (row["img_s"], row["cores"]) == (10.0, 2)


def test_literal_thread_counts_are_not_taken_for_the_cores_setting():
    # inter-op 4 as a number on 1, 2 and 4 cores: on 4 cores it is still the number 4
    df = pd.DataFrame(sweep_runs([3.0], 4, 0, 1) + sweep_runs([5.0], 4, 0, 2)
                      + sweep_runs([9.0], 4, 0, 4))
    t = tables.inter_intra_sweep(df)
    assert set(t["inter_setting"]) == {"4"}
    assert tables.inter_intra_best(df)["inter_setting"].tolist() == ["4"]


def sweep_record(throughput, *, cores, env, status="ok", rep=0) -> dict:
    conf = {"kind": "train", "model": "resnet50", "batch_per_process": 64, "nodes": 1,
            "processes_per_node": 1, "intra_threads": cores, "inter_threads": 1,
            "vendor_library_enabled": True, "data": "synthetic", "strategy": "single",
            "tuning": {"cores": cores}, "env": env}
    metrics = {"cores": {"value": cores, "unit": "cores"}}
    return make_record(
        experiment="ii", experiment_type="inter_intra", system="sysa", arch="x86_64",
        kind="train", model="resnet50", data="synthetic", strategy="single", nodes=1,
        processes_per_node=1, workers=1, intra_threads=cores, inter_threads=1,
        batch_per_process=64, global_batch=64, vendor_library="onednn",
        vendor_library_enabled=True, config_id=config_id(conf), repetition=rep,
        start_time="t0", end_time="t1", status=status, reason="",
        throughput=throughput, throughput_unit="img/s" if throughput else "",
        env={"TF_USE_LEGACY_KERAS": "1", **env}, metrics=metrics)


def test_records_give_cores_and_mkl_settings_through_csv(tmp_path):
    """From records (the worker's metric ``cores`` and its ``env``) through the tidy CSV
    to the tables: the MKL setting is a column, and KMP_BLOCKTIME=0 read back from CSV
    stays text."""
    on = {"KMP_BLOCKTIME": "0", "KMP_AFFINITY": "granularity=fine,compact,1,0"}
    records = [sweep_record(20.0, cores=2, env={}), sweep_record(22.0, cores=2, env={}, rep=1),
               sweep_record(30.0, cores=2, env=on),
               sweep_record(None, cores=4, env=on, status="timeout")]
    row = flatten(records[2])
    assert row["env"] == f"{MKL_ON}; TF_USE_LEGACY_KERAS=1" and row["mkl_env"] == MKL_ON
    assert flatten(records[0])["mkl_env"] == "none"
    path = tmp_path / "measurements.csv"
    path.write_text(to_csv(records_to_frame(records)))
    tidy = read_measurements(path)
    summary = tables.summarise(tidy)
    assert set(summary["cores"]) == {2, 4}
    assert set(summary["mkl_env"]) == {"none", MKL_ON}
    t = build_table("inter_intra_sweep", tidy)
    off = only(t, mkl_env="none")
    assert (off["img_s"], off["cores"], off["intra_setting"]) == (21.0, 2, "cores")
    failed = only(t, cores=4)
    assert failed["mkl_env"] == MKL_ON and failed["status"] == "timeout"


def test_thread_counts_the_launcher_sets_are_not_an_mkl_setting(tmp_path):
    """OMP_NUM_THREADS follows the intra-op threads of each run: it must not split the
    best-per-inter groups (one row per inter setting, not one per intra setting)."""
    records = [sweep_record(10.0, cores=1, env={"OMP_NUM_THREADS": "1"}),
               sweep_record(18.0, cores=2, env={"OMP_NUM_THREADS": "2"})]
    assert {flatten(r)["mkl_env"] for r in records} == {"none"}
    path = tmp_path / "measurements.csv"
    path.write_text(to_csv(records_to_frame(records)))
    best = build_table("inter_intra_best", read_measurements(path))
    assert len(best) == 1 and best["img_s"].iloc[0] == 18.0 and best["cores"].iloc[0] == 2


# ------------------------------------------------------------ single vs multi process
def ppn_runs(values, ppn, status="ok", nodes=1, inter=1) -> list[dict]:
    """A ppn sweep on a 4-core node: intra-op threads = cores / ppn - 1 (at least 1)."""
    return runs(values if status == "ok" else [None] * len(values), status, experiment="ppn",
                experiment_type="ppn_sweep", strategy="horovod", nodes=nodes,
                processes_per_node=ppn, workers=nodes * ppn, global_batch=64 * nodes * ppn,
                intra_threads=max(1, 4 // ppn - 1), inter_threads=inter)


@pytest.fixture
def ppn() -> pd.DataFrame:
    return pd.DataFrame([r for g in (
        ppn_runs([10.0, 12.0], 1),                   # SP: mean = median 11
        ppn_runs([20.0, 24.0, 31.0], 2),             # mean 25, median 24
        ppn_runs([0.0], 4, status="oom"),
        ppn_runs([40.0], 2, nodes=2),                # 2 nodes: no single process run
        ppn_runs([9.0], 1, inter=2), ppn_runs([27.0], 2, inter=2),
        runs([99.0]),                                # a thread-scaling run: not in this table
    ) for r in g])


def test_process_layout_speedup_over_single_process(ppn):
    t = tables.process_layout(ppn)
    assert tuple(t.columns) == PROCESS_LAYOUT_COLUMNS
    assert len(t) == 6
    two = only(t, nodes=1, inter_threads=1, processes_per_node=2)
    # speedup = img/s / img/s(ppn 1) = 25 / 11
    assert two["speedup"] == pytest.approx(25.0 / 11.0)
    assert (two["img_s"], two["img_s_single_process"], two["intra_threads"]) == (25.0, 11.0, 1)
    assert (two["img_s_min"], two["img_s_max"], two["n"]) == (20.0, 31.0, 3)
    assert only(t, nodes=1, inter_threads=1, processes_per_node=1)["speedup"] == pytest.approx(1.0)
    assert only(t, inter_threads=2, processes_per_node=2)["speedup"] == pytest.approx(3.0)
    oom = only(t, processes_per_node=4)
    assert oom["status"] == "oom" and pd.isna(oom["speedup"]) and pd.isna(oom["img_s"])
    lonely = only(t, nodes=2)
    assert lonely["status"] == "no single process" and pd.isna(lonely["speedup"])
    assert lonely["img_s"] == 40.0


def test_process_layout_with_the_median_and_a_failed_single_process(ppn):
    t = build_table("process_layout", ppn, statistic="median")
    two = only(t, nodes=1, inter_threads=1, processes_per_node=2)
    assert two["statistic"] == "median" and two["speedup"] == pytest.approx(24.0 / 11.0)
    failed = pd.DataFrame(ppn_runs([0.0], 1, status="timeout") + ppn_runs([18.0], 2))
    row = only(tables.process_layout(failed), processes_per_node=2)
    assert row["status"] == "single process timeout" and pd.isna(row["speedup"])


# -------------------------------------------------------------------- batch scaling
def test_batch_scaling_relative_to_the_smallest_batch():
    df = pd.DataFrame([r for g in (
        runs([10.0], batch_per_process=16, intra_threads=2),
        runs([13.0, 15.0], batch_per_process=32, intra_threads=2),   # 14
        runs([15.0], batch_per_process=64, intra_threads=2),
        runs([0.0], "oom", batch_per_process=32, intra_threads=4, experiment="bs",
             experiment_type="batch_sweep"),
        runs([30.0], batch_per_process=64, intra_threads=4, experiment="bs",
             experiment_type="batch_sweep"),
        runs([50.0], batch_per_process=64, experiment_type="hybrid"),  # not fed here
    ) for r in g])
    df.loc[df["status"] == "oom", "throughput"] = None
    t = tables.batch_scaling(df)
    assert tuple(t.columns) == BATCH_SCALING_COLUMNS
    two = t[t["intra_threads"] == 2].sort_values("batch_per_process")
    # relative = img/s / img/s(batch 16): 10/10, 14/10, 15/10
    assert two["relative"].tolist() == pytest.approx([1.0, 1.4, 1.5])
    assert set(two["baseline_batch"]) == {16} and set(two["img_s_baseline"]) == {10.0}
    assert only(t, batch_per_process=32, intra_threads=2)["img_s_min"] == 13.0
    four = only(t, intra_threads=4, batch_per_process=64)
    assert four["status"] == "baseline oom" and pd.isna(four["relative"]) and four["img_s"] == 30.0
    assert only(t, intra_threads=4, batch_per_process=32)["status"] == "oom"
    assert len(t) == 5


# ------------------------------------------------------------------------- platform
SYSTEM_A = {"description": "Two-socket test nodes", "arch": "x86_64",
            "cpu_model": "Intel Xeon Platinum 8160 2.1 GHz", "nodes": 4, "sockets": 2,
            "cores_per_socket": 24, "threads_per_core": 1, "memory_per_node_gb": 96,
            "interconnect": "Intel OmniPath", "vendor_library": "onednn", "launcher": "srun",
            "container_runtime": "singularity", "image": "x86_64-onednn",
            "partition": "main", "env": {"KMP_BLOCKTIME": 1}}
SYSTEM_B = {"arch": "aarch64", "sockets": 2, "cores_per_socket": 32}


def platform_runs() -> pd.DataFrame:
    common = dict(framework="tensorflow", framework_version="2.16.1",
                  image="results/images/x86_64-onednn.sif", image_sha256="ab12")
    return pd.DataFrame([
        run(10.0, repetition=0, hosts="n1", cpu_model="Intel(R) Xeon(R) Platinum 8160 CPU @ 2.10GHz", **common),
        run(20.0, repetition=0, experiment="scale", nodes=2, workers=2, hosts="n1,n2",
            cpu_model="Intel(R) Xeon(R) Platinum 8160 CPU @ 2.10GHz", **common),
        run(None, "timeout", repetition=1, experiment="scale", nodes=2, workers=2, hosts="n2,n3",
            cpu_model="Intel(R) Xeon(R) Platinum 8160 CPU @ 2.10GHz", **common),
        run(5.0, system="sysb", arch="x86_64", repetition=0, hosts="c1", cpu_model="other",
            vendor_library="armpl", **common),
        run(138.23, system="piz-daint", arch=None, vendor_library=None, hosts=None,
            experiment="cscs", source="CSCS 2017, Table 1", nodes=1),
        run(264.57, system="piz-daint", arch=None, vendor_library=None, hosts=None,
            experiment="cscs", source="CSCS 2017, Table 1", nodes=2),
    ])


def test_platform_row_per_system_defined_and_recorded():
    systems = {"sysa": resolve_system("sysa", SYSTEM_A), "sysb": resolve_system("sysb", SYSTEM_B),
               "idle": resolve_system("idle", SYSTEM_B)}
    t = build_table("platform", platform_runs(), systems=systems)
    assert tuple(t.columns) == PLATFORM_COLUMNS
    assert t["system"].tolist() == ["idle", "sysa", "sysb", "piz-daint"]
    a = only(t, system="sysa")
    assert (a["sockets"], a["cores_per_socket"], a["cores_per_node"]) == (2, 24, 48)
    assert (a["cpu_model"], a["interconnect"], a["launcher"]) == (
        "Intel Xeon Platinum 8160 2.1 GHz", "Intel OmniPath", "srun")
    assert a["env"] == "KMP_BLOCKTIME=1"
    assert a["recorded_cpu_model"] == "Intel(R) Xeon(R) Platinum 8160 CPU @ 2.10GHz"
    assert (a["framework"], a["framework_version"], a["image_sha256"]) == ("tensorflow", "2.16.1", "ab12")
    # hosts n1, n2, n3; 3 runs of which 2 ok; 2 nodes at most
    assert (a["n_hosts"], a["n_runs"], a["n_ok"], a["max_nodes"]) == (3, 3, 2, 2)
    assert a["experiments"] == "e, scale" and a["status"] == "ok"
    b = only(t, system="sysb")
    assert b["status"] == "arch differs: aarch64 defined, x86_64 recorded"
    assert b["recorded_vendor_library"] == "armpl"
    assert only(t, system="idle")["status"] == "no runs"
    imported = only(t, system="piz-daint")
    assert imported["source"] == "CSCS 2017, Table 1" and imported["n_runs"] == 2
    assert pd.isna(imported["cpu_model"]) and imported["max_nodes"] == 2
    assert "partition" not in t


def test_platform_names_the_version_of_each_framework():
    runs = pd.concat([platform_runs(), pd.DataFrame([run(
        8.0, repetition=0, experiment="torch", framework="pytorch", framework_version="2.7.1",
        config_id="x_pytorch")])], ignore_index=True)
    a = only(build_table("platform", runs, systems={}), system="sysa")
    assert (a["framework"], a["framework_version"]) == ("pytorch | tensorflow",
                                                        "pytorch 2.7.1 | tensorflow 2.16.1")


def test_platform_through_the_workflow_adapter(tmp_path):
    source = tmp_path / "measurements.csv"
    source.write_text(to_csv(platform_runs()))
    outputs = {k: tmp_path / f"platform.{k}" for k in ("csv", "md", "tex")}
    table = make_table_files("platform", source, outputs=outputs,
                             systems={"sysa": resolve_system("sysa", SYSTEM_A)})
    assert only(table, system="sysa")["cores_per_node"] == 48
    assert "Platinum 8160" in outputs["md"].read_text()
    with pytest.raises(ValueError, match="tidy table"):
        build_table("platform", tables.summarise(platform_runs()))


# ------------------------------------------------------------------------- registry
def test_tables_are_registered_and_fed_by_their_experiment_types():
    for name in ("inter_intra_sweep", "inter_intra_best", "process_layout", "batch_scaling",
                 "platform"):
        assert name in TABLES
    assert TABLES["inter_intra_best"].build is tables.inter_intra_best
    assert feeding("inter_intra_sweep") == feeding("inter_intra_best") == ["inter_intra"]
    assert feeding("process_layout") == ["ppn_sweep"]
    # ppn_sweep: batch sizes at a fixed multi-process layout (OSU 2019 Figs. 5, 11)
    assert feeding("batch_scaling") == ["thread_scaling", "batch_sweep", "ppn_sweep"]
    assert TABLES["platform"].uses_systems and TABLES["platform"].uses_runs


def test_sweep_says_whether_a_runtime_reads_the_mkl_settings(sweep):
    """The MKL settings rows state, from the probe's evidence, whether any loaded runtime
    reads KMP_* at all (none for the pinned TensorFlow), and "unknown" is left empty."""
    frame = sweep.copy()
    frame["kmp_read_by"] = None
    on = frame["mkl_env"].eq(MKL_ON)
    frame.loc[on, "kmp_read_by"] = "none"
    frame.loc[frame["intra_threads"].eq(0) & frame["metric_cores"].eq(4), "kmp_read_by"] = "libiomp5.so"
    t = tables.inter_intra_sweep(frame)
    assert only(t, cores=4, inter_threads=1, intra_threads=4, mkl_env=MKL_ON)["kmp_read_by"] == "none"
    assert only(t, cores=4, inter_threads=1, intra_threads=0)["kmp_read_by"] == "libiomp5.so"
    assert pd.isna(only(t, cores=2, inter_threads=1, intra_threads=2)["kmp_read_by"])
    best = tables.inter_intra_best(frame)
    assert set(best["kmp_read_by"].dropna()) <= {"none", "libiomp5.so"}


def test_kmp_readers_come_from_the_loaded_runtimes():
    from archbench.workloads.training.vendor_evidence.library import kmp_read_by
    from archbench.workloads.training.vendor_evidence.probing import failed_evidence
    probed = {"library": "onednn", "loaded_libraries": ["libgomp.so.1"]}
    assert kmp_read_by(probed) == "none"  # GNU OpenMP ignores KMP_*
    assert kmp_read_by({**probed, "loaded_libraries": ["libiomp5.so", "libmkl_rt.so"]}) == "libiomp5.so"
    assert kmp_read_by(failed_evidence("probe exited 1")) is None and kmp_read_by(None) is None
