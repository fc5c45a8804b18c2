"""Slurm submission speed: how fast archbench gets N short measurement jobs into Slurm,
against a bare ``sbatch`` loop, on the local two-node cluster (scripts/slurm_cluster.sh),
as a ratio measured in one run.

archbench: ``snakemake --profile profiles/slurm-test --jobs N`` on a generated campaign of
N measurements (the STREAM kernel in TensorFlow, 1,024-element arrays, 1 step, 1 CPU each),
each one Slurm job submitted by Snakemake's Slurm executor plugin, in a scratch copy of the
workflow of ``--repo``. ``--jobs N`` lets every measurement be queued at once, as a bare
loop queues them (the test profile's own limit of 4 would make submission wait on
completion).

bare: N ``sbatch --wrap 'sleep 1'`` one after another, asking for what a measurement job
asks (partition, 1 task, 1 CPU, its memory and time limit); run before and after archbench.

For each, from sacct's Submit and End times (whole seconds) of exactly its jobs:

- first job, last job: seconds from the start of the command or loop to the first and
  the last Submit;
- submission rate: N / (last Submit - start of the command or loop), in jobs/s;
- window rate: (N - 1) / (last Submit - first Submit), what one submission costs once
  submitting has begun (archbench's start-up, building its DAG, left out);
- all finished: last End - start.

Ratio: archbench's submission rate / the bare loops' mean (goal >= 0.5). Time to all
finished is not a ratio: measurements run one at a time on a host (the host guard), and both
virtual nodes are this host, so archbench's N measurements take about N times one
measurement's run whatever submits them; the bare jobs sleep 1 s, four at a time.

Which plugin is measured is the one this interpreter imports (printed first). A cluster
this script started is stopped at the end.

    python scripts/bench_submission.py [--jobs 200] [--repo DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_workflow import copy_workflow  # noqa: E402 - scripts/, beside this one

from archbench.plan.campaign import load_campaign_file, raw_path  # noqa: E402
from archbench.plan.jobs import job_resources  # noqa: E402

CLUSTER = Path(__file__).resolve().parent / "slurm_cluster.sh"
GOAL = 0.5
MAX_REPETITIONS = 100  # the schema's limit per configuration
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
            "PREEMPTED", "BOOT_FAIL", "DEADLINE")


def campaign(jobs: int) -> dict:
    """A campaign of at least ``jobs`` measurements on the test cluster: STREAM at 1,024
    elements, 1 step, on 1 CPU, repeated over as few sizes as the repetition limit allows."""
    sizes = math.ceil(jobs / MAX_REPETITIONS)
    return {
        "campaign": "submission",
        "systems": ["testcluster"],
        "system_definitions": {"testcluster": {
            "description": "The local two-node test cluster (scripts/slurm_cluster.sh).",
            "arch": "auto", "nodes": 2, "sockets": 1, "cores_per_socket": 1,
            "memory_per_node_gb": 0.5, "partition": "debug", "runtime_minutes": 10,
            "container_runtime": "none", "launcher": "srun", "vendor_library": "onednn"}},
        "experiments": {"stream": {
            "type": "kernel", "kernels": ["stream"], "sizes": [1024 + 64 * i for i in range(sizes)],
            "workers": [1], "iterations": 1, "warmup_steps": 0, "steps": 1,
            "repetitions": math.ceil(jobs / sizes), "timeout_minutes": 5}},
    }


def cluster_env(repo: Path) -> dict:
    """The environment runs get: the cluster's exports, ``repo``'s archbench first, this
    interpreter's tools first on PATH."""
    exports = subprocess.run(["bash", str(CLUSTER), "env"], capture_output=True, text=True,
                             check=True).stdout
    env = dict(os.environ)
    for line in exports.splitlines():
        if line.startswith("export "):
            key, value = line.removeprefix("export ").split("=", 1)
            env[key] = value.strip("'\"")
    env["PYTHONPATH"] = str(repo)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("TF_USE_LEGACY_KERAS", "1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def sacct_times(job_ids: list[str], env: dict) -> dict[str, dict]:
    """Job id -> Submit, End (epoch seconds; End None while unfinished) and State."""
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", ",".join(job_ids),
                          "-o", "JobID,Submit,End,State"],
                         capture_output=True, text=True, env=env, check=True, timeout=120).stdout
    rows = {}
    for line in out.splitlines():
        job_id, submit, end, state = line.split("|")[:4]
        rows[job_id] = {"submit": epoch(submit), "end": epoch(end),
                        "state": state.split()[0] if state else ""}
    return rows


