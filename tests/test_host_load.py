"""A busy machine is a finding (issue 53): every record states what other work its cores
did over its run (``host_load``) and whether that passed the limit (``host_busy``); the
summary and every ratio built on a flagged record say so; ``rerun_busy`` reruns it.

The competitor tests plant a real busy loop pinned to core 0 beside a supervised run of
the small CNN on cores 0 and 1, in TensorFlow and in PyTorch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_compare import configuration, run_record
from test_precision_speedup import BF16, FP32, runs
from test_run import SYSTEM, measurement

from archbench.core import hostload
from archbench.core.fields import config_id
from archbench.core.record import read_record
from archbench.execute import supervisor
from archbench.plan.submission import job_resources
from archbench.results.collect import record_files, records_to_frame
from archbench.results.comparison import compare
from archbench.results.tables import build_table
from archbench.results.tables.common import summarise
from archbench.workloads.sense import problem

CORES = [0, 1]
BUSY_LOOP = "while True: pass"


def load(other: float, *, cores: int = 2, asked: int = 2) -> dict:
    """The record fields of a run whose cores did ``other`` cores of other work."""
    figures = {"window_s": 10.0, "cores": cores, "cores_asked": asked, "own_cpu_s": 9.0,
               "cores_busy_s": 9.0 + other * 10, "steal_s": 0.0, "other_cores": other,
               "load_1m": [1.0, 2.0], "slurm_oversubscribe": None}
    return {"host_load": figures, "host_busy": hostload.is_busy(figures)}


def test_the_flag_counts_other_work_beyond_the_cores_a_run_left_spare():
    sample = hostload.Sample
    before = sample(0.0, 1.0, 100.0, 1.0, 7.0, 0.5)
    after = sample(10.0, 19.0, 129.0, 1.5, 12.0, 1.5)
    figures = hostload.figures(before, after, cores=3, cores_asked=2)
    assert (figures["own_cpu_s"], figures["cores_busy_s"], figures["steal_s"]) == (18.0, 29.0, 0.5)
    assert figures["niced_s"] == 5.0  # niced work is stated, not counted in other_cores
    assert figures["other_cores"] == pytest.approx(1.1) and figures["load_1m"] == [0.5, 1.5]
    assert not hostload.is_busy(figures)  # 1.1 cores on the one spare core: within 0.25
    assert hostload.is_busy({**figures, "cores_asked": 3})
    assert hostload.is_busy({**figures, "other_cores": None}) is None
    assert hostload.cores_asked({"processes_per_node": 2, "intra_threads": 3}, 16) == 6
    assert hostload.cores_asked({"intra_threads": 0}, 16) == 16  # the framework takes all


def test_a_record_whose_flag_is_not_what_its_figures_say_makes_no_sense():
    conf = configuration(threads=2)
    busy = run_record(conf, 0, 100.0, **load(1.0))
    assert problem(busy) == "" and busy["host_busy"] is True
    assert problem({**busy, "host_busy": False}) == \
        "host_busy: record says False, its host_load figures say True"
    assert problem({**busy, "host_load": None}) == "host_busy: True stated without host_load figures"



def test_short_windows_are_never_excluded_for_the_rounding_of_their_own_figures():
    """The figures are rounded to milliseconds, so a short window's other_cores differs from
    what its rounded figures give (a 0.293 s run beside other work: 1.139 cores stated,
    1.137 derived); that difference is not an inconsistency. One beyond it still is."""
    import random
    rng = random.Random(53)
    conf = configuration(threads=2)
    for _ in range(2000):
        window = rng.uniform(0.01, 3.0)
        own = rng.uniform(0.0, 2 * window)
        busy = own + rng.uniform(0.0, 2 * window - own + 0.01)
        before = hostload.Sample(10.0, 1.0, 100.0, 0.0, 0.0, 0.5)
        after = hostload.Sample(10.0 + window, 1.0 + own, 100.0 + busy, 0.0, 0.0, 0.5)
        figures = hostload.figures(before, after, cores=2, cores_asked=1)
        record = run_record(conf, 0, 100.0, host_load=figures, host_busy=hostload.is_busy(figures))
        assert problem(record) == "", figures
        low, high = hostload.other_cores_bounds(figures)
        assert low <= figures["other_cores"] <= high
        wrong = {**figures, "other_cores": round(high + 0.002, 3)}
        assert problem({**record, "host_load": wrong, "host_busy": hostload.is_busy(wrong)}) \
            .startswith("host_load: other_cores "), wrong

def test_the_summary_and_every_ratio_on_a_flagged_record_say_so():
    records = runs(FP32, (10.0, 11.0), (2.0, 1.0)) + runs(BF16, (30.0, 31.0), (2.0, 1.0))
    records[0].update(load(1.0))  # one fp32 repetition shared its cores
    frame = records_to_frame(records)
    summary = summarise(frame).set_index("precision")
    assert summary.loc["fp32", "host_busy"] and summary.columns.get_loc("host_busy") == \
        summary.columns.get_loc("spread_flag") + 1
    assert pd.isna(summary.loc["bf16", "host_busy"])  # no run states it
    speedup = build_table("precision_speedup", frame)
    assert bool(speedup.loc[0, "host_busy"])  # bf16 is quiet, its fp32 twin was not
    quiet = build_table("precision_speedup", records_to_frame(
        [{**r, **load(0.0)} for r in runs(FP32, (10.0, 11.0), (2.0, 1.0)) + runs(BF16, (30.0, 31.0), (2.0, 1.0))]))
    assert quiet.loc[0, "host_busy"] == False  # noqa: E712 (pandas' boolean)


def test_a_comparison_on_flagged_runs_says_so():
    conf = configuration(threads=2)
    base = records_to_frame([run_record(conf, r, v, **load(0.0)) for r, v in enumerate((100.0, 101.0, 99.0))])
    new = records_to_frame([run_record(conf, r, v, **load(1.0 if r == 0 else 0.0))
                            for r, v in enumerate((50.0, 51.0, 49.0))])
    row = compare(base, new).table.iloc[0]
    assert row["verdict"] == "slower" and bool(row["host_busy"])
    assert row["reason"] == "host busy (new: 1 of 3 ok run(s) shared their cores)"
    assert pd.isna(compare(base, base).table.iloc[0]["host_busy"])  # neither side flagged


def test_rerun_busy_is_validated_and_bounds_the_job_time():
    m = measurement(rerun_busy=2)
    assert job_resources(m, {**SYSTEM, "runtime_minutes": 5})["runtime"] == \
        3 * int(m["timeout_minutes"]) + (job_resources(measurement(), SYSTEM)["runtime"]
                                         - int(measurement()["timeout_minutes"]))


# ---------------------------------------------------------------- a real competitor
@pytest.fixture
def two_cores():
    """This process (and the supervisor's worker) on cores 0 and 1."""
    if not hasattr(os, "sched_getaffinity") or not set(CORES) <= os.sched_getaffinity(0):
        pytest.skip("needs cores 0 and 1")
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, CORES)
    yield
    os.sched_setaffinity(0, before)


