"""The tuning table and figure (docs/metrics.md, "Tuning") against the fabricated truth.

Every expected number is computed here from ``tests/fabricated.py``: the tuner's
schedule (``TUNE_SCHEDULE``), the failed trials, and ``true_throughput`` of the tuner's
and the hybrid sweep's configurations (their runs' repetition factors average exactly 1).
"""

from __future__ import annotations

import datetime as dt
import math
import statistics

import fabricated as fab
import pandas as pd
import pytest
from matplotlib.figure import Figure
from scipy import stats

from archbench.results.artifacts import make_figure_files, make_table_files, to_csv
from archbench.results.collect import flatten, records_to_frame
from archbench.results.figures import NO_DATA, build_figure
from archbench.results.figures.tuning import progress
from archbench.results.tables import build_table
from archbench.results.tables.common import normalise
from archbench.results.tables.tuning import studies, tune_runs

REPS = 2  # repetitions of the fabricated sweeps


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return list(fab.fabricate_records(repetitions=REPS, systems=("sysa",), threads=(1,),
                                      batches=(16,)))


def frame_of(records: list[dict]) -> pd.DataFrame:
    return records_to_frame(records)


def hours(record: dict) -> float:
    parse = (lambda t: dt.datetime.fromisoformat(t.replace("Z", "+00:00")))
    return record["nodes"] * (parse(record["end_time"]) - parse(record["start_time"])).total_seconds() / 3600


def tune_of(records: list[dict]) -> list[dict]:
    return [r for r in records if r["experiment_type"] == "tune"]


def sweep_of(records: list[dict]) -> list[dict]:
    return [r for r in records if r["experiment"] == fab.TUNE_SWEEP and r["model"] == fab.TUNE_MODEL]


def top_points() -> list[int]:
    """The points the schedule measures at the top rung with an ok run."""
    return sorted({point for number, _, rung, point, *_ in fab.TUNE_SCHEDULE
                   if rung == fab.TUNE_TOP_RUNG and number not in fab.TUNE_FAILED_TRIALS})


def truth(point: int) -> float:
    return fab.true_throughput(fab.tune_configuration("sysa", point))


def sweep_truth() -> dict[tuple[int, int], float]:
    """The true img/s of each configuration of the hybrid sweep of ResNet-50 on sysa."""
    return {(c["processes_per_node"], c["intra_threads"]): fab.true_throughput(c)
            for c in fab.configurations(systems=("sysa",), threads=(1,), batches=(16,))
            if c["experiment"] == fab.TUNE_SWEEP and c["model"] == fab.TUNE_MODEL}


def one_row(table: pd.DataFrame) -> pd.Series:
    assert len(table) == 1, table
    return table.iloc[0]


# ------------------------------------------------------------------ the tidy table
def test_the_trial_and_node_hours_are_tidy_columns(records):
    tune = tune_of(records)[0]
    row = flatten(tune)
    for key, value in tune["trial"].items():
        assert row[f"trial_{key}"] == value
    assert "trial" not in row
    assert row["node_hours"] == pytest.approx(hours(tune))
    other = flatten(sweep_of(records)[0])
    assert all(other[f"trial_{k}"] is None for k in tune["trial"])
    assert other["node_hours"] == pytest.approx(1 / 60)  # the fabricated one minute on 1 node
    frame = frame_of(records)
    assert str(frame["trial_number"].dtype) == "Int64"


