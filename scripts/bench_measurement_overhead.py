"""What a measurement costs beyond what it measures, against what no measurement can avoid.

For a few configurations of the default campaign (the small CNN in one process, ResNet-50
at 64 px, the small CNN on 2 Horovod ranks, probing itself or after its sweep's 1-rank run
probed the same per-process settings, a kernel on 2 TensorFlow workers, the small CNN in
PyTorch) this runs the supervisor of repetitions 0 and 1 of one measurement
(``python -m archbench.run``, which runs its worker as the workflow does) and one bare
process, the floor, in the same session:

- overhead = the supervisor's wall time (started to exited, timed here) - the warm-up
  steps after the first - the measured window (the record's ``window_s``; a kernel's
  summed step times). The first step (tracing, primitive creation) counts as overhead:
  the floor has to take it too.
- floor = wall time of one bare process (under the run's launcher for Horovod) that
  imports the framework, builds the same model and its training step (a kernel: its
  workers and its set-up) and runs one step.
- ratio = overhead / floor (goal: at most 1.3).

Both in wall seconds and in CPU seconds (the process tree's, from the kernel's accounting
of the children this script waited for; the window's and warm-up's CPU from the marks of
every process that trained), the latter steadier on a busy machine.

Where the seconds go comes from the phase marks the supervisor, the worker and the floor
write with ``ARCHBENCH_MARKS=1`` (:mod:`archbench.core.marks`), not from estimates.
``--checkout DIR`` (repeatable) runs the supervisor of another checkout too (e.g. a
``git worktree`` of the commit before a change), each configuration in every checkout in
turn, so that their ratios come from the same session and load.

    python scripts/bench_measurement_overhead.py                      # every configuration
    python scripts/bench_measurement_overhead.py --configs small_cnn pytorch --rounds 2
    python scripts/bench_measurement_overhead.py --checkout /tmp/before --checkout .
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from archbench.core.marks import ENV as MARKS_ENV
from archbench.core.marks import mark, read_marks

ROOT = Path(__file__).resolve().parent.parent
TRAIN = {"warmup_steps": 2, "repetitions": 2, "vendor_library": ["on"]}
CONFIGS = {  # name -> one experiment of the default campaign, cut to one configuration
    "small_cnn": {"type": "thread_scaling", "models": ["small_cnn"], "image_size": 32,
                  "num_classes": 10, "threads": [2], "batch_per_process": [32], "steps": 50, **TRAIN},
    "resnet50_64px": {"type": "thread_scaling", "models": ["resnet50"], "image_size": 64,
                      "threads": [2], "batch_per_process": [8], "steps": 5, **TRAIN},
    "horovod_2": {"type": "ppn_sweep", "models": ["small_cnn"], "image_size": 32, "num_classes": 10,
                  "processes_per_node": [2], "batch_per_process": [32], "steps": 50, **TRAIN},
    # the same after its sweep's 1-rank run (untimed, run first) probed its per-process settings
    "horovod_2_after_1": {"type": "ppn_sweep", "models": ["small_cnn"], "image_size": 32,
                          "num_classes": 10, "processes_per_node": [2], "batch_per_process": [32],
                          "steps": 50, "first": {"processes_per_node": [1]}, **TRAIN},
    "kernel_stream_2w": {"type": "kernel", "kernels": ["stream"], "sizes": {"stream": [4194304]},
                         "workers": [2], "iterations": 100, "repetitions": 2},
    "pytorch": {"type": "thread_scaling", "framework": ["pytorch"], "models": ["small_cnn"],
                "image_size": 32, "num_classes": 10, "threads": [1], "batch_per_process": [32],
                "steps": 20, **TRAIN},
}
# phase -> the mark ending it, in the order a measurement passes them (the worker's from
# the process that wrote the record)
PHASES = (
    ("supervisor start (interpreter, imports)", "sup", "supervisor-imported"),
    ("supervisor set-up (spec, host guard)", "sup", "guard-held"),
    ("worker start (lifeline, launcher, interpreter, imports)", "sup|worker", "worker-imported"),
    ("framework import", "worker", "framework-imported"),
    ("model build", "worker", "model-built"),
    ("first step (tracing)", "worker", "first-step"),
    ("waiting for the vendor probe child (TensorFlow, probing)", "worker", "probe-awaited"),
    ("warm-up after the first step", "worker", "warmup"),
    ("measured window", "worker", "window"),
    ("after the window (record fields)", "worker", "record-fields"),
    ("vendor probe", "worker", "vendor-probe"),
    ("record writing", "worker", "record-written"),
    ("worker exit (teardown, lifeline)", "sup", "worker-end"),
    ("supervisor record (checks, writing)", "sup", "record-written"),
)
FLOOR_PHASES = (("interpreter, imports", "floor-imported"), ("framework import", "framework-imported"),
                ("model build", "model-built"), ("first step (tracing)", "first-step"))


def campaign_measurement(name: str, *, first: bool = False) -> tuple[dict, dict] | None:
    """(measurement, the system settings its spec carries) of configuration ``name`` on the
    local system; ``first``: of the run its ``first`` entry says runs before it (None
    without one)."""
    from archbench.plan.campaign import load_campaign
    from archbench.plan.systems import run_settings
    experiment = copy.deepcopy(CONFIGS[name])
    before = experiment.pop("first", None)
    if first:
        if before is None:
            return None
        experiment.update(before)
    campaign = load_campaign({"campaign": "overhead", "systems": ["local"],
                              "experiments": {name: experiment}}, ROOT / "config" / "systems")
    m = campaign.measurements[0]
    return m, run_settings(campaign.systems[m["system"]])


# ----------------------------------------------------------------- the floor (a bare process)
def floor_main(measurement: dict, system: dict) -> None:
    """Import the framework, build the run's model and step, run one step."""
    mark("floor-imported")
    if measurement["kind"] == "kernel":
        from archbench.workloads import kernels
        from archbench.workloads.kernels import cli
        from archbench.workloads.kernels import cluster as workers
        argv = kernels.command_for(measurement, system)[3:] + ["--warmup-steps", "0", "--steps", "1"]
        job = cli.parse_args(argv)
        cluster = workers.start(job.workers, threads=job.threads, mode=job.cluster_mode)
        import tensorflow  # noqa: F401 - what the worker imports after its cluster
        mark("framework-imported")
        kernels.KERNELS[job.kernel].run(cluster, job)  # set-up, then its one step
        mark("first-step")
        if cluster.mode != "inprocess":
            cluster.close()
            workers.flush_and_exit(0, None)
        return
    from archbench.workloads.training import benchmark, settings
    config = benchmark.parse_args([*settings.planned_argv(measurement), "--output", os.devnull])
    if config.framework == "pytorch":
        from archbench.workloads.training.pytorch import backends, loop, models
        torch = loop.configure_torch(config)
        mark("framework-imported")
        device = torch.device("cpu")
        backend = backends.make_backend(torch, config, device)
        model = models.build_model(config.model, config.image_size, config.num_classes).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=config.learning_rate)
        backend.start(model)
        model, optimizer = backend.wrap(model, optimizer)
        step = backend.make_step(model, optimizer, torch.nn.functional.cross_entropy)
        batch = loop.synthetic_batch(torch, config, device, shard=backend.rank)
    else:
        from archbench.workloads.training.tensorflow import backends as tf_backends
        from archbench.workloads.training.tensorflow.models import build_model
        from archbench.workloads.training.tensorflow.step import (
            configure_tensorflow,
            make_train_step,
            synthetic_batch,
        )
        tf = configure_tensorflow(config)
        mark("framework-imported")
        backend = tf_backends.make_backend(tf, config)
        with backend.scope():
            model = build_model(config.model, config.image_size, config.num_classes,
                                data_format=config.data_format)
            step = make_train_step(backend, model, config.learning_rate)
        backend.start(model)
        batch = synthetic_batch(tf, config, backend.rank)
    mark("model-built")
    float(step(*batch))
    mark("first-step")


