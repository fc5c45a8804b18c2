"""Successive halving with a model-based sampler, in rounds a workflow can run as jobs.

A tuning plan (:mod:`archbench.plan.tuning_plan`) is a list of :class:`Round`: brackets of successive halving (Hyperband's
building block) with the measured steps as fidelity. A bracket's first round measures new
trials briefly (Optuna's TPE sampler proposes them, informed by every earlier trial,
the pruned ones by their short-window value); each later round measures the best
1/reduction_factor of the previous round's trials for longer, the last round at the
experiment's full steps and repeated. Rounds and their sizes are fixed when the plan is
made, so the workflow's DAG is known before any job runs; which configuration a trial
measures is decided when its round starts (:meth:`Tuner.slots`).

The study lives in Optuna's storage (a journal file under results/ in a campaign): every
step is idempotent (a round's trials are asked once, kept by their round and slot; a
result is told once), so a tuning campaign killed anywhere resumes without losing or
repeating a trial.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any, Mapping

import optuna
from optuna.trial import TrialState

from archbench.core.metrics import STATISTIC_OF
from archbench.plan.tuning_plan import Round, Slot, Space

optuna.logging.set_verbosity(optuna.logging.WARNING)

STUDY = "tune"
ORDINAL = True  # numeric axes as positions (suggest_int), others categorical
ASKS_PER_SLOT = 2  # trials asked per slot: the proposal, then the untried point nearest to it


def new_study(storage: Any = None, seed: int = 0) -> optuna.Study:
    """A study maximising the objective (img/s), in ``storage`` (in memory when None),
    loaded when it exists."""
    return optuna.create_study(study_name=STUDY, storage=storage, direction="maximize",
                               sampler=sampler(seed, 0), load_if_exists=True)


def sampler(seed: int, round_index: int) -> optuna.samplers.TPESampler:
    """The sampler of one round, seeded by the plan's seed and the round: a resumed round
    proposes what an uninterrupted one would. Multivariate TPE (the knobs interact); a
    constant liar keeps a round's trials apart."""
    return optuna.samplers.TPESampler(seed=seed * 10_007 + round_index, multivariate=True,
                                      constant_liar=True, n_startup_trials=8)


def ordinal(values: tuple) -> bool:
    """Whether an axis's values are numbers (not booleans): ordered, so a sampler may
    treat near positions as similar."""
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def key(point: Mapping) -> str:
    """A point as a canonical string (a study's user attributes hold JSON)."""
    return json.dumps(point, sort_keys=True)