def supervised(tmp_path: Path, framework: str, name: str, **overrides) -> dict:
    m = measurement(**{"framework": framework, "intra_threads": 2, "steps": 3, **overrides})
    m["config_id"] = config_id(m)
    out = tmp_path / name / "rep0.json"
    return supervisor.supervise(m, SYSTEM, output=out, log_path=tmp_path / name / "w.log")


@pytest.mark.parametrize("framework", ["tensorflow", "pytorch"])
def test_a_competing_process_flags_the_run_and_the_flag_follows_the_figures(framework, tmp_path,
                                                                            two_cores):
    """A busy loop on one of the run's two cores flags it; the same run without it shows
    that core's worth less other work, and its flag is what its own figures say (a quiet
    machine's run unflagged, one beside other work, such as CI's niced image
    builds, flagged: never skipped)."""
    competitor = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", BUSY_LOOP])
    try:
        busy = supervised(tmp_path, framework, "busy")
    finally:
        competitor.kill()
        competitor.wait()
    assert busy["status"] == "ok" and busy["host_busy"] is True, busy["host_load"]
    assert busy["host_load"]["cores"] == 2  # the flag: other_cores > 0.25 on no spare core

    quiet = supervised(tmp_path, framework, "quiet")
    assert quiet["status"] == "ok" and quiet["host_load"]["own_cpu_s"] > 0
    assert busy["host_load"]["other_cores"] - quiet["host_load"]["other_cores"] > hostload.BUSY_LIMIT, \
        (busy["host_load"], quiet["host_load"])
    assert quiet["host_busy"] is hostload.is_busy(quiet["host_load"]), quiet["host_load"]
    assert read_record(tmp_path / "busy" / "rep0.json")["host_busy"] is True


def test_a_niced_competitor_is_stated_not_counted(tmp_path, two_cores):
    """A busy loop at nice 19 on one of the run's cores (a background build) takes the
    run's idle time, not its cores: its seconds are ``niced_s``, not ``other_cores``."""
    competitor = subprocess.Popen(["nice", "-n", "19", "taskset", "-c", "0", sys.executable,
                                   "-c", BUSY_LOOP])
    try:
        record = supervised(tmp_path, "pytorch", "niced")
    finally:
        competitor.kill()
        competitor.wait()
    figures = record["host_load"]
    assert record["status"] == "ok" and figures["niced_s"] > 0.1 * figures["window_s"], figures
    assert figures["other_cores"] < figures["niced_s"] / figures["window_s"], figures


def test_rerun_busy_keeps_every_busy_attempt_beside_the_record(tmp_path, two_cores):
    competitor = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", BUSY_LOOP])
    try:
        record = supervised(tmp_path, "pytorch", "raw/local/e/c", rerun_busy=1)
    finally:
        competitor.kill()
        competitor.wait()
    folder = tmp_path / "raw" / "local" / "e" / "c"
    kept = read_record(folder / "rep0.json.busy1")
    assert record["host_busy"] is True and kept["host_busy"] is True and kept["status"] == "ok"
    assert kept["start_time"] != record["start_time"] or kept["end_time"] != record["end_time"]
    assert not (folder / "rep0.json.busy2").exists()  # bounded: one rerun
    assert record_files(tmp_path / "raw") == [folder / "rep0.json"]  # the kept one counts nowhere


def test_a_framework_ratio_on_a_flagged_side_says_so():
    from test_framework_comparison import records as framework_records
    records = [{**r, **load(1.0 if r["framework"] == "pytorch" and r["repetition"] == 0 else 0.0)}
               for r in framework_records(("tensorflow", "pytorch"))]
    row = build_table("framework_comparison", records_to_frame(records)).iloc[0]
    assert row["framework"] == "pytorch" and bool(row["host_busy"]) and row["status"] == "ok"
    quiet = [{**r, **load(0.0)} for r in framework_records(("tensorflow", "pytorch"))]
    assert not build_table("framework_comparison", records_to_frame(quiet)).iloc[0]["host_busy"]
