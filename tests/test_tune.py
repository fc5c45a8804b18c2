"""The tune experiment type (docs/tuning.md): its space, its plan-time refusals, its rounds
of placeholders, a round chosen again after a kill, and a real tuning campaign killed
mid-round that resumes without losing or repeating a trial."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import copy_workflow, default_signals, snakemake, tool_env

from archbench.core import provenance
from archbench.core.hardware import cores_of
from archbench.core.record import make_record, raw_path, read_record
from archbench.core.validate import ConfigError
from archbench.execute.supervisor import identity_fields
from archbench.execute.tune_rounds import choose_round, finish, storage
from archbench.plan.campaign import experiments_of, load_campaign
from archbench.plan.experiment_types.tune import plan_of, space_of
from archbench.plan.placeholders import choice_file, study_dir
from archbench.plan.submission import tuning_notes

LAYOUT = {"type": "tune", "models": ["small_cnn"], "image_size": 32, "num_classes": 10,
          "batch_per_process": [8, 16, 32], "inter_threads": [1, 2],
          "threads_per_process": ["cores", 1], "steps": 18, "warmup_steps": 2, "min_steps": 2,
          "budget_measurements": 5, "repetitions": 2, "timeout_minutes": 3}


def campaign(**keys) -> dict:
    return {"campaign": "tunetest", "systems": ["local"],
            "experiments": {"layout": {**LAYOUT, **keys}}}


def tune_measurements(**keys) -> list[dict]:
    return [m for m in load_campaign(campaign(**keys)).measurements if m["experiment"] == "layout"]


def test_the_space_is_every_distinct_run_that_fits_the_node():
    c = load_campaign(campaign())
    system = c.systems["local"]
    points = space_of(experiments_of(c.config)["layout"], system).points()
    runs = {(p["processes_per_node"], p["threads_per_process"], p["inter_threads"], p["batch_per_process"])
            for p in points}
    assert len(runs) == len(points)
    # `cores` and 1 are one thread count at processes = cores: that run is planned once
    cores = cores_of(system)
    assert all(p["processes_per_node"] * (cores // p["processes_per_node"] if p["threads_per_process"] == "cores"
                                          else p["threads_per_process"]) <= cores for p in points)
    assert all(p["threads_per_process"] == "cores" for p in points if p["processes_per_node"] == cores)


def test_rounds_measure_short_windows_first_and_repeat_only_the_top_rung():
    ms = tune_measurements()
    rounds = sorted({m["tune_round"] for m in ms})
    assert rounds == list(range(len(rounds))) and len(rounds) >= 2
    first = [m for m in ms if m["tune_round"] == 0]
    last = [m for m in ms if m["tune_round"] == rounds[-1]]
    assert {m["measured_steps"] for m in first} == {LAYOUT["min_steps"]}
    assert {m["repetition"] for m in first} == {0}
    assert {m["measured_steps"] for m in last} == {LAYOUT["steps"]}
    assert {m["repetition"] for m in last} == set(range(LAYOUT["repetitions"]))
    assert all(m["trial"]["top_rung"] == (m["tune_round"] == rounds[-1]) for m in ms)
    # every placeholder has its own record path
    assert len({raw_path(m) for m in ms}) == len(ms)
    # the plan's line: round 1 and node-hours beside the exhaustive sweep's
    line, = tuning_notes(ms)
    assert f"round 1 measures {len(first)} trials over {LAYOUT['min_steps']} steps" in line
    assert f"{len(ms)} measurements" in line and "exhaustive sweep" in line


def test_the_budget_caps_the_plan():
    c = load_campaign(campaign())
    experiment, system = experiments_of(c.config)["layout"], c.systems["local"]
    for budget in (3, 5, 9):
        plan = plan_of({**experiment, "budget_measurements": budget}, system)
        assert plan.node_hours() <= budget * plan.node_hours_each + 1e-9
        assert plan.node_hours() < plan.exhaustive_node_hours()
    small = plan_of({**experiment, "budget_measurements": 3}, system)
    big = plan_of({**experiment, "budget_measurements": 9}, system)
    assert sum(r.measurements for r in big.rounds) > sum(r.measurements for r in small.rounds)


@pytest.mark.parametrize("keys, message", [
    ({"precision": ["fp32", "fp16"]}, r"experiments\.layout\.precision: fp16 is in no configuration.*no precision 'fp16' on cpu"),
    ({"batch_per_process": [8], "inter_threads": [1], "threads_per_process": ["cores"],
      "processes": [1]}, r"experiments\.layout\.processes: the space has one configuration"),
    ({"budget_measurements": 100}, r"experiments\.layout\.budget_measurements: 100 is at or above the exhaustive sweep's"),
    ({"budget_measurements": 0}, r"experiments\.layout\.budget_measurements: 0 is less than or equal to the minimum"),
    ({"budget_measurements": 0.5}, r"experiments\.layout\.budget_measurements: 0.5 buys less than one trial"),
    ({"threads_per_process": [64]}, r"experiments\.layout\.threads_per_process: 64 is in no configuration"),
    ({"data": ["synthetic", "real"]}, r"experiments\.layout\.data: a tune experiment searches with one data source"),
    ({"min_steps": 40}, r"experiments\.layout\.min_steps: 40 > steps 18"),
])
def test_a_bad_space_or_budget_is_refused_in_one_line_at_plan_time(keys, message):
    with pytest.raises(ConfigError, match=message) as caught:
        load_campaign(campaign(**keys))
    assert "\n" not in str(caught.value)


def test_both_budgets_are_one_key(tmp_path):
    with pytest.raises(ConfigError, match=r"experiments\.layout"):
        load_campaign(campaign(budget_node_hours=1))
    keys = dict(LAYOUT)
    del keys["budget_measurements"]
    with pytest.raises(ConfigError, match=r"experiments\.layout"):
        load_campaign({"campaign": "t", "systems": ["local"], "experiments": {"layout": keys}})


def test_a_declared_axis_is_a_dimension_of_the_space(monkeypatch):
    """A Setting with ``axis`` (one declaration) is searched by the tuner: its values
    multiply the space, and a point's value reaches the measurement it resolves to."""
    from archbench.execute.tune_rounds import resolved
    from archbench.plan.campaign import experiment_schema
    from archbench.workloads.training import settings
    from archbench.workloads.training.settings import planned_argv

    knob = settings.Setting(name="throwaway_mode", default="plain", choices=("plain", "fancy"),
                            help="a throwaway mode", planned="tuning.throwaway_mode",
                            identity=True, axis="throwaway_modes")
    monkeypatch.setattr(settings, "SETTINGS", (*settings.SETTINGS, knob))
    experiment_schema.cache_clear()
    try:
        c = load_campaign(campaign(throwaway_modes=["plain", "fancy"]))
        plain = load_campaign(campaign())
        system = c.systems["local"]
        both = space_of(experiments_of(c.config)["layout"], system).points()
        one = space_of(experiments_of(plain.config)["layout"], system).points()
        assert len(both) == 2 * len(one)
        fancy = next(p for p in both if p["tuning.throwaway_mode"] == "fancy")
        placeholder = next(m for m in c.measurements if m["experiment"] == "layout")
        run = resolved(placeholder, fancy, 7, system=system)
        argv = planned_argv(run)
        assert argv[argv.index("--throwaway-mode") + 1] == "fancy"
        assert run["trial"]["number"] == 7 and "tune_round" not in run
    finally:
        experiment_schema.cache_clear()