class Tuner:
    """Runs a plan's rounds on the study in ``storage`` (an Optuna storage or URL;
    in memory when None); a trial's value is the ``statistic`` (the campaign's: mean or
    median) of its runs' img/s."""

    def __init__(self, space: Space, rounds: list[Round], *, seed: int = 0, storage: Any = None,
                 statistic: str = "mean"):
        self.space, self.rounds, self.seed = space, rounds, seed
        self.aggregate = STATISTIC_OF[statistic]
        self.storage = optuna.storages.InMemoryStorage() if storage is None else storage
        self.study = new_study(self.storage, seed)
        self.constants = {k: v[0] for k, v in space.axes.items() if len(v) == 1}
        self.feasible = {key(p) for p in space.points()}
        self.positions = {key(p): self._position(p) for p in space.points()}

    # ------------------------------------------------------------ trials of a round

    def _trials(self, **attrs: Any) -> list[optuna.trial.FrozenTrial]:
        return [t for t in self.study.get_trials(deepcopy=False)
                if all(t.user_attrs.get(k) == v for k, v in attrs.items())]

    def slots(self, r: int) -> list[Slot]:
        """The measurements of round ``r`` (0-based): new trials asked once (a repeated
        call returns the same), or the trials the previous round promoted."""
        rnd = self.rounds[r]
        if rnd.rung == 0:
            trials = self._new_trials(r, rnd.trials)
        else:
            trials = sorted(self._trials(promoted_to=r), key=lambda t: t.number)
        return [Slot(t.number, json.loads(t.user_attrs["point"]), rnd.steps, rep)
                for t in trials for rep in range(rnd.repetitions)]

    def _new_trials(self, r: int, count: int) -> list[optuna.trial.FrozenTrial]:
        have = {t.user_attrs["slot"]: t for t in self._trials(round=r) if "slot" in t.user_attrs}
        if len(have) < count:
            study = optuna.load_study(study_name=STUDY, storage=self.storage, sampler=sampler(self.seed, r))
            for slot in range(count):
                if slot not in have:
                    self._ask(study, r, slot)
            have = {t.user_attrs["slot"]: t for t in self._trials(round=r) if "slot" in t.user_attrs}
        return [have[s] for s in sorted(have) if s < count]

    def _ask(self, study: optuna.Study, r: int, slot: int) -> None:
        """One new trial for ``slot`` of round ``r``: the sampler's proposal when it is
        feasible and not yet measured; otherwise that proposal is told FAIL (the sampler
        ignores failed trials) and the trial measures the untried feasible point nearest
        to it (axis positions scaled to [0, 1], ties drawn with the plan's seed), so one
        slot costs at most two proposals and keeps the sampler's intent."""
        tried = {t.user_attrs["point"] for t in self._trials() if "point" in t.user_attrs}
        untried = sorted(self.feasible - tried)
        if not untried:
            return
        for attempt in range(ASKS_PER_SLOT):
            trial = study.ask()
            point = self._suggest(trial)
            if key(point) in untried:
                for name, value in (("point", key(point)), ("round", r), ("slot", slot)):
                    trial.set_user_attr(name, value)
                return
            why = "infeasible" if key(point) not in self.feasible else "already measured"
            trial.set_user_attr("skipped", why)
            study.tell(trial, state=TrialState.FAIL)
            if attempt + 1 < ASKS_PER_SLOT:
                nearest = self._nearest(point, untried, random.Random(f"{self.seed}/{r}/{slot}"))
                study.enqueue_trial(self._params(nearest))

    def _suggest(self, trial: optuna.Trial) -> dict:
        """The point a trial proposes: an axis of numbers (in the order the space gives
        them) as the position of its value, so the sampler sees neighbours as near
        (TPE's kernel over an integer, which a categorical lacks); other axes categorical."""
        chosen = dict(self.constants)
        for name, values in self.space.tuned().items():
            if ORDINAL and ordinal(values):
                chosen[name] = values[trial.suggest_int(name, 0, len(values) - 1)]
            else:
                chosen[name] = trial.suggest_categorical(name, values)
        return {name: chosen[name] for name in self.space.axes}

    def _params(self, point: Mapping) -> dict:
        """The trial parameters that make :meth:`_suggest` propose ``point``."""
        return {name: values.index(point[name]) if ORDINAL and ordinal(values) else point[name]
                for name, values in self.space.tuned().items()}

    def _nearest(self, point: dict, untried: list[str], rng: random.Random) -> dict:
        """The untried point nearest to ``point``: the sum over tuned axes of the
        difference of positions, each axis's positions scaled to [0, 1]."""
        target = self._position(point)
        distance = {k: sum(abs(a - b) for a, b in zip(self.positions[k], target)) for k in untried}
        nearest = min(distance.values())
        return json.loads(rng.choice([k for k in untried if distance[k] <= nearest + 1e-12]))

    def _position(self, point: Mapping) -> tuple[float, ...]:
        return tuple(values.index(point[name]) / (len(values) - 1) for name, values in self.space.tuned().items())

    # ------------------------------------------------------------ results

    def tell(self, r: int, values: Mapping[tuple[int, int], float | None]) -> None:
        """Round ``r``'s results, (trial, repetition) -> value (None: the run failed, or
        missing): each trial's statistic of its values; a trial with none fails. At the top
        rung the trial completes; below, the best ``rounds[r + 1].trials`` are promoted to
        the next round and the rest pruned at their value. Told once: calling it again
        changes nothing."""
        rnd = self.rounds[r]
        by_trial: dict[int, list[float]] = {}
        for slot in self.slots(r):
            value = values.get((slot.trial, slot.repetition))
            by_trial.setdefault(slot.trial, [])
            if value is not None and math.isfinite(value):
                by_trial[slot.trial].append(float(value))
        frozen = {t.number: t for t in self.study.get_trials(deepcopy=False)}
        scores = {n: self.aggregate(v) for n, v in by_trial.items() if v}
        top = r + 1 == len(self.rounds) or self.rounds[r + 1].bracket != rnd.bracket
        for number in by_trial:
            t = frozen[number]
            if t.state != TrialState.RUNNING:
                continue
            if number not in scores:
                self.study.tell(number, state=TrialState.FAIL)
            elif top:
                self.study.tell(number, scores[number])
            elif rnd.steps not in t.intermediate_values:
                optuna.trial.Trial(self.study, t._trial_id).report(scores[number], rnd.steps)
        if top or self._trials(promoted_to=r + 1):
            return
        ranked = sorted(scores, key=lambda n: (-scores[n], n))
        keep = set(ranked[:self.rounds[r + 1].trials])
        for number in ranked:
            if number in keep:
                optuna.trial.Trial(self.study, frozen[number]._trial_id).set_user_attr("promoted_to", r + 1)
            else:
                self.study.tell(number, state=TrialState.PRUNED)

    def best(self) -> tuple[dict, float] | None:
        """The point and value of the best complete trial; None when none completed."""
        done = [t for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
        if not done:
            return None
        t = max(done, key=lambda t: (t.value, -t.number))
        return json.loads(t.user_attrs["point"]), float(t.value)
