"""Slurm submission speed: how fast archbench gets N short measurement jobs into Slurm,
against a bare ``sbatch`` loop, on the local two-node cluster (scripts/slurm_cluster.sh),
as a ratio measured in one run.

archbench: ``snakemake --profile profiles/slurm-test --jobs N`` on a generated campaign of
N measurements (the STREAM kernel in TensorFlow, 1,024-element arrays, 1 step, 1 CPU each),
each one Slurm job submitted by Snakemake's Slurm executor plugin, in a scratch copy of the
workflow of ``--repo``. ``--jobs N`` lets every measurement be queued at once, as a bare
loop queues them (the test profile's own limit of 4 would make submission wait on
completion).

bare loop: N ``sbatch --wrap 'sleep 1'`` one after another, asking for what a measurement
job asks (partition, 1 task, 1 CPU, its memory and time limit); run before and after
archbench. bare snakemake: a one-rule Snakefile of N such jobs through the same profile and
plugin, what Snakemake and the plugin cost without archbench.

A job counts as submitted when its submitter has its Slurm job id: when ``sbatch``
returns in the loop, when Snakemake prints "submitted with SLURM jobid" (read from its
output as it comes). Times are seconds from the start of the loop or command:

- first job, last job: to the first and the last job id;
- submission rate: N / last job, in jobs/s (the ratio's figure);
- window rate: (N - 1) / (last job - first job), what a submission costs once
  submitting has begun (Snakemake's start-up and the DAG left out);
- all finished: to the last End in sacct (whole seconds).

Ratio: archbench's submission rate / the bare loops' mean (goal >= 0.5). Time to all
finished is not a ratio: measurements run one at a time on a host (the host guard), and both
virtual nodes are this host, so archbench's N measurements take about N times one
measurement's run whatever submits them; the bare jobs sleep 1 s, four at a time.

``--scale M`` adds the same three submitters at M jobs, submission only: each one's jobs
are cancelled once all M are in Slurm (Snakemake interrupted cancels its own), since
running M measurements one at a time takes M times a measurement. A local ``sbatch``
against an idle controller takes a few ms, so at N = 200 the start-up of any Snakemake
(about 1.5 s to import it and its plugins) outweighs the submissions; M shows the rate
at a campaign's size (the five studies plan 360 to 4,254 measurements).

Which plugin is measured is the one this interpreter imports (printed first). A cluster
this script started is stopped at the end.

    python scripts/bench_submission.py [--jobs 200] [--scale 1000] [--repo DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_workflow import copy_workflow  # noqa: E402 - scripts/, beside this one

from archbench.plan.campaign import load_campaign_file, raw_path  # noqa: E402
from archbench.plan.submission import job_resources  # noqa: E402

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


def figures(label: str, start: float, stamps: list[float], *, rows: dict[str, dict] | None) -> dict:
    """Submission figures from the times the submitter got each job id (``stamps``); time
    to all finished from sacct's End (whole seconds, the middle of its second), when the
    jobs ran (``rows``)."""
    n = len(stamps)
    first, last = min(stamps) - start, max(stamps) - start
    finished = (max(r["end"] for r in rows.values()) + 0.5 - start) if rows else None
    return {"label": label, "jobs": n, "first_s": first, "submitted_s": last, "rate": n / last,
            "window_rate": (n - 1) / max(last - first, 1e-3), "finished_s": finished,
            "states": sorted({r["state"] for r in rows.values()}) if rows else ["cancelled"]}


def bare_loop(jobs: int, request: dict, env: dict, *, logdir: Path, label: str,
              run: bool) -> dict:
    """N ``sbatch --wrap 'sleep 1'`` one after another with the measurement's request; with
    ``run`` False cancelled once all are submitted."""
    name = f"archbench-bare-{uuid.uuid4().hex[:8]}"
    argv = ["sbatch", "--parsable", "--job-name", name, "-p", request["slurm_partition"],
            "-t", str(request["runtime"]), "--mem", str(request["mem_mb"]), "--nodes=1",
            "--ntasks=1", f"--cpus-per-task={request['cpus_per_task']}",
            "--output", str(logdir / "%j.log"), "--wrap", "sleep 1"]
    logdir.mkdir(parents=True, exist_ok=True)
    job_ids, stamps = [], []
    start = time.time()
    for _ in range(jobs):
        out = subprocess.run(argv, capture_output=True, text=True, env=env, check=True,
                             timeout=120).stdout
        stamps.append(time.time())
        job_ids.append(out.strip().split(";")[0])
    if not run:
        subprocess.run(["scancel", "--name", name], env=env, check=True, timeout=120)
        return figures(label, start, stamps, rows=None)
    return figures(label, start, stamps, rows=wait_finished(job_ids, env, timeout=jobs * 30 + 300))


SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+)")


def snakemake(argv: list[str], cwd: Path, env: dict, *, jobs: int, run: bool,
              timeout: float) -> tuple[float, list[float], list[str]]:
    """Run ``snakemake ARGV`` in ``cwd`` (output to snakemake.log there), stamping each job
    id as Snakemake prints it; with ``run`` False interrupted (Snakemake then cancels its
    jobs) once ``jobs`` are submitted. Its start time, stamps and job ids. Fails loudly."""
    log = cwd / "snakemake.log"
    stamps, job_ids = [], []
    start = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", *argv], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1)
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    with log.open("w") as out:
        for line in proc.stdout:
            out.write(line)
            if found := SUBMITTED.search(line):
                stamps.append(time.time())
                job_ids.append(found.group(1))
                if not run and len(job_ids) == jobs:
                    proc.send_signal(signal.SIGINT)
                    watchdog.cancel()
                    watchdog = threading.Timer(120, proc.kill)  # cancelling takes seconds
                    watchdog.start()
    proc.wait()
    watchdog.cancel()
    if len(set(job_ids)) != jobs or (run and proc.returncode != 0):
        raise SystemExit(f"snakemake exited {proc.returncode} with {len(set(job_ids))} of "
                         f"{jobs} jobs submitted, see {log}:\n{log.read_text()[-3000:]}")
    if not run:  # whatever the interrupted run left queued
        subprocess.run(["scancel", *job_ids], env=env, capture_output=True, timeout=120)
    return start, stamps, job_ids


def archbench_run(jobs: int, workdir: Path, env: dict, *, run: bool) -> tuple[dict, int | None]:
    """The campaign's first ``jobs`` measurements through ``snakemake --profile
    profiles/slurm-test --jobs N``; its figures and, when they ran, how many records say ok."""
    records = targets(workdir, jobs)
    start, stamps, job_ids = snakemake(
        [*records, "--profile", "profiles/slurm-test", "--jobs", str(jobs),
         "--configfile", "submission.yaml"], workdir, env, jobs=jobs, run=run,
        timeout=jobs * 60 + 900)
    if not run:
        return figures("archbench", start, stamps, rows=None), None
    written = [json.loads((workdir / r).read_text()) for r in records]
    if sorted(str(r["slurm_job_id"]) for r in written) != sorted(job_ids):
        raise SystemExit(f"expected {jobs} records of the {jobs} Slurm jobs submitted, got job "
                         f"ids {[r['slurm_job_id'] for r in written]}")
    ok = sum(r["status"] == "ok" for r in written)
    return figures("archbench", start, stamps, rows=wait_finished(job_ids, env, timeout=300)), ok


# One rule, N jobs of `sleep 1` with a measurement job's request, nothing of archbench.
BARE_SNAKEFILE = """
rule all:
    input: expand("out/{{i}}.txt", i=range({jobs}))