def write_records(placeholders: list[dict], chosen: dict, results: Path, value) -> None:
    """A valid ok record for each placeholder, its img/s ``value(run)`` of what it runs."""
    host = provenance.host_fields()
    for m in placeholders:
        run = chosen[raw_path(m)]
        record = make_record(**{**host, **identity_fields(run, Path("worker.log")),
                                "env": host["env"], "start_time": "2024-01-01T00:00:00Z",
                                "end_time": "2024-01-01T00:00:30Z", "status": "ok", "reason": "",
                                "throughput": value(run), "throughput_unit": "img/s"})
        path = results / raw_path(m)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))


def test_a_round_chosen_again_after_a_kill_is_the_same_and_no_trial_is_repeated(tmp_path):
    c = load_campaign(campaign())
    experiment, system = experiments_of(c.config)["layout"], c.systems["local"]
    ms = [m for m in c.measurements if m["experiment"] == "layout"]
    rounds = sorted({m["tune_round"] for m in ms})
    results = tmp_path / "results"

    def value(run):  # a surface with one best layout: more threads per process, bigger batch
        return 100.0 * run["intra_threads"] * (1 + run["batch_per_process"] / 64) / run["inter_threads"] ** 0.1

    files = []
    for r in rounds:
        these = [m for m in ms if m["tune_round"] == r]
        before = [m for m in ms if m["tune_round"] == r - 1]
        chosen = choose_round(these, before, experiment=experiment, system=system, results=results)
        # killed before the file was written: asked again, the same trials come back
        again = choose_round(these, before, experiment=experiment, system=system, results=results)
        assert again == chosen
        file = choice_file(results, these[0])
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(chosen))
        files.append(chosen)
        assert all("error" not in e for e in chosen.values()), chosen
        # each run is a real configuration, its trial numbered, its id and path the planned ones
        for m in these:
            run = chosen[raw_path(m)]
            assert run["config_id"] == m["config_id"] and run["measured_steps"] == m["measured_steps"]
            assert run["processes_per_node"] * run["intra_threads"] <= cores_of(system)
        write_records(these, chosen, results, value)
    import optuna
    study = optuna.load_study(study_name="tune", storage=storage(study_dir(results, ms[0])))
    measured = [t for t in study.trials if "point" in t.user_attrs]
    # no point asked twice, and every trial ended (complete, pruned or failed): none is lost
    assert len({t.user_attrs["point"] for t in measured}) == len(measured)
    first = {e["trial"]["number"] for e in files[0].values()}
    assert {t.number for t in measured} == first
    # later rounds measure trials of the first round: promoted, not asked anew
    for chosen in files[1:]:
        assert {e["trial"]["number"] for e in chosen.values()} <= first
    # after the last round (rule tune_best) every trial has ended, twice told or not, and
    # the best is the top rung's best mean
    every = [[m for m in ms if m["tune_round"] == r] for r in rounds]
    found = finish(every, experiment=experiment, system=system, results=results)
    assert finish(every, experiment=experiment, system=system, results=results) == found
    assert "running" not in found["trials"] and sum(found["trials"].values()) == len(first)
    top = [e for f in files for e in f.values() if e["trial"]["top_rung"]]
    assert found["best"]["img_s"] == pytest.approx(max(value(e) for e in top))
    assert found["best"]["trial"] in {e["trial"]["number"] for e in top}


