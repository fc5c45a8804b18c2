"""Before and after: two record sets compared configuration by configuration
(archbench/results/comparison.py, the `archbench compare` command, rule compare_results)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import copy_workflow, snakemake, tool_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archbench import cli
from archbench.core import metrics
from archbench.core.fields import config_id
from archbench.core.record import make_record, raw_path, schema, write_record
from archbench.core.validate import ConfigError
from archbench.inputs import check_inputs
from archbench.plan.campaign import load_campaign
from archbench.results import compare_cli
from archbench.results.collect import records_to_frame
from archbench.results.comparison import compare, verdict
from archbench.results.record_sets import (
    CompareError,
    Filter,
    baseline,
    implied_across,
    parse_filter,
    read_side,
)

STEPS = 4
ONEDNN = {"library": "onednn", "version": "3.5.3", "implementations": {}, "optimized_share": 1.0,
          "reference_share": 0.0, "error": ""}


def configuration(*, threads: int = 1, batch: int = 8, vendor: bool = True, system: str = "sysa",
                  experiment: str = "threads") -> dict:
    """The identity fields of a one-process training configuration."""
    conf = {"experiment": experiment, "experiment_type": "thread_scaling", "system": system,
            "arch": "x86_64", "kind": "train", "model": "small_cnn", "data": "synthetic",
            "strategy": "single", "nodes": 1, "processes_per_node": 1, "workers": 1,
            "intra_threads": threads, "inter_threads": 1, "batch_per_process": batch,
            "global_batch": batch, "image_size": 32, "vendor_library": "onednn",
            "vendor_library_enabled": vendor, "device": "cpu"}
    return {**conf, "config_id": config_id(conf)}


def run_record(conf: dict, rep: int, throughput: float | None, *, status: str = "ok",
               unit: str = "img/s", **provenance) -> dict:
    """A consistent record of one run: images = global batch x steps, window = images /
    throughput (no step times: the sense checks then skip them)."""
    ok = status == "ok"
    images = conf["global_batch"] * STEPS
    fields = {"framework_version": "2.18.1", "cpu_model": "Xeon", "hosts": ["n1"],
              "vendor_evidence": ONEDNN, **provenance}
    metric = {"images": {"value": images, "unit": "img"},
              "window_s": {"value": images / throughput, "unit": "s"}} if ok else {}
    return make_record(**conf, repetition=rep, start_time="2024-01-01T00:00:00Z",
                       end_time="2024-01-01T00:01:00Z", status=status,
                       reason="" if ok else f"fabricated {status}", warmup_steps=1,
                       measured_steps=STEPS, throughput=throughput if ok else None,
                       throughput_unit=unit if ok else "", metrics=metric, **fields)


def frame(runs: dict[tuple, list], **provenance) -> pd.DataFrame:
    """The tidy table of ``{(threads, batch): [throughput or status, ...]}``."""
    records = []
    for (threads, batch), values in runs.items():
        conf = configuration(threads=threads, batch=batch)
        for rep, value in enumerate(values):
            if isinstance(value, str):
                records.append(run_record(conf, rep, None, status=value, **provenance))
            else:
                records.append(run_record(conf, rep, value, **provenance))
    return records_to_frame(records)


def row(comparison, threads: int = 1, batch: int = 8) -> pd.Series:
    """The comparison's row of one configuration."""
    table = comparison.table
    return table[table["config_id"] == configuration(threads=threads, batch=batch)["config_id"]].iloc[0]


# ------------------------------------------------------------------ the ratio interval
def test_the_interval_is_welchs_on_log_throughput():
    """exp of scipy's Welch interval of the difference of mean ln throughput."""
    from scipy import stats
    base, new = [100.0, 104.0, 97.0, 101.0], [92.0, 90.5, 93.0]
    ratio, low, high, dof = metrics.ratio_interval(base, new)
    welch = stats.ttest_ind(np.log(new), np.log(base), equal_var=False)
    interval = welch.confidence_interval(0.95)
    assert ratio == pytest.approx(math.exp(np.mean(np.log(new)) - np.mean(np.log(base))))
    assert (low, high) == pytest.approx((math.exp(interval.low), math.exp(interval.high)))
    assert dof == pytest.approx(welch.df)


