"""The tuner engine (archbench/plan/tuner.py): plans within budget, rounds of successive
halving, idempotent asks and tells, no point measured twice, a study resumed from its
journal file after a kill between rounds; and the replay benchmark's oracle pieces
(scripts/bench_tuner.py)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from archbench.plan.tuner import StudyMismatch, Tuner
from archbench.plan.tuning_plan import Space, plan_rounds, rounds_cost, unit_cost

REPO = Path(__file__).resolve().parents[1]
SPACE = Space({"processes_per_node": (1, 2, 4, 8), "intra_threads": (1, 2, 4, 8, 16),
               "inter_threads": (1, 2), "model": ("resnet50",)},
              lambda p: p["processes_per_node"] * p["intra_threads"] <= 16)
PLAN = dict(steps=100, warmup_steps=10, min_steps=10)


def surface(point: dict) -> float:
    """A layout surface rising then falling with processes per node."""
    ppn, intra = point["processes_per_node"], point["intra_threads"]
    return ppn * intra ** 0.8 / (1 + 0.15 * ppn) * (1.02 if point["inter_threads"] == 2 else 1.0)


def measure(slot) -> float:
    """A noisy measurement that depends only on what the slot measures (so two runs of
    the same plan see the same values)."""
    digest = hashlib.sha256(f"{slot.trial}/{slot.repetition}/{sorted(slot.point.items())}".encode()).digest()
    noise = 1 + 0.04 * (digest[0] / 255 - 0.5) * math.sqrt(100 / slot.steps)
    return surface(slot.point) * noise


def run(tuner: Tuner, rounds: range) -> None:
    for r in rounds:
        tuner.tell(r, {(s.trial, s.repetition): measure(s) for s in tuner.slots(r)})


def trials_of(tuner: Tuner) -> list[tuple]:
    return [(t.number, t.state, t.value, t.user_attrs.get("point"), dict(t.intermediate_values))
            for t in tuner.study.get_trials()]


@pytest.mark.parametrize("points,fraction", [(30, 0.25), (30, 0.5), (120, 0.1), (120, 0.25), (1000, 0.1)])
def test_plan_within_budget_and_rounds_halve(points, fraction):
    budget = fraction * points
    rounds = plan_rounds(points, budget, repetitions=2, **PLAN)
    assert rounds, "a plan fits"
    assert rounds_cost(rounds, steps=100, warmup_steps=10) <= budget + 1e-9
    assert sum(r.trials for r in rounds if r.rung == 0) <= points
    for prev, nxt in zip(rounds, rounds[1:]):
        if nxt.bracket == prev.bracket:
            assert nxt.rung == prev.rung + 1
            assert nxt.trials == math.ceil(prev.trials / 3)
            assert nxt.steps > prev.steps
        else:
            assert nxt.rung == 0 and nxt.bracket == prev.bracket + 1
    tops = [r for i, r in enumerate(rounds) if i + 1 == len(rounds) or rounds[i + 1].bracket != r.bracket]
    assert all(r.steps == 100 and r.repetitions == 2 for r in tops)
    assert all(r.repetitions == 1 for r in rounds if r not in tops)
    assert plan_rounds(points, 0.5, repetitions=2, **PLAN) == []  # not one trial at every rung


def test_unit_cost():
    assert unit_cost(100, full_steps=100, warmup_steps=10) == 1.0
    assert unit_cost(11, full_steps=100, warmup_steps=10) == pytest.approx(21 / 110)


def test_slots_asked_once_tell_idempotent_no_point_twice():
    rounds = plan_rounds(len(SPACE.points()), 0.5 * len(SPACE.points()), repetitions=2, **PLAN)
    assert len({r.bracket for r in rounds}) >= 2
    tuner = Tuner(SPACE, rounds, seed=3)
    measured = []
    for r, rnd in enumerate(rounds):
        slots = tuner.slots(r)
        count = len(tuner.study.get_trials())
        assert tuner.slots(r) == slots and len(tuner.study.get_trials()) == count  # asked once
        assert len(slots) == rnd.trials * rnd.repetitions
        assert all(s.steps == rnd.steps for s in slots)
        if rnd.rung == 0:
            measured += [s.point for s in slots if s.repetition == 0]
        assert all(SPACE.feasible(s.point) and s.point["model"] == "resnet50" for s in slots)
        values = {(s.trial, s.repetition): measure(s) for s in slots}
        tuner.tell(r, values)
        before = trials_of(tuner)
        tuner.tell(r, values)  # told again: nothing changes
        with pytest.raises(StudyMismatch, match=r"^trial \d+: told [\d.]+ img/s, its records' mean is "):
            tuner.tell(r, {k: v * 2 for k, v in values.items()})  # other values: refused
        assert trials_of(tuner) == before
    keys = [tuple(sorted(p.items())) for p in measured]
    assert len(keys) == len(set(keys)), "a point measured twice"
    best = tuner.best()
    assert best is not None and best[0] in measured
    complete = [t for t in tuner.study.get_trials() if t.state == TrialState.COMPLETE]
    assert best[1] == max(t.value for t in complete)
    assert len(complete) == sum(r.trials for i, r in enumerate(rounds)
                                if i + 1 == len(rounds) or rounds[i + 1].bracket != r.bracket)


def test_a_trial_is_valued_by_the_campaigns_statistic():
    """Top-rung repetitions with an outlier: a complete trial's value is the mean or the
    median of its runs, as the campaign's statistic says."""
    rounds = plan_rounds(len(SPACE.points()), 0.5 * len(SPACE.points()), repetitions=3, **PLAN)
    for statistic, aggregate in (("mean", statistics.fmean), ("median", statistics.median)):
        tuner, top = Tuner(SPACE, rounds, seed=1, statistic=statistic), {}
        for r, rnd in enumerate(rounds):
            values = {(s.trial, s.repetition): measure(s) * (10 if s.repetition == 2 else 1)
                      for s in tuner.slots(r)}
            tuner.tell(r, values)
            for (trial, _), value in values.items():
                if rnd.repetitions == 3:  # the top rungs (the others run once)
                    top.setdefault(trial, []).append(value)
        complete = [t for t in tuner.study.get_trials() if t.state == TrialState.COMPLETE]
        assert complete and all(len(top[t.number]) == 3 for t in complete)
        assert all(t.value == pytest.approx(aggregate(top[t.number])) for t in complete)
        assert all(aggregate(top[t.number]) != pytest.approx(statistics.fmean(top[t.number]))
                   for t in complete) == (statistic == "median")