# ------------------------------------------------------------ a real tuning campaign, killed

# reports medians: the study's values and its best are the campaign's statistic
KILLED = {"campaign": "tunekill", "systems": ["local"], "statistic": "median", "experiments": {"layout": {
    "type": "tune", "models": ["small_cnn"], "image_size": 16, "num_classes": 10,
    "batch_per_process": [8, 16], "processes": [1, 2], "steps": 6, "warmup_steps": 1,
    "min_steps": 2, "budget_measurements": 2, "repetitions": 1, "timeout_minutes": 3}}}


def records_in(workdir: Path) -> list[dict]:
    return [read_record(p) for p in sorted((workdir / "results/raw").rglob("rep*.json"))]


@pytest.mark.workflow
def test_a_tuning_campaign_killed_mid_round_resumes_without_losing_or_repeating_a_trial(tmp_path):
    workdir = copy_workflow(tmp_path / "w")
    (workdir / "tune.yaml").write_text(yaml.safe_dump(KILLED))
    command = [sys.executable, "-m", "snakemake", "--profile", "profiles/local", "--configfile",
               "tune.yaml", "--cores", "2"]
    proc = subprocess.Popen(command, cwd=workdir, env=tool_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=default_signals)
    try:  # kill the whole run once round 1 has one record and measures the next
        deadline = time.monotonic() + 400
        while len(records_in(workdir)) < 1 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        time.sleep(2)
        assert proc.poll() is None, "the campaign ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    before = records_in(workdir)
    assert before and all(r["trial"]["round"] == 1 for r in before)
    round1 = sorted(workdir.glob("results/tune/local/layout/*/round1.json"))
    chosen1 = round1[0].read_text()
    snakemake(workdir, "--unlock", "--configfile", "tune.yaml", timeout=120)
    snakemake(workdir, "--profile", "profiles/local", "--configfile", "tune.yaml", "--cores", "2",
              timeout=900)
    after = records_in(workdir)
    planned = [m for m in load_campaign(KILLED).measurements]
    assert len(after) == len(planned)  # one record per planned measurement, none twice
    assert round1[0].read_text() == chosen1  # the round's trials were not asked again
    for r in before:  # a finished measurement is kept as it was
        assert any(a["run_id"] == r["run_id"] and a["end_time"] == r["end_time"] for a in after)
    assert all(r["status"] == "ok" and r["experiment_type"] == "tune" for r in after), after
    keys = [(r["trial"]["number"], r["trial"]["rung"], r["repetition"]) for r in after]
    assert len(set(keys)) == len(keys)
    first = {r["trial"]["number"] for r in after if r["trial"]["round"] == 1}
    assert len(first) == sum(1 for r in after if r["trial"]["round"] == 1)  # distinct trials
    assert {r["trial"]["number"] for r in after if r["trial"]["round"] > 1} <= first
    assert all(r["measured_steps"] == (6 if r["trial"]["top_rung"] else 2) for r in after)
    # the study ended every trial; the tuning table names the best configuration found
    found = json.loads(next(workdir.glob("results/tune/local/layout/*/best.json")).read_text())
    assert "running" not in found["trials"] and sum(found["trials"].values()) == len(first)
    top = [r for r in after if r["trial"]["top_rung"]]
    assert found["best"]["img_s"] == pytest.approx(max(r["throughput"] for r in top))
    assert found["best"]["statistic"] == "median"
    table = pd.read_csv(workdir / "results/tables/tuning.csv")
    assert len(table) == 1 and (table["experiment"][0], table["system"][0]) == ("layout", "local")
    assert table["statistic"][0] == "median"
    assert table["img_s"][0] == pytest.approx(found["best"]["img_s"])