def test_worked_numbers_of_a_ten_percent_slowdown():
    """base 100, 101, 99 img/s; new exactly 0.9 x each: ratio of geometric means 0.9, the
    same spread of ln values on both sides (s = 0.01, rounded), se = s sqrt(2/3),
    dof = 4, t = 2.776: interval 0.9 x exp(-/+ 2.776 x 0.00816) = [0.880, 0.921]."""
    ratio, low, high, dof = metrics.ratio_interval([100, 101, 99], [90, 90.9, 89.1])
    assert ratio == pytest.approx(0.9)
    assert dof == pytest.approx(4.0)
    assert (low, high) == pytest.approx((0.8799, 0.9205), abs=2e-4)


def test_an_interval_needs_two_runs_a_side():
    with pytest.raises(ValueError, match="2 values per side"):
        metrics.ratio_interval([100.0], [90.0, 91.0])


def test_the_interval_of_base_over_new_is_the_reciprocal():
    base, new = [100.0, 103.0, 98.0], [110.0, 108.0, 115.0, 111.0]
    ratio, low, high, _ = metrics.ratio_interval(base, new)
    back = metrics.ratio_interval(new, base)
    assert back[:3] == pytest.approx((1 / ratio, 1 / high, 1 / low))


# ------------------------------------------------------------------------- verdicts
def test_a_ten_percent_slowdown_with_a_tight_spread_is_slower():
    base = frame({(1, 8): [100.0, 101.0, 99.0]})
    new = frame({(1, 8): [90.0, 90.9, 89.1]})
    r = row(compare(base, new))
    assert (r["verdict"], r["n_base"], r["n_new"]) == ("slower", 3, 3)
    assert r["ratio"] == pytest.approx(0.9)
    assert r["ci95_high"] < 1


def test_the_same_change_inside_a_wide_spread_is_no_significant_change():
    base = frame({(1, 8): [80.0, 100.0, 120.0]})
    new = frame({(1, 8): [72.0, 90.0, 108.0]})
    r = row(compare(base, new))
    assert r["ratio"] == pytest.approx(0.9)
    assert (r["verdict"], r["reason"]) == ("no significant change", "interval contains 1")
    assert r["ci95_low"] < 1 < r["ci95_high"]


def test_a_significant_change_inside_the_threshold_is_no_change():
    base = frame({(1, 8): [100.0, 100.1, 99.9]})
    new = frame({(1, 8): [99.0, 99.1, 98.9]})  # -1 %, interval well below 1
    assert row(compare(base, new, threshold=0.02))["verdict"] == "no significant change"
    assert "threshold" in row(compare(base, new, threshold=0.02))["reason"]
    assert row(compare(base, new, threshold=0.0))["verdict"] == "slower"
    assert row(compare(new, base, threshold=0.0))["verdict"] == "faster"


def test_the_verdict_rule():
    assert verdict(1.10, (1.05, 1.15), 0.02) == ("faster", "")
    assert verdict(0.90, (0.85, 0.95), 0.02) == ("slower", "")
    assert verdict(0.90, (0.80, 1.01), 0.02)[0] == "no significant change"
    assert verdict(1.01, (1.005, 1.015), 0.02)[0] == "no significant change"
    assert verdict(1.01, (1.005, 1.015), 0.0) == ("faster", "")


def test_the_median_is_the_statistic_when_asked():
    base = frame({(1, 8): [100.0, 101.0, 99.0, 160.0]})
    new = frame({(1, 8): [90.0, 90.9, 89.1, 90.0]})
    assert row(compare(base, new, statistic="median"))["base"] == pytest.approx(100.5)
    assert row(compare(base, new))["base"] == pytest.approx(115.0)


