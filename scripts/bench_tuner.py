"""The tuner against finished sweeps: how close to a sweep's best does it get at a fraction
of the sweep's cost, beside random search at the same budget (a replay, no training runs).

Each space is an *oracle*: every configuration's repetitions of a sweep (or a surface that
draws them). A trial's measurement answers with one repetition drawn (seeded) from the
configuration's values, so the noise is the sweep's own. The tuner
(:mod:`archbench.plan.tuner`: TPE proposals, synchronous successive halving with the
measured steps as fidelity, rounds planned up front, an in-memory study) runs its plan
round by round; random search measures distinct points drawn uniformly, each at full steps
with the plan's top-rung repetitions, and keeps the best observed mean.

Cost: the exhaustive sweep measures every configuration once at full steps (cost = the
number of points); a measurement of s steps costs (warmup + s) / (warmup + steps)
(:func:`archbench.plan.tuning_plan.unit_cost`). Budgets: 10, 25 and 50 % of that.
Regret = 1 - true(found) / true(best), true = the configuration's mean over the sweep (or
the surface's noiseless value). Goal (issue 45): median regret <= 3 % and 90th percentile
<= 5 % at 25 %, and the tuner better than random search at the same budget.

The spaces:

1. ``default/<sweep>``: the default campaign's layout and thread sweeps (experiments
   hybrid, threads, interintra of config/config.yaml) run for real, smaller, on a 2-core
   machine (data/tuner-replay/default-2core.csv, written by ``--record``: config fields,
   repetition, img/s). On 2 cores these spaces are tiny (4 to 8 points): the plan cannot
   afford much, and a budget that buys no plan is reported as such ("-").
2. ``<campaign>/<sweep>@<system>``: a study campaign's sweep expanded on its system by the
   campaign planner, values from :func:`fabricated.true_throughput` (``tests/fabricated.py``) times
   the fabricated repetition factors (``NOISE``: 0.98, 1.00, 1.02 for 3 repetitions). The
   fabricated surface is monotone in every axis (threads^0.85, batch, vendor library on):
   the best is a corner, an easy surface for any model-based sampler.
3. ``synthetic/skylake48``: a noisy surface with the shape OSU 2019 and BSC 2019 report for
   processes per node x threads (see :func:`synthetic_throughput`): on a 48-core node with
   2 hardware threads per core, axes processes per node (divisors of 48), intra-op threads
   per process, inter-op threads {1, 2, 4} and batch per process {16 ... 256}; feasible
   when processes x intra <= 96 hardware threads. A step of one process costs
   compute + communication: compute = batch x work / S(t), S the Amdahl speedup of t
   effective cores (parallel fraction rising with the batch: small batches scale worse,
   BSC 2019 Figs. 2-6), t = intra-op threads, hyper-threads counting 0.25 of a core, the
   node's cores shared evenly when processes x threads exceed them, minus a core for
   Horovod's background thread when a multi-process layout leaves none (OSU 2019: intra =
   cores/ppn - 1 is best); communication = an allreduce growing with log2(processes)
   plus memory-bandwidth contention growing with processes (so throughput rises then
   falls with processes per node: best at 4 on 48 cores as in OSU 2019 Fig. 5/6, mid-range
   as in BSC 2019 Figs. 8-13). Inter-op threads: +3 % at 2 when a hyper-thread is free
   for it, -2 % per oversubscribed inter-op thread, 4 slightly worse (ResNets have little
   inter-op parallelism). Batch saturates (large batches amortise the allreduce) and falls
   past 16k images per node in flight (memory). Run-to-run noise: lognormal, sigma 2 %
   at 100 measured steps growing as sqrt(100/steps) (6 % at 11 steps), plus a short-window
   bias: a window of s steps reads 3 % x log2(processes)/log2(48) x 10/s low (Horovod's
   first negotiations fall in short windows), so low fidelity misleads a little.

    python scripts/bench_tuner.py [--seeds 20] [--quick] [--repetitions 2]
    python scripts/bench_tuner.py --record RESULTS_DIR   # rewrite the CSV of space 1

Only ratios are printed (regret, cost fractions): the replay measures no time.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))  # fabricated.py (space 2)

from archbench.plan.tuner import Tuner, key  # noqa: E402
from archbench.plan.tuning_plan import Space, plan_rounds, rounds_cost  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CSV = REPO / "data" / "tuner-replay" / "default-2core.csv"
# fields of a training record that tell the configurations of one sweep apart
CONFIG_FIELDS = ("model", "batch_per_process", "processes_per_node", "intra_threads",
                 "inter_threads", "vendor_library_enabled")
CSV_FIELDS = ("sweep", *CONFIG_FIELDS, "warmup_steps", "measured_steps", "repetition", "throughput")
BUDGETS = (0.10, 0.25, 0.50)
GOAL_BUDGET, GOAL_MEDIAN, GOAL_P90 = 0.25, 0.03, 0.05
STUDY_SWEEPS = (("config/campaigns/osu-2019.yaml", "threads", "osu-skylake-40"),
                ("config/campaigns/bsc-2019.yaml", "threads-dibona", "dibona"))


@dataclass
class Oracle:
    """A space and how its measurements answer: ``draw(point, steps, rng)`` -> img/s;
    ``truth`` maps each point's key to its true value (the sweep's mean)."""

    name: str
    space: Space
    truth: dict[str, float]
    draw: Callable[[dict, int, random.Random], float | None]  # None: the run failed
    steps: int
    warmup_steps: int
    note: str = ""
    points: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.points = self.space.points()

    @property
    def min_steps(self) -> int:
        """The shortest window a rung measures: a ninth of the full steps (the tune
        experiment type's default min_steps)."""
        return max(1, self.steps // 9)

    def regret(self, point: dict | None) -> float | None:
        """1 - true(point) / true(best); None when nothing was found."""
        if point is None:
            return None
        return 1.0 - self.truth[key(point)] / max(self.truth.values())


# ---------------------------------------------------------------- space 1: real records

def sweep_oracles(rows: list[dict], prefix: str) -> list[Oracle]:
    """One oracle per sweep of ``rows`` (CSV rows): axes the configuration fields that
    vary, feasible the configurations the sweep ran; a measurement draws one of their
    repetitions (whatever the steps: the sweep has full windows only)."""
    out = []
    for sweep in sorted({r["sweep"] for r in rows}):
        mine = [r for r in rows if r["sweep"] == sweep and r["throughput"] not in ("", None)]
        values: dict[str, list[float]] = {}
        for r in mine:
            point = {f: parse(r[f]) for f in CONFIG_FIELDS}
            values.setdefault(key(point), []).append(float(r["throughput"]))
        axes = {f: tuple(sorted({parse(r[f]) for r in mine}, key=_order)) for f in CONFIG_FIELDS}
        ran = set(values)
        space = Space(axes, lambda p, ran=ran: key(p) in ran)
        truth = {k: statistics.fmean(v) for k, v in values.items()}
        out.append(Oracle(f"{prefix}/{sweep}", space, truth,
                          lambda p, s, rng, values=values: rng.choice(values[key(p)]),
                          steps=int(mine[0]["measured_steps"]), warmup_steps=int(mine[0]["warmup_steps"]),
                          note=f"real records, {len(mine)} runs"))
    return out


def parse(text: str) -> int | float | bool | str:
    """A CSV cell as the record's value: a number, True/False, or the text."""
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _order(value: object) -> tuple:
    return (str(type(value)), value)


def read_rows(path: Path) -> list[dict]:
    """The rows of a replay CSV."""
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def record_rows(results: Path, sweeps: tuple[str, ...] = ("hybrid", "threads", "interintra")) -> list[dict]:
    """CSV rows of the training records of ``sweeps`` under ``results``/raw (ok runs and
    failures alike: a failure's throughput is empty)."""
    rows = []
    for path in sorted((results / "raw").glob("*/*/*/rep*.json")):
        record = json.loads(path.read_text())
        if record.get("experiment") not in sweeps or record.get("kind") != "train":
            continue
        row = {"sweep": record["experiment"], **{f: record.get(f) for f in CONFIG_FIELDS},
               "warmup_steps": record.get("warmup_steps"), "measured_steps": record.get("measured_steps"),
               "repetition": record.get("repetition"), "throughput": record.get("throughput")}
        if row["throughput"] is not None:
            row["throughput"] = f"{row['throughput']:.2f}"
        rows.append(row)
    return rows


# ---------------------------------------------------------------- space 2: fabricated study sweeps

def study_oracle(campaign_file: str, experiment: str, system: str) -> Oracle:
    """A study campaign's sweep on one system, values from the fabricated surface times
    the fabricated repetition factors of its repetitions."""
    from fabricated import NOISE, true_throughput

    from archbench.plan.campaign import load_campaign_file

    campaign = load_campaign_file(REPO / campaign_file)
    runs = [m for m in campaign.measurements if m["experiment"] == experiment and m["system"] == system]
    repetitions = max(int(m["repetition"]) for m in runs) + 1
    factors = NOISE[min(repetitions, max(NOISE))]
    truth: dict[str, float] = {}
    for m in runs:
        point = {f: m[f] for f in CONFIG_FIELDS}
        truth[key(point)] = true_throughput({**m, "data": m.get("data", "synthetic")})
    axes = {f: tuple(sorted({m[f] for m in runs}, key=_order)) for f in CONFIG_FIELDS}
    space = Space(axes, lambda p: key(p) in truth)
    name = f"{Path(campaign_file).stem}/{experiment}@{system}"
    return Oracle(name, space, truth, lambda p, s, rng: truth[key(p)] * rng.choice(factors),
                  steps=int(runs[0]["measured_steps"]), warmup_steps=int(runs[0]["warmup_steps"]),
                  note="fabricated, monotone")


# ---------------------------------------------------------------- space 3: synthetic surface

CORES, HW_THREADS = 48, 96


def synthetic_throughput(p: dict) -> float:
    """The noiseless img/s of a layout on the synthetic 48-core node (module docstring)."""
    ppn, intra, inter, batch = (p["processes_per_node"], p["intra_threads"], p["inter_threads"],
                                p["batch_per_process"])
    busy = ppn * intra
    cores = min(intra, CORES / ppn) + 0.25 * max(0.0, min(intra, HW_THREADS / ppn) - CORES / ppn)
    if ppn > 1 and busy >= CORES:  # no core left for Horovod's background thread
        cores -= 1.0 if intra > 1 else 0.5
    parallel = 0.99 - 0.25 / math.sqrt(batch)
    speedup = 1.0 / ((1.0 - parallel) + parallel / max(cores, 0.25))
    compute = batch * 1.0 / speedup
    allreduce = 0.0 if ppn == 1 else 2.0 * (1.0 + math.log2(ppn))
    contention = 1.0 + 0.02 * ppn
    value = ppn * batch / (compute * contention + allreduce)
    spare = HW_THREADS - busy
    if inter == 2:
        value *= 1.03 if spare >= ppn else 0.98
    elif inter == 4:
        value *= 1.01 if spare >= 3 * ppn else 0.94
    if ppn * batch > 1024:  # activations of every process's batch past the caches and memory
        value *= 0.93
    return value * 10.0


def synthetic_oracle() -> Oracle:
    """The synthetic surface (module docstring) as an oracle: 100 measured steps, 10 warm-up."""
    divisors = tuple(d for d in range(1, CORES + 1) if CORES % d == 0)
    axes = {"processes_per_node": divisors,
            "intra_threads": (1, 2, 3, 4, 5, 7, 8, 11, 12, 15, 16, 23, 24, 47, 48, 96),
            "inter_threads": (1, 2, 4), "batch_per_process": (16, 32, 64, 128, 256)}
    space = Space(axes, lambda p: p["processes_per_node"] * p["intra_threads"] <= HW_THREADS)
    truth = {key(p): synthetic_throughput(p) for p in space.points()}

    def draw(p: dict, steps: int, rng: random.Random) -> float:
        sigma = 0.02 * math.sqrt(100 / steps)
        bias = 0.03 * math.log2(p["processes_per_node"]) / math.log2(CORES) * 10 / steps
        return truth[key(p)] * (1 - bias) * math.exp(rng.gauss(0.0, sigma))

    return Oracle("synthetic/skylake48", space, truth, draw, steps=100, warmup_steps=10,
                  note="synthetic, OSU/BSC shape")


# ---------------------------------------------------------------- space 4: an out-of-memory cliff

MEMORY_IMAGES = 1024  # images in flight per node (processes x batch) that always fit
OOM_IMAGES = 2048  # above it every run fails; between the two, FLAKY of the runs fail
FLAKY = 0.4


def cliff_works(p: dict) -> float:
    """The share of a layout's runs that succeed on the cliff surface."""
    images = p["processes_per_node"] * p["batch_per_process"]
    return 1.0 if images <= MEMORY_IMAGES else 1.0 - FLAKY if images <= OOM_IMAGES else 0.0


def cliff_oracle() -> Oracle:
    """The synthetic node (fewer thread counts, batches from 32, inter-op 1 or 2: 398
    layouts) with an out-of-memory cliff beside its best layout: without the
    surface's memory penalty, a layout holding more than MEMORY_IMAGES images in flight
    is faster when it runs (6 or 8 processes of batch 256, 5 % above the best that fits),
    but a FLAKY share of its runs fail (memory fragmentation near the limit), and above
    OOM_IMAGES every run fails. A layout's true value is its expected delivery: img/s
    when it runs x the share that runs (a failed run delivers nothing), so the best is
    the best layout that fits (4 processes of batch 256) and a flaky neighbour's regret
    is 37 %. A draw is None for a failed run."""
    divisors = tuple(d for d in range(1, CORES + 1) if CORES % d == 0)
    axes = {"processes_per_node": divisors, "intra_threads": (1, 2, 4, 6, 8, 11, 12, 16, 23, 24, 48),
            "inter_threads": (1, 2), "batch_per_process": (32, 64, 128, 256)}
    base = Oracle("", Space(axes, lambda p: p["processes_per_node"] * p["intra_threads"] <= HW_THREADS),
                  {}, lambda p, steps, rng: None, steps=100, warmup_steps=10)

    def speed(p: dict) -> float:
        penalty = 0.93 if p["processes_per_node"] * p["batch_per_process"] > 1024 else 1.0
        return synthetic_throughput(p) / penalty

    truth = {key(p): speed(p) * cliff_works(p) for p in base.points}

    def draw(p: dict, steps: int, rng: random.Random) -> float | None:
        if rng.random() >= cliff_works(p):
            return None
        sigma = 0.02 * math.sqrt(100 / steps)
        bias = 0.03 * math.log2(p["processes_per_node"]) / math.log2(CORES) * 10 / steps
        return speed(p) * (1 - bias) * math.exp(rng.gauss(0.0, sigma))

    return Oracle("synthetic/skylake48-oom", base.space, truth, draw, steps=100, warmup_steps=10,
                  note="synthetic, failures beside the best")


# ---------------------------------------------------------------- the replays

def plan(oracle: Oracle, fraction: float, repetitions: int) -> list:
    """The tuner's plan at ``fraction`` of the exhaustive cost ([] when none fits)."""
    return plan_rounds(len(oracle.points), fraction * len(oracle.points), steps=oracle.steps,
                       warmup_steps=oracle.warmup_steps, min_steps=oracle.min_steps,
                       repetitions=repetitions)


def replay_tuner(oracle: Oracle, rounds: list, seed: int) -> dict | None:
    """The point the tuner reports best after running ``rounds`` against the oracle."""
    if not rounds:
        return None
    rng = random.Random(f"tuner/{oracle.name}/{seed}")
    tuner = Tuner(oracle.space, rounds, seed=seed)
    for r in range(len(rounds)):
        slots = tuner.slots(r)
        tuner.tell(r, {(s.trial, s.repetition): oracle.draw(s.point, s.steps, rng) for s in slots})
    best = tuner.best()
    return None if best is None else best[0]


def replay_random(oracle: Oracle, budget: float, *, repetitions: int, seed: int) -> dict | None:
    """Random search within ``budget`` units: distinct points drawn uniformly, each
    measured ``repetitions`` times at full steps; the best observed mean."""
    rng = random.Random(f"random/{oracle.name}/{seed}")
    count = min(len(oracle.points), int(budget // repetitions + 1e-9))
    if count == 0:
        return None
    chosen = rng.sample(oracle.points, count)
    runs = [[oracle.draw(p, oracle.steps, rng) for _ in range(repetitions)] for p in chosen]
    whole = [i for i in range(count) if None not in runs[i]] or range(count)  # a point with a failed run loses
    return chosen[max(whole, key=lambda i: statistics.fmean(v or 0.0 for v in runs[i]))]


def quantiles(regrets: list[float]) -> tuple[float, float]:
    """(median, 90th percentile) of ``regrets`` (the 90th percentile by linear
    interpolation between order statistics)."""
    ordered = sorted(regrets)
    pos = 0.9 * (len(ordered) - 1)
    low = int(pos)
    p90 = ordered[low] + (ordered[min(low + 1, len(ordered) - 1)] - ordered[low]) * (pos - low)
    return statistics.median(ordered), p90


def evaluate(oracle: Oracle, *, seeds: int, repetitions: int,
             budgets: tuple[float, ...] = BUDGETS) -> list[dict]:
    """One row per budget (fractions of the exhaustive cost): the plan's cost and trials,
    the tuner's and random search's regrets over ``seeds`` seeds (None where the budget buys nothing)."""
    rows = []
    for fraction in budgets:
        rounds = plan(oracle, fraction, repetitions)
        cost = rounds_cost(rounds, steps=oracle.steps, warmup_steps=oracle.warmup_steps)
        found = [replay_tuner(oracle, rounds, seed) for seed in range(seeds)]
        tuner = [None if not rounds else 1.0 if p is None else oracle.regret(p) for p in found]  # none that works
        rand = [oracle.regret(replay_random(oracle, fraction * len(oracle.points),
                                           repetitions=repetitions, seed=seed))
                for seed in range(seeds)]
        rows.append({"space": oracle.name, "points": len(oracle.points), "budget": fraction,
                     "cost": cost / len(oracle.points), "trials": sum(r.trials for r in rounds if r.rung == 0),
                     "tuner": None if None in tuner else quantiles(tuner),
                     "random": None if None in rand else quantiles(rand)})
    return rows


def verdict(rows: list[dict]) -> str:
    """The goal's verdict of one space's rows."""
    row = next(r for r in rows if r["budget"] == GOAL_BUDGET)
    name = row["space"]
    if row["tuner"] is None:
        return f"{name}: goal not testable: no plan fits 25 % of {row['points']} points"
    med, p90 = row["tuner"]
    misses = []
    if med > GOAL_MEDIAN:
        misses.append(f"median {med:.1%} > 3 %")
    if p90 > GOAL_P90:
        misses.append(f"p90 {p90:.1%} > 5 %")
    if row["random"] is None:
        against = "random search buys no point at 25 %"
    elif (med, p90) < row["random"] or (med, p90) == row["random"] == (0.0, 0.0):
        against = ("tuner = random (both exact)" if (med, p90) == row["random"]
                   else "tuner better than random")
    elif (med, p90) == row["random"] or (med <= row["random"][0] and p90 <= row["random"][1]):
        against = "tuner no worse than random"
    else:
        against = "tuner not better than random"
        misses.append(against)
    tiny = (f"; tiny: 25 % of {row['points']} points buys {row['trials']} trial(s), a draw more "
            "than a search" if row["trials"] < 9 else "")
    return (f"{name}: {'MEETS' if not misses else 'MISSES'} the goal at 25 % "
            f"({'; '.join(misses) or against}{tiny})")


def fmt(pair: tuple[float, float] | None) -> str:
    return "       -        " if pair is None else f"{pair[0]:6.1%} / {pair[1]:6.1%}"


def oracles(quick: bool) -> list[Oracle]:
    """Every space of the benchmark (``quick``: the real sweeps and the synthetic surface)."""
    out = sweep_oracles(read_rows(DEFAULT_CSV), "default") if DEFAULT_CSV.exists() else []
    if not quick:
        out += [study_oracle(*s) for s in STUDY_SWEEPS]
    return out + [synthetic_oracle(), cliff_oracle()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="replays per space and budget (default 20)")
    parser.add_argument("--quick", action="store_true", help="skip the study campaigns' spaces")
    parser.add_argument("--repetitions", type=int, default=2,
                        help="repetitions of the top rung and of random search's points (default 2)")
    parser.add_argument("--record", type=Path, metavar="RESULTS",
                        help="write the CSV of space 1 from RESULTS/raw and exit")
    args = parser.parse_args(argv)
    if args.record:
        rows = record_rows(args.record)
        DEFAULT_CSV.parent.mkdir(parents=True, exist_ok=True)
        with open(DEFAULT_CSV, "w", newline="") as fh:
            writer = csv.DictWriter(fh, CSV_FIELDS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        print(f"{DEFAULT_CSV.relative_to(REPO)}: {len(rows)} runs")
        return 0
    print(f"tuner replay: {args.seeds} seeds, top-rung repetitions {args.repetitions}; "
          "regret = 1 - true(found)/true(best), median / p90")
    print(f"{'space':40} {'points':>6} {'budget':>6} {'plan':>5} {'trials':>6}  "
          f"{'tuner med / p90':>16}  {'random med / p90':>16}")
    verdicts = []
    for oracle in oracles(args.quick):
        rows = []
        for fraction in BUDGETS:  # a row printed as soon as it is measured
            (row,) = evaluate(oracle, seeds=args.seeds, repetitions=args.repetitions, budgets=(fraction,))
            rows.append(row)
            print(f"{row['space']:40} {row['points']:6d} {row['budget']:6.0%} {row['cost']:5.0%} "
                  f"{row['trials']:6d}  {fmt(row['tuner'])}  {fmt(row['random'])}", flush=True)
        verdicts.append(f"{verdict(rows)} [{oracle.note}]")
    print()
    print("\n".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
