"""How much of another process's load moves a measurement beyond its run-to-run noise,
and what the record's ``host_load`` figures read meanwhile (docs/reliability.md, "A busy
machine").

For each framework asked (the small CNN, 2 intra-op threads on every core the machine
gives) this runs the supervisor of one measurement (:func:`archbench.execute.supervisor.
supervise`, worker and lifeline as the workflow runs them) in rounds; each round measures
once quiet and once beside a planted competitor at each ``--loads`` level: a Python
process pinned with ``taskset`` to core 0 that busy-loops that share of every 10 ms
(1 = a whole core). It prints per run the img/s, ``other_cores`` and the flag, and per
level the ratio of its median img/s to the quiet median of the same run, beside the
quiet runs' own spread (max / min).

    python scripts/bench_host_load.py                                  # both frameworks
    python scripts/bench_host_load.py --frameworks pytorch --rounds 5 --loads 0.25 0.5 1
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from archbench.execute.supervisor import supervise
from archbench.plan.campaign import config_id, load_campaign

SYSTEM = {"name": "local", "arch": "x86_64", "nodes": 1, "sockets": 1, "cores_per_socket": 2,
          "threads_per_core": 1, "runtime_minutes": 10, "container_runtime": "none",
          "launcher": "local", "vendor_library": "onednn", "env": {}}
COMPETITOR = ("import time\nd = {duty}\nwhile True:\n    t = time.monotonic()\n"
              "    while time.monotonic() - t < d * 0.01: pass\n    time.sleep((1 - d) * 0.01)\n")


def measurement(framework: str, steps: int, threads: int) -> dict:
    """The small CNN of ``framework`` at ``threads`` threads, ``steps`` measured steps."""
    cfg = {"campaign": "host_load", "systems": ["local"],
           "system_definitions": {"local": {k: v for k, v in SYSTEM.items() if k != "name"}},
           "experiments": {"e": {"type": "thread_scaling", "models": ["small_cnn"],
                                 "framework": [framework], "batch_per_process": [32],
                                 "threads": [threads], "repetitions": 1, "image_size": 32,
                                 "num_classes": 10, "warmup_steps": 5, "steps": steps}}}
    m = load_campaign(cfg).measurements[0]
    m["global_batch"] = m["batch_per_process"] * m["workers"]
    m["config_id"] = config_id(m)
    return m


def run_once(m: dict, duty: float, *, folder: Path, name: str) -> dict:
    """One supervised run beside a competitor of ``duty`` (none at 0)."""
    competitor = None
    if duty > 0:
        competitor = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c",
                                       COMPETITOR.format(duty=duty)])
    try:
        return supervise(m, SYSTEM, output=folder / name / "rep0.json",
                         log_path=folder / name / "w.log")
    finally:
        if competitor:
            competitor.kill()
            competitor.wait()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frameworks", nargs="+", default=["pytorch", "tensorflow"])
    p.add_argument("--loads", nargs="+", type=float, default=[0.25, 0.5, 1.0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for framework in args.frameworks:
            m = measurement(framework, args.steps, args.threads)
            runs: dict[float, list[dict]] = {0.0: [], **{d: [] for d in args.loads}}
            for r in range(args.rounds):
                for duty in runs:
                    record = run_once(m, duty, folder=Path(tmp), name=f"{framework}-{duty}-{r}")
                    load = record.get("host_load") or {}
                    runs[duty].append(record)
                    print(f"{framework} round {r} load {duty:.2f}: {record['status']} "
                          f"{record['throughput'] or float('nan'):.1f} img/s, other_cores "
                          f"{load.get('other_cores')}, host_busy {record.get('host_busy')}", flush=True)
            quiet = [x["throughput"] for x in runs[0.0] if x["throughput"]]
            if not quiet:
                print(f"{framework}: no quiet run succeeded")
                continue
            reference = statistics.median(quiet)
            print(f"{framework}: quiet median {reference:.1f} img/s, spread max/min "
                  f"{max(quiet) / min(quiet):.3f}, other_cores "
                  f"{[x['host_load']['other_cores'] for x in runs[0.0]]}")
            for duty in args.loads:
                values = [x["throughput"] for x in runs[duty] if x["throughput"]]
                if values:
                    print(f"{framework}: load {duty:.2f} core: median / quiet median "
                          f"{statistics.median(values) / reference:.3f}, other_cores "
                          f"{[x['host_load']['other_cores'] for x in runs[duty]]}, flagged "
                          f"{sum(bool(x.get('host_busy')) for x in runs[duty])}/{len(runs[duty])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
