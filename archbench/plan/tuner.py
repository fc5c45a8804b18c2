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

from archbench.core.metrics import DEFAULT_STATISTIC, STATISTIC_OF
from archbench.plan.tuning_plan import Round, Slot, Space

optuna.logging.set_verbosity(optuna.logging.WARNING)

STUDY = "tune"
ORDINAL = True  # numeric axes as positions (suggest_int), others categorical
ASKS_PER_SLOT = 2  # trials asked per slot: the proposal, then the untried point nearest to it
REL_TOLERANCE = 1e-9  # a told value against its records' statistic, told again


class StudyMismatch(ValueError):
    """The study in the storage is not the plan's, or not what its records say (one line)."""


def new_study(storage: Any = None, seed: int = 0) -> optuna.Study:
    """A study maximising the objective (img/s), in ``storage`` (in memory when None),
    loaded when it exists (without writing to the storage)."""
    if storage is not None and any(s.study_name == STUDY for s in storage.get_all_studies()):
        return optuna.load_study(study_name=STUDY, storage=storage, sampler=sampler(seed, 0))
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
                 statistic: str = DEFAULT_STATISTIC, study_key: str | None = None):
        self.space, self.rounds, self.seed, self.study_key = space, rounds, seed, study_key
        self.statistic, self.aggregate = statistic, STATISTIC_OF[statistic]
        self.storage = optuna.storages.InMemoryStorage() if storage is None else storage
        self.study = new_study(self.storage, seed)
        stored = self.study.user_attrs.get("key")
        if study_key is not None and stored != study_key and (stored is not None or self.study.trials):
            raise StudyMismatch(f"a journal of another study ({stored or 'without a key'}; the plan's "
                                f"is {study_key}: its space, rounds, seed or budget differ); move it away")
        self.constants = {k: v[0] for k, v in space.axes.items() if len(v) == 1}
        self.feasible = {key(p) for p in space.points()}
        self.positions = {key(p): self._position(p) for p in space.points()}

    # ------------------------------------------------------------ trials of a round

    def _trials(self, **attrs: Any) -> list[optuna.trial.FrozenTrial]:
        return [t for t in self.study.get_trials(deepcopy=False)
                if all(t.user_attrs.get(k) == v for k, v in attrs.items())]

    def _promoted(self, r: int) -> list[optuna.trial.FrozenTrial]:
        """The trials promoted to round ``r`` (a trial keeps one mark per round it reached,
        so an earlier round's trials are known after later promotions)."""
        return self._trials(**{f"promoted{r}": True})

    def slots(self, r: int) -> list[Slot]:
        """The measurements of round ``r`` (0-based): new trials asked once (a repeated
        call returns the same), or the trials the previous round promoted."""
        rnd = self.rounds[r]
        if rnd.rung == 0:
            trials = self._new_trials(r, rnd.trials)
        else:
            trials = sorted(self._promoted(r), key=lambda t: t.number)
        return [Slot(t.number, json.loads(t.user_attrs["point"]), rnd.steps, rep)
                for t in trials for rep in range(rnd.repetitions)]

    def asked(self, r: int) -> bool:
        """Whether the study holds round ``r``'s trials (asked, or promoted to it)."""
        return bool(self._trials(round=r) if self.rounds[r].rung == 0 else self._promoted(r))

    def _new_trials(self, r: int, count: int) -> list[optuna.trial.FrozenTrial]:
        have = {t.user_attrs["slot"]: t for t in self._trials(round=r) if "slot" in t.user_attrs}
        if len(have) < count:
            if self.study_key is not None and "key" not in self.study.user_attrs:
                self.study.set_user_attr("key", self.study_key)
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
        missing): each trial's statistic of its values, a failed run counting 0 img/s (the
        layout's expected delivery: a sampler learns where runs fail); a trial with no ok
        run fails. A trial with a failed run is marked (``failed_runs``) and never
        :meth:`best`. At the top rung the trial completes; below, the best
        ``rounds[r + 1].trials`` are promoted to the next round and the rest pruned at
        their value. Told once: calling it again changes nothing, and a trial told before
        must have the value its ``values`` give (StudyMismatch otherwise)."""
        rnd = self.rounds[r]
        by_trial: dict[int, list[float | None]] = {}
        for slot in self.slots(r):
            value = values.get((slot.trial, slot.repetition))
            ok = value is not None and math.isfinite(value)
            by_trial.setdefault(slot.trial, []).append(float(value) if ok else None)
        frozen = {t.number: t for t in self.study.get_trials(deepcopy=False)}
        scores = {n: self.aggregate([x or 0.0 for x in v]) for n, v in by_trial.items()
                  if any(x is not None for x in v)}
        failed = {n: sum(x is None for x in v) for n, v in by_trial.items()}
        top = r + 1 == len(self.rounds) or self.rounds[r + 1].bracket != rnd.bracket
        for number in by_trial:
            t = frozen[number]
            if t.state != TrialState.RUNNING or rnd.steps in t.intermediate_values:
                self._check_told(t, scores.get(number), steps=rnd.steps, top=top)
                continue
            live = optuna.trial.Trial(self.study, t._trial_id)
            live.set_user_attr(f"runs{r}", [len(by_trial[number]), failed[number]])  # runs, failed
            if failed[number] and number in scores:
                live.set_user_attr("failed_runs", failed[number])
            if number not in scores:
                self.study.tell(number, state=TrialState.FAIL)
            elif top:
                self.study.tell(number, scores[number])
            else:
                optuna.trial.Trial(self.study, t._trial_id).report(scores[number], rnd.steps)
        if top or self._promoted(r + 1):
            return
        ranked = sorted(scores, key=lambda n: (-scores[n], n))
        keep = set(ranked[:self.rounds[r + 1].trials])
        for number in ranked:
            if number in keep:
                optuna.trial.Trial(self.study, frozen[number]._trial_id).set_user_attr(f"promoted{r + 1}", True)
            else:
                self.study.tell(number, state=TrialState.PRUNED)

    def _check_told(self, t: optuna.trial.FrozenTrial, score: float | None, *, steps: int, top: bool) -> None:
        """StudyMismatch when trial ``t``, told before at a round of ``steps`` (``top``:
        the top rung), holds another value there than ``score`` (its records' statistic
        now; None: no ok run)."""
        if top:
            told = t.value if t.state == TrialState.COMPLETE else None
        else:
            told = t.intermediate_values.get(steps)
        if told is None and score is None or (
                told is not None and score is not None and math.isclose(told, score, rel_tol=REL_TOLERANCE)):
            return
        shown = "failed" if told is None else f"{told:g} img/s"
        now = "no ok run" if score is None else f"{score:g} img/s"
        raise StudyMismatch(f"trial {t.number}: told {shown}, its records' {self.statistic} is {now} "
                            "(the journal or a record was edited after it was told)")

    def best(self) -> tuple[dict, float] | None:
        """The point and value of the best complete trial whose runs all succeeded, ranked
        by its value x (1 - the failed share of the runs at its point and the points one
        step from it along one axis): a layout beside others that failed is at risk of
        failing too (out of memory near a cliff), and loses to a safe one unless it is
        faster by more than that share. With no failed run anywhere, the highest value.
        None when no trial completed without a failed run."""
        trials = self.study.get_trials(deepcopy=False)
        done = [t for t in trials if t.state == TrialState.COMPLETE and not t.user_attrs.get("failed_runs")]
        if not done:
            return None
        runs: dict[str, list[int]] = {}  # point -> [runs, failed] over every round
        for t in trials:
            for count, failed in (v for k, v in t.user_attrs.items() if k.startswith("runs")):
                total = runs.setdefault(t.user_attrs["point"], [0, 0])
                total[0], total[1] = total[0] + count, total[1] + failed

        def safe(t: optuna.trial.FrozenTrial) -> float:
            around = [runs[k] for k in (t.user_attrs["point"], *self._neighbours(t.user_attrs["point"])) if k in runs]
            count, failed = (sum(c[i] for c in around) for i in (0, 1))
            return 1.0 - failed / count if count else 1.0
        t = max(done, key=lambda t: (t.value * safe(t), t.value, -t.number))
        return json.loads(t.user_attrs["point"]), float(t.value)

    def _neighbours(self, point_key: str) -> list[str]:
        """The points one position from ``point_key`` along one tuned axis."""
        point, out = json.loads(point_key), []
        for name, values in self.space.tuned().items():
            i = values.index(point[name])
            out += [key({**point, name: values[j]}) for j in (i - 1, i + 1) if 0 <= j < len(values)]
        return out