# ------------------------------------------------------------------ the table
def test_best_configuration_its_interval_and_cost(records):
    row = one_row(build_table("tuning", frame_of(records)))
    best = max(top_points(), key=truth)
    ppn, threads = fab.TUNE_SPACE[best]
    assert (row["best_processes_per_node"], row["best_intra_threads"]) == (ppn, threads)
    assert row["best_batch_per_process"] == fab.TUNE_BATCH
    top_reps = [reps for number, _, rung, point, reps, *_ in fab.TUNE_SCHEDULE
                if rung == fab.TUNE_TOP_RUNG and point == best]
    assert row["n"] == sum(top_reps)
    assert row["img_s"] == pytest.approx(truth(best))
    values = [truth(best) * f for f in fab.NOISE[top_reps[0]]]
    half = stats.t.ppf(0.975, len(values) - 1) * pd.Series(values).std() / math.sqrt(len(values))
    assert row["img_s_ci95_low"] == pytest.approx(truth(best) - half)
    assert row["img_s_ci95_high"] == pytest.approx(truth(best) + half)
    tune = tune_of(records)
    assert row["trials"] == len({n for n, *_ in fab.TUNE_SCHEDULE})
    assert row["failed_trials"] == len(fab.TUNE_FAILED_TRIALS)
    assert row["measurements"] == len(tune) == sum(s[4] for s in fab.TUNE_SCHEDULE)
    assert row["node_hours"] == pytest.approx(sum(s[4] * s[6] for s in fab.TUNE_SCHEDULE) / 3600)
    assert row["budget_node_hours"] == fab.TUNE_PLAN["budget_node_hours"]
    assert row["exhaustive_node_hours"] == fab.TUNE_PLAN["exhaustive_node_hours"]
    assert row["tuned"] == "processes_per_node, intra_threads"
    assert row["status"] == "ok"


def test_the_campaigns_statistic_chooses_the_best(records):
    """One outlier run among the second-best configuration's top-rung runs: their mean
    makes it the best, their median does not; the median has no interval."""
    best, second = sorted(top_points(), key=truth, reverse=True)[:2]

    def top_runs(point: int) -> list[dict]:
        return [r for r in tune_of(records) if r["trial"]["top_rung"] and r["status"] == "ok"
                and (r["processes_per_node"], r["intra_threads"]) == fab.TUNE_SPACE[point]]
    run = top_runs(second)[0]
    outlier = {**run, "repetition": 9, "run_id": run["run_id"].replace("_rep0", "_rep9"),
               "throughput": 3 * max(r["throughput"] for r in top_runs(second))}
    frame = frame_of([*records, outlier])
    by_mean = one_row(build_table("tuning", frame, statistic="mean"))
    by_median = one_row(build_table("tuning", frame, statistic="median"))
    assert (by_mean["best_processes_per_node"], by_mean["best_intra_threads"]) == fab.TUNE_SPACE[second]
    assert (by_median["best_processes_per_node"], by_median["best_intra_threads"]) == fab.TUNE_SPACE[best]
    assert (by_mean["statistic"], by_median["statistic"]) == ("mean", "median")
    assert by_median["img_s"] == pytest.approx(statistics.median(r["throughput"] for r in top_runs(best)))
    assert not pd.isna(by_mean["img_s_ci95_low"]) and pd.isna(by_median["img_s_ci95_low"])
    # the figure's best so far ends at the table's value, by either statistic
    (_, trials, _), = studies(tune_runs(normalise(frame)))
    assert progress(trials, "mean")["best_so_far"].iloc[-1] == pytest.approx(by_mean["img_s"])
    assert progress(trials, "median")["best_so_far"].iloc[-1] == pytest.approx(by_median["img_s"])


def test_a_configuration_with_a_failed_top_rung_run_is_never_the_best(records):
    """The finding: the best's ok runs alone made it the best though one of its runs had
    failed (out of memory beside the best layout). Now a configuration with a failed run
    at the top rung loses to one whose runs all succeeded; ``runs`` counts them with n."""
    best, second = sorted(top_points(), key=truth, reverse=True)[:2]
    run = next(r for r in tune_of(records) if r["trial"]["top_rung"] and r["status"] == "ok"
               and (r["processes_per_node"], r["intra_threads"]) == fab.TUNE_SPACE[best])
    failed = {**run, "repetition": 9, "run_id": run["run_id"].replace("_rep0", "_rep9"),
              "status": "failed", "reason": "out of memory", "throughput": None}
    clean = one_row(build_table("tuning", frame_of(records)))
    assert clean["runs"] == clean["n"]
    row = one_row(build_table("tuning", frame_of([*records, failed])))
    assert (row["best_processes_per_node"], row["best_intra_threads"]) == fab.TUNE_SPACE[second]
    assert row["runs"] == row["n"] and row["status"] == "ok"
    (_, trials, _), = studies(tune_runs(normalise(frame_of([*records, failed]))))
    assert progress(trials, "mean")["best_so_far"].iloc[-1] == pytest.approx(row["img_s"])
    # every top-rung configuration with a failed run: the best of them, and the status says so
    tops = [r for r in tune_of(records) if r["trial"]["top_rung"] and r["status"] == "ok"]
    fails = [{**r, "repetition": 9, "run_id": r["run_id"].replace("_rep0", "_rep9"), "status": "failed",
              "reason": "out of memory", "throughput": None} for r in tops if r["repetition"] == 0]
    row = one_row(build_table("tuning", frame_of([*records, *fails])))
    assert row["runs"] == row["n"] + 1
    assert row["status"] == "every top-rung configuration had a failed run (the best: 1)"