def epoch(stamp: str) -> float | None:
    """sacct's local-time stamp as epoch seconds (None for Unknown or empty)."""
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def wait_finished(job_ids: list[str], env: dict, timeout: float) -> dict[str, dict]:
    """sacct's times of ``job_ids`` once every one has finished (sacct shows a job a few
    seconds after its submission)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = sacct_times(job_ids, env)
        if len(rows) == len(job_ids) and all(r["state"] in FINISHED and r["end"] for r in rows.values()):
            return rows
        if time.monotonic() > deadline:
            raise SystemExit(f"jobs not finished after {timeout:.0f} s: "
                             f"{sum(r['state'] not in FINISHED for r in rows.values())} of {len(job_ids)}")
        time.sleep(2)


def figures(label: str, start: float, rows: dict[str, dict]) -> dict:
    """Submission rate, window rate and time to all finished of one run's jobs. sacct's
    times are whole seconds: each stands for the middle of its second."""
    submits = sorted(r["submit"] + 0.5 for r in rows.values())
    n = len(submits)
    window = submits[-1] - submits[0]
    last_end = max(r["end"] for r in rows.values()) + 0.5
    return {"label": label, "jobs": n,
            "states": sorted({r["state"] for r in rows.values()}),
            "first_s": submits[0] - start,
            "submitted_s": submits[-1] - start,
            "rate": n / (submits[-1] - start),
            "window_rate": (n - 1) / max(window, 1.0),
            "finished_s": last_end - start}


def bare_loop(jobs: int, request: dict, env: dict, *, logdir: Path, label: str) -> dict:
    """N ``sbatch --wrap 'sleep 1'`` one after another with the measurement's request."""
    name = f"archbench-bare-{uuid.uuid4().hex[:8]}"
    argv = ["sbatch", "--parsable", "--job-name", name, "-p", request["slurm_partition"],
            "-t", str(request["runtime"]), "--mem", str(request["mem_mb"]), "--nodes=1",
            "--ntasks=1", f"--cpus-per-task={request['cpus_per_task']}",
            "--output", str(logdir / "%j.log"), "--wrap", "sleep 1"]
    logdir.mkdir(parents=True, exist_ok=True)
    job_ids = []
    start = time.time()
    for _ in range(jobs):
        out = subprocess.run(argv, capture_output=True, text=True, env=env, check=True,
                             timeout=120).stdout
        job_ids.append(out.strip().split(";")[0])
    return figures(label, start, wait_finished(job_ids, env, timeout=jobs * 30 + 300))


def snakemake(argv: list[str], cwd: Path, env: dict, *, timeout: float) -> tuple[float, str]:
    """Run ``snakemake ARGV`` in ``cwd`` (output to snakemake.log there); its start time
    and output. Fails loudly."""
    log = cwd / "snakemake.log"
    start = time.time()
    with log.open("w") as out:
        proc = subprocess.run([sys.executable, "-m", "snakemake", *argv], cwd=cwd, env=env,
                              stdout=out, stderr=subprocess.STDOUT, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"snakemake failed ({proc.returncode}), see {log}:\n"
                         f"{log.read_text()[-3000:]}")
    return start, log.read_text()


def archbench_run(jobs: int, workdir: Path, env: dict) -> tuple[dict, int]:
    """The campaign's first ``jobs`` measurements through ``snakemake --profile
    profiles/slurm-test --jobs N``; its figures and how many records say ok."""
    records = targets(workdir, jobs)
    start, _ = snakemake([*records, "--profile", "profiles/slurm-test", "--jobs", str(jobs),
                          "--configfile", "submission.yaml"], workdir, env, timeout=jobs * 60 + 900)
    written = [json.loads((workdir / r).read_text()) for r in records]
    job_ids = [str(r["slurm_job_id"]) for r in written]
    if None in (r["slurm_job_id"] for r in written) or len(set(job_ids)) != jobs:
        raise SystemExit(f"expected {jobs} records from {jobs} Slurm jobs, got job ids {job_ids}")
    ok = sum(r["status"] == "ok" for r in written)
    return figures("archbench", start, wait_finished(job_ids, env, timeout=300)), ok


# One rule, N jobs of `sleep 1` with a measurement job's request, nothing of archbench.
BARE_SNAKEFILE = """
rule all:
    input: expand("out/{{i}}.txt", i=range({jobs}))
rule one:
    output: "out/{{i}}.txt"
    resources: {resources}
    shell: "sleep 1; touch {{output}}"
"""


def bare_snakemake(jobs: int, request: dict, env: dict, *, workdir: Path) -> dict:
    """N ``sleep 1`` jobs of a one-rule Snakefile with the measurement's request, through
    the same profile and plugin: what Snakemake and the plugin cost without archbench."""
    workdir.mkdir(parents=True, exist_ok=True)
    keys = ("slurm_partition", "runtime", "mem_mb", "cpus_per_task", "nodes", "tasks")
    resources = ", ".join(f"{key}={request[key]!r}" for key in keys)
    (workdir / "Snakefile").write_text(BARE_SNAKEFILE.format(jobs=jobs, resources=resources))
    profile = workdir.parent / "workflow" / "profiles" / "slurm-test"
    start, log = snakemake(["--profile", str(profile), "--jobs", str(jobs)], workdir, env,
                           timeout=jobs * 30 + 900)
    job_ids = re.findall(r"has been submitted with SLURM jobid (\d+)", log)
    if len(set(job_ids)) != jobs:
        raise SystemExit(f"expected {jobs} Slurm jobs in {workdir}/snakemake.log, found {len(job_ids)}")
    return figures("bare snakemake", start, wait_finished(job_ids, env, timeout=300))