# ------------------------------------------------------------- what is not comparable
def test_too_few_runs_and_failures_are_not_comparable_and_shown():
    base = frame({(1, 8): [100.0, 101.0, 99.0], (2, 8): [180.0, 182.0], (4, 8): [300.0, 301.0, 299.0]})
    new = frame({(1, 8): [90.0, "oom", "oom"], (2, 8): ["timeout", 181.0, 183.0],
                 (4, 8): ["oom", "oom", "oom"]})
    c = compare(base, new)
    one = row(c, 1)
    assert (one["verdict"], one["failures_new"], one["n_new"]) == ("not comparable", "oom:2", 1)
    assert one["reason"] == "new: 1 ok run(s) (oom:2); needs 2 per side"
    two = row(c, 2)  # one failed run of three: still comparable, the failure shown
    assert two["verdict"] == "no significant change" and two["failures_new"] == "timeout:1"
    four = row(c, 4)
    assert (four["verdict"], four["n_new"], four["failures_new"]) == ("not comparable", 0, "oom:3")
    assert math.isnan(four["ratio"])


def test_a_unit_mismatch_is_not_comparable():
    conf = configuration()
    base = records_to_frame([run_record(conf, k, v) for k, v in enumerate([100.0, 101.0])])
    new = records_to_frame([run_record(conf, k, v, unit="samples/s") for k, v in enumerate([100.0, 101.0])])
    r = compare(base, new).table.iloc[0]
    assert (r["verdict"], r["reason"]) == ("not comparable", "units differ: img/s vs samples/s")


def test_configurations_on_one_side_only_are_listed_on_their_side():
    base = frame({(1, 8): [100.0, 101.0], (2, 8): [180.0, 182.0]})
    new = frame({(1, 8): [100.0, 101.0], (1, 16): [120.0, 121.0]})
    c = compare(base, new)
    present = dict(zip(c.table["config_id"], c.table["present"]))
    assert present == {configuration(threads=1)["config_id"]: "both",
                       configuration(threads=2)["config_id"]: "base only",
                       configuration(batch=16)["config_id"]: "new only"}
    assert set(c.table.loc[c.table["present"] != "both", "verdict"]) == {"not comparable"}
    only = c.table[c.table["present"] == "new only"].iloc[0]
    assert (only["n_new"], only["new"], only["reason"]) == (2, 120.5, "only in new")
    assert pd.isna(only["n_base"])


# ------------------------------------------------------------------------ provenance
def test_provenance_never_matches_and_its_changes_are_listed():
    base = frame({(1, 8): [100.0, 101.0, 99.0]}, image_sha256="a" * 64, hosts=["n1"])
    new = frame({(1, 8): [90.0, 90.9, 89.1]}, image_sha256="b" * 64, hosts=["n7"],
                framework_version="2.19.0", cuda_version="12.5",
                vendor_evidence={**ONEDNN, "version": "3.6.0"}, git_commit="c0ffee" * 7)
    c = compare(base, new)
    assert len(c.table) == 1 and c.table.iloc[0]["present"] == "both"
    changed = c.table.iloc[0]["changed"]
    for part in ("framework_version: 2.18.1 -> 2.19.0", "vendor_evidence_version: 3.5.3 -> 3.6.0",
                 f"image_sha256: {'a' * 12} -> {'b' * 12}", "hosts: n1 -> n7",
                 "git_commit: none -> c0ffeec0ffee"):
        assert part in changed
    # the CUDA version a CPU run's framework build carries was never used: not a change
    assert "cuda_version" not in changed and "cuda_version" not in set(c.changes["field"])
    summary = c.changes.set_index("field")
    assert summary.loc["framework_version", "changed"]
    assert summary.loc["framework_version", "what"] == "TensorFlow version"
    assert summary.loc["framework_version", "configurations"] == "1 of 1"
    assert not summary.loc["cpu_model", "changed"]
    assert summary.loc["cpu_model", "base"] == "Xeon"