def test_failed_runs_fail_the_trial():
    rounds = plan_rounds(len(SPACE.points()), 0.5 * len(SPACE.points()), repetitions=2, **PLAN)
    tuner = Tuner(SPACE, rounds, seed=0)
    slots = tuner.slots(0)
    failed = slots[0].trial
    tuner.tell(0, {(s.trial, s.repetition): None if s.trial == failed else measure(s) for s in slots})
    states = {t.number: t.state for t in tuner.study.get_trials()}
    assert states[failed] == TrialState.FAIL
    assert failed not in {s.trial for s in tuner.slots(1)}


def test_a_trial_with_a_failed_repetition_is_penalised_and_never_the_best():
    """At the top rung, the trial that would be best fails one of its two runs: it is told
    its runs' mean with the failure as 0 img/s, marked, and the best is another trial."""
    rounds = plan_rounds(len(SPACE.points()), 0.5 * len(SPACE.points()), repetitions=2, **PLAN)
    tuner = Tuner(SPACE, rounds, seed=0)
    top = next(r for r in range(len(rounds)) if r + 1 == len(rounds) or rounds[r + 1].bracket != rounds[r].bracket)
    run(tuner, range(top))
    slots = tuner.slots(top)
    flaky = max(slots, key=lambda s: surface(s.point)).trial
    values = {(s.trial, s.repetition): None if (s.trial, s.repetition) == (flaky, 1) else measure(s)
              for s in slots}
    tuner.tell(top, values)
    trial = tuner.study.trials[flaky]
    assert trial.state == TrialState.COMPLETE and trial.user_attrs["failed_runs"] == 1
    assert trial.value == pytest.approx(values[(flaky, 0)] / 2)
    point, value = tuner.best()
    assert point != json.loads(trial.user_attrs["point"])
    whole = [t for t in tuner.study.trials if t.state == TrialState.COMPLETE and "failed_runs" not in t.user_attrs]
    assert value == max(t.value for t in whole)


