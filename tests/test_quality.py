"""The quality gate: the ``quality`` experiment type plans time-to-accuracy runs on the
real digits per framework x precision x math mode x graph; the workers of both frameworks
really train digits_cnn to a validation accuracy (or record that they did not); the
``time_to_accuracy`` table and figure read those records."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from test_experiments import expand

from archbench.core.record import read_record
from archbench.plan.campaign import ConfigError
from archbench.results import tables
from archbench.results.collect import flatten
from archbench.results.figures import FIGURES, build_figure
from archbench.workloads import sense
from archbench.workloads.training.benchmark import worker_argv
from archbench.workloads.training.outcome import check_quality
from archbench.workloads.training.settings import TrainRun

DIGITS = ["--model", "digits_cnn", "--batch-per-process", "32", "--data", "real",
          "--intra-threads", "1"]


def test_quality_plans_each_numerics_configuration_on_the_real_digits():
    ms = expand({"type": "quality", "framework": ["tensorflow", "pytorch"],
                 "precision": ["fp32", "bf16"], "graph": ["eager", "compiled"],
                 "target_accuracy": 0.9, "max_steps": 400, "eval_every": 20})
    assert len(ms) == 2 * 2 * 2 and len({m["config_id"] for m in ms}) == 8
    assert {(m["framework"], m.get("precision", "fp32"), m.get("graph", "eager")) for m in ms} == {
        (f, p, g) for f in ("tensorflow", "pytorch") for p in ("fp32", "bf16") for g in ("eager", "compiled")}
    for m in ms:
        # the campaign's steps and warm-up (3 and 1 in expand's defaults) do not apply
        assert (m["model"], m["data"], m["warmup_steps"], m["measured_steps"]) == ("digits_cnn", "real", 0, 400)
        assert m["tuning"] == {"target_accuracy": 0.9, "eval_every": 20}
        argv = worker_argv(m, {"arch": "x86_64"})
        assert argv[argv.index("--target-accuracy") + 1] == "0.9"
        assert argv[argv.index("--eval-every") + 1] == "20"
    (default,) = expand({"type": "quality"})
    assert (default["batch_per_process"], default["measured_steps"]) == (32, 1000)
    assert default["tuning"] == {"target_accuracy": 0.95, "eval_every": 25}


@pytest.mark.parametrize("experiment, key", [
    ({"models": ["resnet50"]}, "models"),
    ({"data": ["synthetic"]}, "data"),
    ({"target_accuracy": 1.5}, "target_accuracy"),
])
def test_quality_refuses_what_it_cannot_time(experiment, key):
    with pytest.raises(ConfigError, match=key):
        expand({"type": "quality", **experiment})


def test_a_target_needs_the_real_digits_in_one_process():
    base = dict(model="digits_cnn", batch_per_process=32, output="x", target_accuracy=0.9)
    check_quality(TrainRun(**base, data="real"), "digits")
    with pytest.raises(ValueError, match="--data real"):
        check_quality(TrainRun(**base), "digits")
    with pytest.raises(ValueError, match="--strategy single"):
        check_quality(TrainRun(**base, data="real", strategy="horovod"), "digits")


def train(out, framework: str, *extra: str) -> dict:
    argv = [sys.executable, "-m", "archbench.train", "--framework", framework, *DIGITS, *extra,
            "--output", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-2000:]
    return read_record(out)


def evaluations(record: dict) -> list[tuple[int, float]]:
    text = record["metrics"]["evaluations"]["value"]
    return [(int(step), float(acc)) for step, acc in (pair.split(":") for pair in text.split())]


@pytest.fixture(scope="module")
def quality_records(tmp_path_factory) -> list[dict]:
    """Real runs: each framework to 0.9 (reached within 600 steps), and one run whose
    target of 0.99 is out of reach in 20 steps."""
    tmp = tmp_path_factory.mktemp("quality")
    out = []
    for framework in ("tensorflow", "pytorch"):
        out.append(train(tmp / f"{framework}.json", framework, "--target-accuracy", "0.9",
                         "--steps", "600", "--eval-every", "25"))
    out.append(train(tmp / "short.json", "pytorch", "--target-accuracy", "0.99", "--steps", "20",
                     "--eval-every", "10", "--precision", "bf16"))
    return out


def test_both_frameworks_train_the_digits_to_the_target(quality_records):
    for r in quality_records[:2]:
        sense.check(r)  # a clock, not a window: no step times, images or window_s to disagree
        m = {k: v["value"] for k, v in r["metrics"].items()}
        assert (r["status"], m["accuracy_reached"], m["target_accuracy"]) == ("ok", 1, 0.9), r["framework"]
        steps = evaluations(r)
        # evaluated every 25 steps; stopped at the first evaluation at or above the target
        assert [s for s, _ in steps] == list(range(25, 25 * len(steps) + 1, 25))
        assert steps[-1][1] >= 0.9 and all(acc < 0.9 for _, acc in steps[:-1])
        assert m["steps_to_accuracy"] == m["quality_steps"] == steps[-1][0] == len(r["losses"])
        assert m["steps_to_accuracy"] < 600 and r["measured_steps"] == 600
        assert m["time_to_accuracy_s"] == m["quality_s"] > 0
        assert r["throughput"] == pytest.approx(32 * m["steps_to_accuracy"] / m["time_to_accuracy_s"])
        assert "window_s" not in m and r["step_times_s"] == []
        assert m["accuracy"] >= 0.9  # the final weights, evaluated again after the clock


def test_a_run_that_misses_the_target_is_a_record_that_says_so(quality_records):
    r = quality_records[2]
    sense.check(r)
    m = {k: v["value"] for k, v in r["metrics"].items()}
    assert (r["status"], r["precision"], m["accuracy_reached"]) == ("ok", "bf16", 0)
    assert "steps_to_accuracy" not in m and "time_to_accuracy_s" not in m
    assert m["quality_steps"] == 20 == len(r["losses"]) and [s for s, _ in evaluations(r)] == [10, 20]


def test_the_time_to_accuracy_table_and_figure_read_the_records(quality_records):
    rows = []
    for r in quality_records:
        rows.append(flatten({**r, "experiment": "q", "experiment_type": "quality",
                             "run_id": f"{r['config_id']}/rep0"}))
    df = pd.DataFrame(rows)
    table = tables.build_table("time_to_accuracy", df)
    assert len(table) == 3 and set(table["status"]) == {"ok"}
    by = table.set_index(["framework", "precision"])
    for framework, record in zip(("tensorflow", "pytorch"), quality_records):
        row = by.loc[(framework, "fp32")]
        assert (row["reached"], row["n"], row["n_reached"], row["target_accuracy"]) == ("yes", 1, 1, 0.9)
        assert row["steps_to_accuracy"] == record["metrics"]["steps_to_accuracy"]["value"]
        assert row["time_to_accuracy_s"] == pytest.approx(record["metrics"]["time_to_accuracy_s"]["value"])
    missed = by.loc[("pytorch", "bf16")]
    assert (missed["reached"], missed["n_reached"]) == ("no", 0) and pd.isna(missed["time_to_accuracy_s"])
    # other experiments' records are not in it
    other = df.assign(experiment_type="batch_sweep")
    assert tables.build_table("time_to_accuracy", other).empty
    figure = build_figure("time_to_accuracy", df)
    texts = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert any("not reached" in t for t in texts)
    assert any(f"{int(by.loc[('pytorch', 'fp32')]['steps_to_accuracy'])} steps" in t for t in texts)
    assert "time_to_accuracy" in FIGURES and FIGURES["time_to_accuracy"].table == "time_to_accuracy"
    json.dumps(table.astype(object).where(table.notna(), None).to_dict("records"))  # writable as is


def test_a_planned_quality_run_is_supervised_into_an_ok_record(tmp_path):
    """Through the supervisor: the record agrees with its plan (steps, warm-up, data, the
    numerics) and makes sense, reached or not."""
    from test_run import SYSTEM as LOCAL
    from test_run import supervise

    from archbench.plan.campaign import load_campaign
    config = {"campaign": "t", "systems": ["local"],
              "system_definitions": {"local": {k: v for k, v in LOCAL.items() if k != "name"}},
              "defaults": {"steps": 5, "warmup_steps": 2},  # not a quality run's
              "experiments": {"q": {"type": "quality", "framework": ["pytorch"], "threads": [1],
                                    "repetitions": 1, "target_accuracy": 0.9, "max_steps": 400,
                                    "precision": ["bf16"]}}}
    (m,) = load_campaign(config).measurements
    r = supervise(tmp_path, m)
    assert (r["status"], r["reason"], r["experiment_type"], r["precision"]) == ("ok", "", "quality", "bf16")
    assert (r["measured_steps"], r["warmup_steps"], r["data"]) == (400, 0, "real")
    assert r["metrics"]["accuracy_reached"]["value"] == 1
    assert r["metrics"]["steps_to_accuracy"]["value"] <= 400