def test_across_an_identity_field():
    """Vendor library on (base) vs off (new): matched across the flag, its values a change."""
    on = [run_record(configuration(threads=t, vendor=True), k, 100.0 * t + k) for t in (1, 2) for k in range(3)]
    off = [run_record(configuration(threads=t, vendor=False), k, 70.0 * t + k) for t in (1, 2) for k in range(3)]
    assert set(compare(records_to_frame(on), records_to_frame(off)).table["present"]) == {
        "base only", "new only"}
    c = compare(records_to_frame(on), records_to_frame(off), across=["vendor_library_enabled"])
    assert list(c.table["verdict"]) == ["slower", "slower"]
    assert c.table["config_id_new"].str.contains("vloff").all()
    assert "vendor_library_enabled: True -> False" in c.table.iloc[0]["changed"]
    both = records_to_frame(on + off)  # one side holding both: not a comparison
    mixed = compare(both, records_to_frame(off), across=["vendor_library_enabled"]).table
    assert set(mixed["verdict"]) == {"not comparable"}
    assert mixed["reason"].str.startswith("base mixes vendor_library_enabled").all()
    with pytest.raises(CompareError, match="not identity fields"):
        compare(both, both, across=["hosts"])


# --------------------------------------------------------------------------- filters
def test_filters():
    assert parse_filter("git_commit=abc") == Filter("git_commit", "=", "abc")
    assert parse_filter("start_time>=2024-05") == Filter("start_time", ">=", "2024-05")
    with pytest.raises(CompareError, match="expected KEY=VALUE"):
        parse_filter("nonsense")
    records = [run_record(configuration(vendor=v), k, 100.0 + k, git_commit=commit)
               for v, commit in ((True, "abcdef" * 7), (False, "123456" * 7)) for k in range(2)]
    tidy = records_to_frame(records)
    assert parse_filter("git_commit=abcd").mask(tidy).sum() == 2  # a short hash: its prefix
    assert parse_filter("vendor_library_enabled=off").mask(tidy).sum() == 2
    assert parse_filter("vendor_library_enabled!=on").mask(tidy).sum() == 2
    assert parse_filter("repetition<1").mask(tidy).sum() == 2
    with pytest.raises(CompareError, match="no column 'colour'"):
        parse_filter("colour=red").mask(tidy)
    pinned = implied_across([parse_filter("vendor_library_enabled=on"), parse_filter("git_commit=a")],
                            [parse_filter("vendor_library_enabled=off"), parse_filter("git_commit=b")])
    assert pinned == ["vendor_library_enabled"]  # git_commit is provenance, never identity


# ------------------------------------------------------------ a set against itself
run_values = st.lists(st.one_of(st.floats(1.0, 1e4), st.sampled_from(["oom", "timeout", "failed"])),
                      min_size=1, max_size=4)
record_sets = st.dictionaries(st.tuples(st.sampled_from([1, 2, 4]), st.sampled_from([8, 16, 32])),
                              run_values, min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=record_sets)
def test_a_set_compared_with_itself_flags_nothing(runs):
    tidy = frame(runs)
    c = compare(tidy, tidy, threshold=0.0)
    assert len(c.table) == len(runs) and set(c.table["present"]) == {"both"}
    assert not c.table["verdict"].isin(["faster", "slower"]).any()
    comparable = c.table[c.table["verdict"] != "not comparable"]
    assert (comparable["ratio"] == 1.0).all()
    assert ((comparable["ci95_low"] <= 1) & (comparable["ci95_high"] >= 1)).all()
    enough = {configuration(threads=t, batch=b)["config_id"] for (t, b), v in runs.items()
              if sum(not isinstance(x, str) for x in v) >= 2}
    assert set(comparable["config_id"]) == enough
    assert not c.changes["changed"].any()
    assert c.regressions(10.0).empty


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=record_sets, factor=st.floats(0.5, 2.0))
def test_swapping_the_sides_swaps_the_verdicts(runs, factor):
    base = frame(runs)
    new = base.assign(throughput=base["throughput"] * factor)
    forth = compare(base, new).table.set_index("config_id")
    back = compare(new, base).table.set_index("config_id").loc[forth.index]
    swap = {"faster": "slower", "slower": "faster"}
    assert list(back["verdict"]) == [swap.get(v, v) for v in forth["verdict"]]
    assert np.allclose(back["ratio"], 1 / forth["ratio"], equal_nan=True)