@pytest.mark.parametrize("cliff, answer", [(True, 1), (False, 3)])
def test_the_answer_is_not_a_layout_beside_failures(cliff, answer):
    """Five layouts, every one measured: 3 is the fastest and 1 the next; beside 3, layout
    4 fails (an out-of-memory cliff). 3's runs and its neighbours' fail a quarter of the
    time, so the answer is 1, 5 % slower; with no failure it is 3."""
    from archbench.plan.tuning_plan import Round
    space = Space({"x": (0, 1, 2, 3, 4)})
    tuner = Tuner(space, [Round(0, 0, 5, 10, 1), Round(0, 1, 2, 100, 1)], seed=0)
    speed = {0: 50.0, 1: 95.0, 2: 60.0, 3: 100.0, 4: None if cliff else 40.0}
    for r in range(2):
        tuner.tell(r, {(s.trial, s.repetition): speed[s.point["x"]] for s in tuner.slots(r)})
    assert tuner.best() == ({"x": answer}, speed[answer])


def test_a_study_of_another_plan_is_refused():
    rounds = plan_rounds(len(SPACE.points()), 0.5 * len(SPACE.points()), repetitions=2, **PLAN)
    storage = optuna.storages.InMemoryStorage()
    tuner = Tuner(SPACE, rounds, seed=0, storage=storage, study_key="a" * 12)
    tuner.slots(0)
    assert Tuner(SPACE, rounds, seed=0, storage=storage, study_key="a" * 12).slots(0) == tuner.slots(0)
    with pytest.raises(StudyMismatch, match=r"^a journal of another study \(aaaaaaaaaaaa; the plan's is bbbbbbbbbbbb"):
        Tuner(SPACE, rounds, seed=0, storage=storage, study_key="b" * 12)


def test_resume_from_journal_after_kill_between_rounds(tmp_path):
    rounds = plan_rounds(len(SPACE.points()), 0.5 * len(SPACE.points()), repetitions=2, **PLAN)
    whole = Tuner(SPACE, rounds, seed=7)
    run(whole, range(len(rounds)))

    def journal():
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(tmp_path / "study.log")))

    kill_after = len(rounds) // 2 + 1
    first = Tuner(SPACE, rounds, seed=7, storage=journal())
    run(first, range(kill_after))
    first.slots(kill_after)  # the next round's trials were asked, then the campaign was killed
    del first
    resumed = Tuner(SPACE, rounds, seed=7, storage=journal())  # a new process: storage read back
    run(resumed, range(kill_after - 1, len(rounds)))  # the last finished round told again
    assert trials_of(resumed) == trials_of(whole)
    assert resumed.best() == whole.best()