rule one:
    output: "out/{{i}}.txt"
    resources: {resources}
    shell: "sleep 1; touch {{output}}"
"""


def bare_snakemake(jobs: int, request: dict, env: dict, *, workdir: Path, run: bool) -> dict:
    """N ``sleep 1`` jobs of a one-rule Snakefile with the measurement's request, through
    the same profile and plugin: what Snakemake and the plugin cost without archbench."""
    workdir.mkdir(parents=True, exist_ok=True)
    keys = ("slurm_partition", "runtime", "mem_mb", "cpus_per_task", "nodes", "tasks")
    resources = ", ".join(f"{key}={request[key]!r}" for key in keys)
    (workdir / "Snakefile").write_text(BARE_SNAKEFILE.format(jobs=jobs, resources=resources))
    profile = workdir.parent / "workflow" / "profiles" / "slurm-test"
    start, stamps, job_ids = snakemake(["--profile", str(profile), "--jobs", str(jobs)],
                                       workdir, env, jobs=jobs, run=run,
                                       timeout=jobs * 30 + 900)
    rows = wait_finished(job_ids, env, timeout=300) if run else None
    return figures("bare snakemake", start, stamps, rows=rows)


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


def report(runs: list[dict], jobs: int, ok: int | None) -> float:
    """Print one line per run and the ratios; returns archbench / bare loop."""
    print(f"\n{jobs} jobs" + ("" if ok is not None else ", submission only (cancelled once submitted)"))
    print(f"{'':20}{'first job':>11}{'last job':>10}{'jobs/s':>8}{'window jobs/s':>15}"
          f"{'all finished':>14}  states")
    for r in runs:
        finished = f"{r['finished_s']:>12.1f} s" if r["finished_s"] is not None else f"{'-':>14}"
        print(f"{r['label']:20}{r['first_s']:>9.2f} s{r['submitted_s']:>8.2f} s{r['rate']:>8.1f}"
              f"{r['window_rate']:>15.1f}{finished}  {','.join(r['states'])}")
    bare = [r for r in runs if r["label"].startswith("bare sbatch")]
    ours = next(r for r in runs if r["label"] == "archbench")
    plain = next(r for r in runs if r["label"] == "bare snakemake")
    bare_rate = sum(r["rate"] for r in bare) / len(bare)
    bare_window = sum(r["window_rate"] for r in bare) / len(bare)
    ratio = ours["rate"] / bare_rate
    if ok is not None:
        print(f"archbench records with status ok: {ok} of {jobs}")
    print(f"ratio archbench / bare sbatch loop submission rate: {ratio:.3g} (goal >= {GOAL}); "
          f"window rates: {ours['window_rate'] / bare_window:.3g}")
    print(f"ratio archbench / bare snakemake submission rate: {ours['rate'] / plain['rate']:.3g}; "
          f"window rates: {ours['window_rate'] / plain['window_rate']:.3g}")
    print(f"ratio bare snakemake / bare sbatch loop submission rate: {plain['rate'] / bare_rate:.3g}",
          flush=True)
    return ratio


def measure(jobs: int, repo: Path, *, scratch: Path, env: dict, run: bool) -> float:
    """The bare loop, bare Snakemake, archbench and the bare loop again at ``jobs`` jobs, in
    a fresh copy of ``repo``'s workflow under ``scratch``; prints them, returns the ratio."""
    workdir = copy_workflow(repo, scratch / "workflow")
    (workdir / "submission.yaml").write_text(yaml.safe_dump(campaign(jobs), sort_keys=False))
    request = measurement_request(workdir)
    print(f"\n{jobs} jobs, each {request['cpus_per_task']} CPU, {request['mem_mb']} MB, "
          f"{request['runtime']} min, partition {request['slurm_partition']}; "
          f"jobs of others on the cluster at the start: {others(env)}", flush=True)
    bare = dict(request=request, env=env, logdir=workdir / "logs/bare", run=run)
    runs = [bare_loop(jobs, label="bare sbatch loop 1", **bare)]
    runs.append(bare_snakemake(jobs, request, env, workdir=scratch / "bare", run=run))
    archbench, ok = archbench_run(jobs, workdir, env, run=run)
    runs.append(archbench)
    runs.append(bare_loop(jobs, label="bare sbatch loop 2", **bare))
    return report(runs, jobs, ok)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200,
                        help="measurement jobs (and bare jobs) to submit and run")
    parser.add_argument("--scale", type=int, default=0,
                        help="also submit this many, cancelled once submitted (0: not)")
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1],
                        help="checkout whose workflow and archbench are measured")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args(argv)
    if args.jobs < 2 or args.scale == 1 or args.scale < 0:
        parser.error("--jobs must be at least 2, --scale 0 or at least 2")
    print(f"snakemake-executor-plugin-slurm {importlib.metadata.version('snakemake-executor-plugin-slurm')}, "
          f"snakemake {importlib.metadata.version('snakemake')} ({sys.executable})")
    started = cluster_up()
    try:
        env = cluster_env(args.repo.resolve())
        with tempfile.TemporaryDirectory(prefix="archbench-submission-") as tmp:
            scratch = args.keep or Path(tmp)
            measure(args.jobs, args.repo.resolve(), scratch=scratch / f"n{args.jobs}", env=env, run=True)
            if args.scale:
                measure(args.scale, args.repo.resolve(), scratch=scratch / f"n{args.scale}", env=env,
                        run=False)
    finally:
        if started:
            subprocess.run(["bash", str(CLUSTER), "down"], capture_output=True, timeout=300)
    return 0


if __name__ == "__main__":
    sys.exit(main())