def floor_argv(measurement: dict, system: dict) -> list[str]:
    """The floor's argv, under the run's launcher (mpirun for Horovod)."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--floor",
            json.dumps({"measurement": measurement, "system": system})]
    if measurement["kind"] == "kernel":
        return argv
    from archbench.workloads.training import strategies
    return strategies.launcher_argv(measurement, system, argv)


# ----------------------------------------------------------------- timing
def environment(checkout: Path, lock: Path) -> dict:
    """The environment of a timed run: ``checkout``'s package first, marks on, a private
    host guard (another user's benchmark would only add its wait)."""
    env = {**os.environ, MARKS_ENV: "1", "ARCHBENCH_HOST_LOCK": str(lock)}
    env["PYTHONPATH"] = os.pathsep.join([str(checkout), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def children_cpu() -> float:
    """CPU seconds of every descendant this process has waited for (and theirs)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(argv: list[str], env: dict, cwd: Path) -> tuple[float, float, float, str]:
    """(started, wall s, CPU s of the process tree, its output) of running argv
    (``started``: time.time(), the marks' clock)."""
    started, t0, cpu0 = time.time(), time.perf_counter(), children_cpu()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:4]}... exited {done.returncode}: {done.stderr[-2000:]}")
    return started, wall, cpu, done.stdout + done.stderr


def floor_run(measurement: dict, system: dict, *, env: dict, cwd: Path) -> dict:
    """Wall and CPU time of one floor process and its phases."""
    started, wall, cpu, text = timed(floor_argv(measurement, system), env, cwd)
    marks = first_marks(read_marks(text))
    phases, before = {}, started
    for label, name in FLOOR_PHASES:
        if name in marks:
            phases[label] = marks[name][0] - before
            before = marks[name][0]
    phases["exit"] = started + wall - before
    return {"wall": wall, "cpu": cpu, "phases": phases}


def first_marks(marks, pid: int | None = None) -> dict[str, tuple[float, float]]:
    """The first (time, CPU s) of each phase mark (of process ``pid`` when given)."""
    out: dict[str, tuple[float, float]] = {}
    for name, when, who, cpu in marks:
        if pid is None or who == pid:
            out.setdefault(name, (when, cpu))
    return out


def settled(marks: dict[str, tuple[float, float]]) -> tuple[float, float] | None:
    """(time, CPU s) where the warm-up after the first step begins: the later of the first
    step and the wait for the vendor probe child; None without a first step."""
    if "first-step" not in marks:
        return None
    return max(marks[n] for n in ("first-step", "probe-awaited") if n in marks)


def measured_cpu(marks) -> tuple[float, float]:
    """(CPU s of the warm-up after the first step, of the window), summed over every
    process that marked them (each rank of a multi-process run)."""
    warmup = window = 0.0
    for pid in {who for _, _, who, _ in marks}:
        own = first_marks(marks, pid)
        if "warmup" in own and "window" in own:
            window += own["window"][1] - own["warmup"][1]
            if (begun := settled(own)) is not None:
                warmup += own["warmup"][1] - begun[1]
    return warmup, window


def measurement_run(measurement: dict, system: dict, *, rep: int, env: dict, results: Path) -> dict:
    """Run repetition ``rep`` through the supervisor; its wall time, overhead and phases."""
    from archbench.core.record import raw_path
    m = {**measurement, "repetition": rep}
    output = results / "results" / "raw" / raw_path(m)
    log = results / "logs" / raw_path(m).replace(".json", ".worker.log")
    output.parent.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    started, wall, cpu, text = timed([sys.executable, "-m", "archbench.run", "--spec",
                                 json.dumps({"measurement": m, "system": system}),
                                      "--output", str(output.relative_to(results)),
                                      "--log", str(log.relative_to(results))], env, results)
    record = json.loads(output.read_text())
    if record["status"] != "ok":
        raise RuntimeError(f"{output}: {record['status']} {record['reason']}")
    sup = first_marks(read_marks(text))
    worker_marks = read_marks(log.read_text())
    writer = next((pid for name, _, pid, _ in worker_marks if name == "record-written"), None)
    if writer is None:
        raise RuntimeError(f"{log}: no record-written mark; its end:\n{log.read_text()[-2000:]}")
    worker = first_marks(worker_marks, writer)
    window = (record["metrics"]["window_s"]["value"] if "window_s" in record["metrics"]
              else sum(record["step_times_s"]))
    begun = settled(worker)  # the warm-up after the first step leaves out the probe's wait
    warmup = worker["warmup"][0] - begun[0] if begun is not None else 0.0
    warmup_cpu, window_cpu = measured_cpu(worker_marks)
    phases, phase_cpu, before, last = {}, {}, started, None
    for label, source, name in PHASES:
        when = (sup if source == "sup" else worker).get(name)
        if when is None:
            continue
        phases[label] = when[0] - before
        if last is not None and last[0] == source:  # CPU of one process between its marks
            phase_cpu[label] = when[1] - last[1]
        before, last = when[0], (source, when[1])
    phases["supervisor exit"] = started + wall - before
    evidence = record.get("vendor_evidence") or {}
    return {"wall": wall, "window": window, "warmup": warmup, "overhead": wall - warmup - window,
            "cpu": cpu, "cpu_overhead": cpu - warmup_cpu - window_cpu,
            "phases": phases, "phase_cpu": phase_cpu, "evidence_source": evidence.get("source"),
            "probed": bool(record.get("vendor_evidence")) and not evidence.get("source")}


# ----------------------------------------------------------------- report
def report(results: dict, checkouts: list[Path]) -> None:
    """Per configuration and checkout: overhead, floor and ratio (medians over rounds), then
    where the seconds of each went."""
    print("\noverhead = supervisor wall - warm-up after the first step - window; "
          "floor = bare process: import, build, one step (medians over rounds); "
          "cpu: the same in CPU seconds of the process trees\n")
    print(f"{'configuration':<18} {'checkout':<14} {'rep':>3} {'wall s':>7} {'warm-up s':>9} "
          f"{'window s':>8} {'overhead s':>10} {'floor s':>7} {'ratio':>6} {'cpu ovh s':>9} "
          f"{'cpu floor':>9} {'cpu ratio':>9}  evidence")
    for name, per in results.items():
        floor = statistics.median(f["wall"] for f in per["floor"])
        floor_cpu = statistics.median(f["cpu"] for f in per["floor"])
        for checkout in checkouts:
            for rep, runs in sorted(per[str(checkout)].items()):
                med = {k: statistics.median(r[k] for r in runs)
                       for k in ("wall", "warmup", "window", "overhead", "cpu_overhead")}
                source = runs[-1]["evidence_source"]
                evidence = (f"from {source}" if source
                            else ("probed" if runs[-1]["probed"] else "none"))
                print(f"{name:<18} {checkout.name[:14]:<14} {rep:>3} {med['wall']:7.1f} "
                      f"{med['warmup']:9.2f} {med['window']:8.2f} {med['overhead']:10.1f} "
                      f"{floor:7.1f} {med['overhead'] / floor:6.2f} {med['cpu_overhead']:9.1f} "
                      f"{floor_cpu:9.1f} {med['cpu_overhead'] / floor_cpu:9.2f}  {evidence}")
    for name, per in results.items():
        print(f"\n{name}: where the seconds go (median wall s over rounds; in brackets the CPU s "
              "of the process in that phase, where one process marks both its ends)")
        columns = [(str(c), rep) for c in checkouts for rep in sorted(per[str(c)])]
        labels = [label for label, _, _ in PHASES] + ["supervisor exit"]
        header = "".join(f"{Path(c).name[:10] + ' r' + str(rep):>18}" for c, rep in columns)
        print(f"  {'phase':<58}{header}")
        for label in labels:
            cells = []
            for c, rep in columns:
                values = [r["phases"][label] for r in per[c][rep] if label in r["phases"]]
                cpus = [r["phase_cpu"][label] for r in per[c][rep] if label in r.get("phase_cpu", {})]
                cpu = f" ({statistics.median(cpus):5.2f})" if cpus else " " * 8
                cells.append(f"{statistics.median(values):10.2f}{cpu}" if values else f"{'-':>18}")
            print(f"  {label:<58}{''.join(cells)}")
        floor_labels = [label for label, _ in FLOOR_PHASES] + ["exit"]
        print("  floor: " + ", ".join(
            f"{label} {statistics.median(f['phases'].get(label, 0.0) for f in per['floor']):.2f}"
            for label in floor_labels)
            + f"; wall {statistics.median(f['wall'] for f in per['floor']):.2f}"
            + f", CPU {statistics.median(f['cpu'] for f in per['floor']):.2f}")


def main() -> None:
    """CLI entry point (``--floor SPEC``: be the floor process)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    p.add_argument("--rounds", type=int, default=1, help="runs of each configuration (medians reported)")
    p.add_argument("--checkout", type=Path, action="append", default=None,
                   help="a checkout whose supervisor to time (repeatable; default this one)")
    p.add_argument("--json", type=Path, default=None, help="also write every timing here")
    p.add_argument("--floor", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.floor:
        spec = json.loads(args.floor)
        floor_main(spec["measurement"], spec["system"])
        return
    checkouts = [c.resolve() for c in (args.checkout or [ROOT])]
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="archbench-overhead-") as tmp:
        tmp = Path(tmp)
        for round_ in range(args.rounds):
            for name in args.configs:
                measurement, system = campaign_measurement(name)
                per = results.setdefault(name, {"floor": []})
                order = checkouts if round_ % 2 == 0 else checkouts[::-1]
                for i, checkout in enumerate(order):
                    env = environment(checkout, tmp / "host.lock")
                    work = tmp / f"{name}-{round_}-{i}"
                    first = campaign_measurement(name, first=True)
                    if first is not None:  # untimed: its record is there before rep 0 runs
                        measurement_run(*first, rep=0, env=env, results=work)
                    for rep in (0, 1):  # rep 1 finds rep 0's record beside it
                        run = measurement_run(measurement, system, rep=rep, env=env, results=work)
                        per.setdefault(str(checkout), {}).setdefault(rep, []).append(run)
                        print(f"{name} {checkout.name} rep{rep}: wall {run['wall']:.1f} s, "
                              f"overhead {run['overhead']:.1f} s, CPU overhead {run['cpu_overhead']:.1f} s",
                              file=sys.stderr, flush=True)
                per["floor"].append(floor_run(measurement, system, env=environment(ROOT, tmp / "host.lock"),
                                                cwd=tmp))
                print(f"{name} floor: {per['floor'][-1]['wall']:.1f} s", file=sys.stderr, flush=True)
    report(results, checkouts)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