# ---------------------------------------------------------------- the command line
def write_set(root: Path, values: dict[tuple, list], **provenance) -> Path:
    """Records of ``{(threads, batch): [throughput, ...]}`` under ``root/raw``."""
    for (threads, batch), runs in values.items():
        conf = configuration(threads=threads, batch=batch)
        for rep, value in enumerate(runs):
            record = run_record(conf, rep, value, **provenance)
            write_record(root / raw_path(record), record)
    return root


@pytest.fixture
def two_sets(tmp_path):
    before = write_set(tmp_path / "before" / "results", {
        (1, 8): [100.0, 101.0, 99.0], (2, 8): [190.0, 191.0, 189.0], (2, 16): [200.0, 260.0, 150.0],
        (4, 8): [300.0, 301.0]})
    after = write_set(tmp_path / "after" / "results", {
        (1, 8): [90.0, 90.9, 89.1], (2, 8): [210.0, 211.0, 209.0], (2, 16): [190.0, 250.0, 140.0],
        (1, 16): [120.0, 121.0]}, framework_version="2.19.0")
    return before, after


def test_the_command_compares_two_folders_end_to_end(two_sets, tmp_path, capsys):
    before, after = two_sets
    out = tmp_path / "compare"
    assert cli.main(["compare", str(before), str(after), "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "5 configurations: 1 slower, 1 faster, 1 no significant change, 2 not comparable." in printed
    table = pd.read_csv(out / "comparison.csv")
    assert list(table["verdict"]) == ["slower", "faster", "no significant change", "not comparable",
                                      "not comparable"]
    assert list(table["present"]) == ["both", "both", "both", "base only", "new only"]
    changes = pd.read_csv(out / "changes.csv").set_index("field")
    assert changes.loc["framework_version", "new"] == "2.19.0"
    assert {p.name for p in out.iterdir()} == set(compare_cli.FILES)
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert cli.main(["compare", str(before), str(after), "--output", str(out)]) == 0
    assert first == {p.name: p.read_bytes() for p in out.iterdir()}, "not byte-identical"
    assert (out / "comparison.png").read_bytes()[:4] == b"\x89PNG"
    assert "\\toprule" in (out / "comparison.tex").read_text()


def test_fail_below_names_the_regressions(two_sets, capsys):
    before, after = two_sets
    assert compare_cli.main([str(before), str(after), "--fail-below", "0.95"]) == 1
    err = capsys.readouterr().err
    assert "1 significant slowdown(s) below ratio 0.95" in err
    assert f"sysa/threads/{configuration(threads=1)['config_id']}: ratio 0.900" in err
    # a configuration on one side only could not be judged: the gate says so (exit 2)
    assert compare_cli.main([str(before), str(after), "--fail-below", "0.85"]) == 2
    assert "cannot judge 2 of 5 configuration(s)" in capsys.readouterr().err
    assert compare_cli.main([str(before), str(after), "--fail-below", "0.85",
                             "--allow-incomparable"]) == 0
    # the wide configuration is 4 % slower, but not significantly: never a failure
    assert compare_cli.main([str(before), str(after), "--fail-below", "1.0",
                             "--allow-incomparable"]) == 1
    assert "1 significant slowdown(s)" in capsys.readouterr().err


def test_one_folder_compared_by_filter(tmp_path, capsys):
    records = [run_record(configuration(vendor=v), k, value, git_commit=commit)
               for v, commit, values in ((True, "aaaa" * 10, [100.0, 101.0, 99.0]),
                                         (False, "bbbb" * 10, [70.0, 70.5, 69.5]))
               for k, value in enumerate(values)]
    for record in records:
        write_record(tmp_path / raw_path(record), record)
    assert compare_cli.main([str(tmp_path), "--base-filter", "vendor_library_enabled=on",
                             "--new-filter", "vendor_library_enabled=off"]) == 0
    out = capsys.readouterr().out
    assert "1 configurations: 1 slower" in out and "matched across vendor_library_enabled" in out
    assert "git_commit: aaaaaaaaaaaa -> bbbbbbbbbbbb" in out
    assert compare_cli.main([str(tmp_path)]) == 2
    assert "choose the two sides" in capsys.readouterr().err
    assert compare_cli.main([str(tmp_path / "nowhere"), str(tmp_path)]) == 2
    assert "not a results folder" in capsys.readouterr().err


def test_python_dash_m_runs_the_command(two_sets):
    before, after = two_sets
    proc = subprocess.run([sys.executable, "-m", "archbench.results.compare_cli", str(before), str(after),
                           "--fail-below", "0.95"], capture_output=True, text=True, env=tool_env(),
                          timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "| slower |" in proc.stdout


def test_a_side_reads_a_collected_table(two_sets, tmp_path):
    before, _ = two_sets
    tidy, errors = read_side(before)
    tidy.to_csv(tmp_path / "measurements.csv", index=False)
    again, _ = read_side(tmp_path / "measurements.csv")
    assert errors == [] and len(again) == len(tidy) == 11
    assert compare(tidy, again).counts()["no significant change"] == 4


# ---------------------------------------------------------------------- the workflow
def test_a_campaign_names_an_existing_baseline(two_sets, tmp_path):
    before, _ = two_sets
    campaign = {"campaign": "c", "systems": ["local"], "experiments": {
        "threads": {"type": "thread_scaling", "models": ["small_cnn"], "batch_per_process": [8],
                    "threads": [1]}}}
    assert baseline({"results": str(before), "across": ["vendor_library_enabled"]}).across == (
        "vendor_library_enabled",)
    for setting, message in ((str(tmp_path / "nowhere"), "not a results folder"),
                             ({"results": str(before), "across": ["hosts"]}, "not identity fields")):
        with pytest.raises(ConfigError, match=f"compare_with: .*{message}"):
            check_inputs({**campaign, "compare_with": setting}, [])
    with pytest.raises(ConfigError, match="compare_with"):
        load_campaign({**campaign, "compare_with": {"results": "x", "threshold": -1}})


@pytest.mark.workflow
def test_rule_compare_results_writes_the_comparison(tmp_path):
    """A campaign with ``compare_with:`` rebuilt from records on disk: rule compare_results
    compares them with the baseline's and writes results/compare/."""
    work = copy_workflow(tmp_path / "wf")
    campaign = yaml.safe_load((work / "tiny.yaml").read_text())
    campaign["defaults"]["repetitions"] = 2
    campaign["compare_with"] = {"results": "before/results", "threshold": 0.01}
    (work / "c.yaml").write_text(yaml.safe_dump(campaign))
    properties = schema()["properties"]
    for m in load_campaign(campaign, work / "config" / "systems").measurements:
        fields = {k: v for k, v in m.items() if k in properties}
        fast = 100.0 * m["intra_threads"] + m["repetition"]
        for root, value in (("results", fast), ("before/results", fast / 0.8)):
            images = m["global_batch"] * m["measured_steps"]
            record = make_record(**fields, start_time="2024-01-01T00:00:00Z",
                                 end_time="2024-01-01T00:01:00Z", throughput=value,
                                 throughput_unit="img/s", metrics={
                                     "images": {"value": images, "unit": "img"},
                                     "window_s": {"value": images / value, "unit": "s"}})
            write_record(work / root / raw_path(m), record)
    snakemake(work, "--profile", "profiles/local", "--configfile", "c.yaml", "--config",
              "regenerate_only=True", "--", "results/compare/report.md")
    table = pd.read_csv(work / "results" / "compare" / "comparison.csv")
    assert len(table) == 4 and set(table["verdict"]) == {"slower"}
    assert table["ratio"].round(6).eq(0.8).all()
    assert {p.name for p in (work / "results" / "compare").iterdir()} == set(compare_cli.FILES)
    assert "4 configurations" in (work / "logs" / "compare_results" / "compare.log").read_text()