def targets(workdir: Path, jobs: int) -> list[str]:
    """The record paths of the campaign's first ``jobs`` measurements."""
    loaded = load_campaign_file(workdir / "submission.yaml")
    return [f"results/{raw_path(m)}" for m in loaded.measurements[:jobs]]


def measurement_request(workdir: Path) -> dict:
    """The Slurm resources of the campaign's measurement jobs (one value each)."""
    loaded = load_campaign_file(workdir / "submission.yaml")
    m = loaded.measurements[0]
    return job_resources(m, loaded.systems[m["system"]])


def cluster_up() -> bool:
    """Start the local cluster unless it answers; True when this call started it."""
    if subprocess.run(["bash", str(CLUSTER), "status"], capture_output=True).returncode == 0:
        return False
    if os.geteuid() != 0:
        raise SystemExit("no local Slurm cluster answers, and starting one needs root "
                         "(scripts/slurm_cluster.sh up)")
    subprocess.run(["bash", str(CLUSTER), "up"], check=True, timeout=600)
    return True


def others(env: dict) -> int:
    """Jobs of others queued or running on the cluster now (a shared cluster is slower)."""
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, env=env,
                         timeout=60).stdout
    return len(out.split())


def report(runs: list[dict], ok: int, jobs: int) -> float:
    """Print one line per run and the ratio; returns the ratio."""
    print(f"{'':20}{'first job':>11}{'last job':>10}{'jobs/s':>8}{'window jobs/s':>15}"
          f"{'all finished':>14}  states")
    for r in runs:
        print(f"{r['label']:20}{r['first_s']:>9.1f} s{r['submitted_s']:>8.1f} s{r['rate']:>8.2f}"
              f"{r['window_rate']:>15.2f}{r['finished_s']:>12.1f} s  {','.join(r['states'])}")
    bare = [r for r in runs if r["label"].startswith("bare sbatch")]
    ours = next(r for r in runs if r["label"] == "archbench")
    plain = next(r for r in runs if r["label"] == "bare snakemake")
    bare_rate = sum(r["rate"] for r in bare) / len(bare)
    bare_window = sum(r["window_rate"] for r in bare) / len(bare)
    ratio = ours["rate"] / bare_rate
    print("(sacct's times are whole seconds, each taken as the middle of its second: +-0.5 s)")
    print(f"archbench records with status ok: {ok} of {jobs}")
    print(f"ratio archbench / bare sbatch loop submission rate: {ratio:.3g} (goal >= {GOAL}); "
          f"window rates: {ours['window_rate'] / bare_window:.3g}")
    print(f"ratio archbench / bare snakemake submission rate: {ours['rate'] / plain['rate']:.3g}; "
          f"window rates: {ours['window_rate'] / plain['window_rate']:.3g}")
    return ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200, help="measurement jobs (and bare jobs) to submit")
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1],
                        help="checkout whose workflow and archbench are measured")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args(argv)
    if args.jobs < 2:
        parser.error("--jobs must be at least 2")
    print(f"snakemake-executor-plugin-slurm {importlib.metadata.version('snakemake-executor-plugin-slurm')}, "
          f"snakemake {importlib.metadata.version('snakemake')} ({sys.executable}); "
          f"{args.jobs} jobs each")
    started = cluster_up()
    try:
        env = cluster_env(args.repo.resolve())
        with tempfile.TemporaryDirectory(prefix="archbench-submission-") as tmp:
            workdir = copy_workflow(args.repo.resolve(), (args.keep or Path(tmp)) / "workflow")
            (workdir / "submission.yaml").write_text(yaml.safe_dump(campaign(args.jobs), sort_keys=False))
            request = measurement_request(workdir)
            print(f"each job: {request['cpus_per_task']} CPU, {request['mem_mb']} MB, "
                  f"{request['runtime']} min, partition {request['slurm_partition']}; "
                  f"jobs of others on the cluster at the start: {others(env)}", flush=True)
            runs = [bare_loop(args.jobs, request, env, logdir=workdir / "logs/bare", label="bare sbatch loop 1")]
            print(f"bare sbatch loop 1 done: {runs[-1]['submitted_s']:.0f} s to submit", flush=True)
            runs.append(bare_snakemake(args.jobs, request, env, workdir=workdir.parent / "bare"))
            print(f"bare snakemake done: {runs[-1]['submitted_s']:.0f} s to submit", flush=True)
            archbench, ok = archbench_run(args.jobs, workdir, env)
            runs.append(archbench)
            print(f"archbench done: {archbench['submitted_s']:.0f} s to submit", flush=True)
            runs.append(bare_loop(args.jobs, request, env, logdir=workdir / "logs/bare",
                                  label="bare sbatch loop 2"))
            report(runs, ok, args.jobs)
    finally:
        if started:
            subprocess.run(["bash", str(CLUSTER), "down"], capture_output=True, timeout=300)
    return 0


if __name__ == "__main__":
    sys.exit(main())