def test_lower_rungs_never_give_the_best(records):
    # the top rung's runs only: without them the study has no best, though rung 0 ran ok
    lower = [r for r in records if not (r.get("trial") and r["trial"]["top_rung"])]
    row = one_row(build_table("tuning", frame_of(lower)))
    assert row["status"] == "no top-rung measurement"
    assert pd.isna(row["img_s"]) and row["trials"] == len({n for n, *_ in fab.TUNE_SCHEDULE})
    assert fab.LOW_RUNG_BIAS != 1  # (rung 0 reads high: pooled with it, img_s would differ)


def test_regret_and_cost_ratio_against_the_sweep(records):
    row = one_row(build_table("tuning", frame_of(records)))
    sweep = sweep_truth()
    (best_ppn, best_threads), best = max(sweep.items(), key=lambda kv: kv[1])
    chosen = fab.TUNE_SPACE[max(top_points(), key=truth)]
    assert row["sweep"] == fab.TUNE_SWEEP
    assert row["sweep_configurations"] == len(sweep)
    assert row["sweep_best_img_s"] == pytest.approx(best)
    assert (row["sweep_best_processes_per_node"], row["sweep_best_intra_threads"]) == (best_ppn, best_threads)
    assert row["found_from"] == "sweep"
    assert row["found_img_s"] == pytest.approx(sweep[chosen])
    assert row["regret"] == pytest.approx(1 - sweep[chosen] / best)
    assert row["regret"] > 0  # the failed trial was the sweep's best: the tuner missed it
    spent = sum(hours(r) for r in sweep_of(records))
    assert row["sweep_node_hours"] == pytest.approx(spent)
    assert row["cost_ratio"] == pytest.approx(sum(hours(r) for r in tune_of(records)) / spent)


def test_found_is_the_tuners_value_when_the_sweep_lacks_its_choice(records):
    chosen = fab.TUNE_SPACE[max(top_points(), key=truth)]
    kept = [r for r in records if not (r["experiment"] == fab.TUNE_SWEEP and
                                       (r["processes_per_node"], r["intra_threads"]) == chosen)]
    row = one_row(build_table("tuning", frame_of(kept)))
    rest = {k: v for k, v in sweep_truth().items() if k != chosen}
    assert row["found_from"] == "tuner"
    assert row["found_img_s"] == pytest.approx(row["img_s"])
    assert row["regret"] == pytest.approx(1 - row["img_s"] / max(rest.values()))


def test_a_study_whose_trials_all_failed_keeps_its_row(records):
    failed = [{**r, "status": "failed", "throughput": None, "throughput_unit": "",
               "reason": "test failed"} if r["experiment_type"] == "tune" else r for r in records]
    row = one_row(build_table("tuning", frame_of(failed)))
    assert row["status"] == f"all {row['trials']} trials failed"
    assert row["failed_trials"] == row["trials"] == len({n for n, *_ in fab.TUNE_SCHEDULE})
    assert pd.isna(row["img_s"]) and pd.isna(row["best_processes_per_node"])
    assert pd.isna(row["regret"]) and pd.isna(row["cost_ratio"])
    assert row["node_hours"] == pytest.approx(sum(hours(r) for r in tune_of(records)))