# ---------------------------------------------------------------- the replay benchmark


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_tuner", REPO / "scripts" / "bench_tuner.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_tuner"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_replay_oracle_from_records(bench):
    rows = [{"sweep": "hybrid", "model": "small_cnn", "batch_per_process": str(b), "processes_per_node": str(p),
             "intra_threads": str(2 // p), "inter_threads": "1", "vendor_library_enabled": "True", "warmup_steps": "2",
             "measured_steps": "50", "repetition": str(rep), "throughput": f"{100 * p + b + rep:.2f}"}
            for b in (16, 32) for p in (1, 2) for rep in (0, 1, 2)]
    rows.append({**rows[0], "repetition": "3", "throughput": ""})  # a failed run: no value
    (oracle,) = bench.sweep_oracles(rows, "default")
    assert oracle.name == "default/hybrid" and len(oracle.points) == 4
    assert (oracle.steps, oracle.warmup_steps) == (50, 2)
    best = max(oracle.points, key=lambda p: oracle.truth[bench.key(p)])
    assert (best["processes_per_node"], best["batch_per_process"], best["vendor_library_enabled"]) == (2, 32, True)
    assert oracle.regret(best) == 0.0
    worst = {**best, "processes_per_node": 1, "intra_threads": 2, "batch_per_process": 16}
    assert oracle.regret(worst) == pytest.approx(1 - 117 / 233)
    rng = bench.random.Random(0)
    draws = {oracle.draw(best, 5, rng) for _ in range(50)}
    assert draws == {232.0, 233.0, 234.0}  # one of the sweep's repetitions, each time
    assert bench.replay_random(oracle, 1.0, repetitions=2, seed=0) is None  # a budget below one point's repetitions
    assert bench.replay_random(oracle, 8.0, repetitions=2, seed=0) == best  # every point: the best observed


def test_replay_committed_records_and_surfaces(bench):
    oracles = bench.sweep_oracles(bench.read_rows(bench.DEFAULT_CSV), "default")
    assert {o.name for o in oracles} == {"default/hybrid", "default/threads", "default/interintra"}
    assert all(len(o.points) >= 2 and min(o.truth.values()) > 0 for o in oracles)
    synthetic = bench.synthetic_oracle()
    assert len(synthetic.points) > 1000
    by_ppn = {}
    for p in synthetic.points:
        by_ppn[p["processes_per_node"]] = max(by_ppn.get(p["processes_per_node"], 0.0), synthetic.truth[bench.key(p)])
    best_ppn = max(by_ppn, key=by_ppn.get)
    assert 1 < best_ppn < 48 and by_ppn[1] < by_ppn[best_ppn] > by_ppn[48]  # rises, then falls
    study = bench.study_oracle("config/campaigns/bsc-2019.yaml", "threads-dibona", "dibona")
    assert len(study.points) == 70


def test_replay_smoke(bench):
    oracle = bench.synthetic_oracle()
    rows = bench.evaluate(oracle, seeds=2, repetitions=2, budgets=(0.1,))
    (row,) = rows
    assert row["cost"] <= 0.1 + 1e-9 and row["trials"] > 0
    for med, p90 in (row["tuner"], row["random"]):
        assert 0.0 <= med <= p90 < 1.0
    assert "synthetic/skylake48" in bench.verdict([{**row, "budget": 0.25}])


def test_the_cliff_surface_has_failures_beside_its_best(bench):
    """Space 4 of the replay: the best is a layout that always runs; beside it, faster
    layouts fail some runs (their expected delivery is lower), and random search never
    keeps a point with a failed run."""
    oracle = bench.cliff_oracle()
    best = max(oracle.points, key=lambda p: oracle.truth[bench.key(p)])
    assert bench.cliff_works(best) == 1.0
    flaky = [p for p in oracle.points if 0 < bench.cliff_works(p) < 1]
    assert max(oracle.truth[bench.key(p)] / bench.cliff_works(p) for p in flaky) > oracle.truth[bench.key(best)]
    assert min(oracle.regret(p) for p in flaky) > 0.3
    rng = bench.random.Random(0)
    gone = next(p for p in oracle.points if bench.cliff_works(p) == 0)
    assert all(oracle.draw(gone, 100, rng) is None for _ in range(5))
    found = bench.replay_random(oracle, 0.25 * len(oracle.points), repetitions=2, seed=0)
    assert bench.cliff_works(found) == 1.0