@pytest.mark.parametrize("study", ["osu-2019", "bsc-2019", "cesga-2018"])
def test_each_studys_commented_tuning_example_plans_what_its_comment_says(study):
    """Uncommented, a study campaign's tune example is accepted and plans the rounds,
    measurements and node-hours its comment states."""
    import re
    text = (Path(__file__).parents[1] / "config/campaigns" / f"{study}.yaml").read_text()
    block = re.search(r"\n  # (tune-[a-z0-9-]+):\n((?:  #   .*\n)+)", text)
    uncommented = f"\n  {block[1]}:\n" + "".join("  " + line[4:] + "\n" for line in block[2].splitlines())
    c = load_campaign(yaml.safe_load(text.replace(block[0], uncommented)))
    line, = tuning_notes([m for m in c.measurements if m["experiment"] == block[1]])
    plan = (r"(\d+) rounds, round 1 measures (\d+) trials over (\d+) steps; (\d+) "
            r"measurements, ([\d.]+) node-hours against ([\d.]+)")
    stated = re.search(plan, re.sub(r"\s*\n\s*#\s*", " ", text))
    assert stated.groups() == re.search(plan, line).groups(), line


@pytest.mark.workflow
def test_a_tuning_campaign_dry_runs_on_the_slurm_profile_showing_round_1_and_its_budget(tmp_path):
    """The shipped tuning campaign plans on the Slurm profile: one run_measurement job per
    placeholder, one local tune_round job per round, and the plan line with round 1 and
    the node-hours beside the exhaustive sweep's; nothing is written."""
    workdir = copy_workflow(tmp_path / "w")
    campaign = workdir / "config/campaigns/tuning.yaml"
    proc = snakemake(workdir, "-n", "--profile", "profiles/slurm", "--configfile", str(campaign),
                     "--quiet", "rules")
    counts = dict(line.split()[:2] for line in proc.stdout.splitlines()
                  if len(line.split()) == 2 and line.split()[1].isdigit())
    ms = load_campaign(yaml.safe_load(campaign.read_text())).measurements
    tune = [m for m in ms if m["experiment"] == "tune-resnet50"]
    assert int(counts["run_measurement"]) == len(ms)
    assert int(counts["tune_round"]) == len({m["tune_round"] for m in tune})
    line, = tuning_notes(tune)
    assert f"**Tuning:** {line}" in proc.stderr
    assert "round 1 measures" in line and "for the exhaustive sweep" in line
    assert not (workdir / "results").exists()


def test_planning_a_campaign_needs_no_optuna():
    """Images install archbench without the tuner's engine: loading a campaign (a tune
    experiment included) must not import Optuna; only a tuning round does."""
    code = ("import sys; from archbench.plan.campaign import load_campaign_file; "
            "load_campaign_file('config/campaigns/tuning.yaml'); print('optuna' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parents[1])
    assert out.stdout.strip() == "False"