def test_no_sweep_no_regret(records):
    unnamed = [{**r, "trial": {**r["trial"], "sweep": None}} if r.get("trial") else r for r in records]
    row = one_row(build_table("tuning", frame_of(unnamed)))
    assert row["status"] == "ok" and not pd.isna(row["img_s"])
    assert pd.isna(row["sweep"]) and pd.isna(row["sweep_best_img_s"])
    assert pd.isna(row["regret"]) and pd.isna(row["cost_ratio"]) and pd.isna(row["found_img_s"])
    # a sweep named but not in the data: named, nothing compared
    absent = one_row(build_table("tuning", frame_of([r for r in records if r not in sweep_of(records)])))
    assert absent["sweep"] == fab.TUNE_SWEEP and absent["sweep_configurations"] == 0
    assert pd.isna(absent["regret"]) and pd.isna(absent["sweep_best_img_s"])


def test_numerics_a_study_each_or_tuned(records):
    tune = tune_of(records)
    bf16 = [{**r, "precision": "bf16", "config_id": r["config_id"] + "_bf16",
             "run_id": r["run_id"] + "_bf16"} for r in tune]
    table = build_table("tuning", frame_of(records + bf16))  # trial 0 ran in both: two studies
    assert sorted(table["precision"]) == ["bf16", "fp32"]
    assert all("precision" not in t for t in table["tuned"])
    # one study over the precision: each trial ran one
    tuned = [{**r, "precision": "bf16", "config_id": r["config_id"] + "_bf16",
              "run_id": r["run_id"] + "_bf16"} if r.get("trial") and r["trial"]["number"] == 0 else r
             for r in records]
    row = one_row(build_table("tuning", frame_of(tuned)))
    assert "precision" in row["tuned"]
    assert row["precision"] in ("fp32", "bf16")


def test_the_table_from_its_csv_is_the_same(records, tmp_path):
    direct = build_table("tuning", frame_of(records))
    csv = tmp_path / "measurements.csv"
    csv.write_text(to_csv(frame_of(records)))
    outputs = {"csv": str(tmp_path / "tuning.csv")}
    written = make_table_files("tuning", csv, outputs=outputs)
    pd.testing.assert_frame_equal(written, direct)


# ------------------------------------------------------------------ the figure
def texts(figure: Figure) -> list[str]:
    return [t.get_text() for t in figure.findobj(lambda a: hasattr(a, "get_text"))
            if isinstance(t.get_text(), str)]


def test_the_figure_draws_each_study_once_with_its_sweep(records):
    both = records + list(fab.fabricate_tune_records(("sysb",)))
    sysb = sweep_of(list(fab.fabricate_records(repetitions=REPS, systems=("sysb",), threads=(1,),
                                               batches=(16,))))
    data = frame_of(both + sysb)
    table = build_table("tuning", data)
    figure = build_figure("tuning", data)
    panels = [ax for ax in figure.axes if ax.get_visible() and ax.get_title()]
    assert len(panels) == len(table) == 2
    assert len({ax.get_title() for ax in panels}) == 2
    for ax in panels:
        row = table[table["system"].map(lambda s, ax=ax: ax.get_title().startswith(f"tune, {s},"))]
        row = one_row(row)
        best = [ln for ln in ax.get_lines() if ln.get_label().startswith("best so far")]
        assert len(best) == 1 and best[0].get_ydata()[-1] == pytest.approx(row["img_s"])
        sweep = [ln for ln in ax.get_lines() if ln.get_label().startswith("best of the sweep")]
        assert len(sweep) == 1 and sweep[0].get_ydata()[0] == pytest.approx(row["sweep_best_img_s"])
        xs = best[0].get_xdata()
        assert xs[-1] == pytest.approx(row["node_hours"])  # every run spent, in start order
        labels = [ln.get_label() for ln in ax.get_lines() if not ln.get_label().startswith("_")]
        assert len(labels) == len(set(labels))
    assert NO_DATA not in texts(figure)


def test_the_figure_without_tuning_data_says_so(records):
    for data in (pd.DataFrame(), frame_of([r for r in records if r["experiment_type"] != "tune"])):
        assert NO_DATA in texts(build_figure("tuning", data))


def test_the_figure_file_is_drawn_from_the_runs(records, tmp_path):
    csv = tmp_path / "measurements.csv"
    csv.write_text(to_csv(frame_of(records)))
    out = tmp_path / "tuning.png"
    make_figure_files("tuning", csv, [str(out)])
    assert out.read_bytes().startswith(b"\x89PNG")
    assert NO_DATA not in texts(build_figure("tuning", frame_of(records)))
