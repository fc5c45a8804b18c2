"""Workflow speed at scale: what archbench adds on top of Snakemake, as ratios measured in
one run against references of the same shape (medians of ``--runs`` interleaved runs).

(1) Planning: ``snakemake -n --profile profiles/slurm`` of a ~10,000-job campaign (the
    BSC 2019 campaign with its repetitions raised until it plans ``--jobs`` jobs), with
    ``--quiet`` and with every job printed, against bare Snakemake workflows with the same
    profile and one rule with the same resources as archbench's measurement jobs, job for
    job (checked against both printed dry runs): constants where every job has one value,
    functions of the job where values differ, as archbench gives them. "same job count":
    as many jobs, writing the same record paths with the same wildcards and logs, all
    inputs of one target (a star); "same DAG": the same jobs with the same edges (what
    ``snakemake --dag`` of the campaign shows), each job's inputs given by a function
    looking them up. Target: <= 1.3x, in wall and in CPU seconds (wall time includes
    waits the two share, such as the Slurm plugin asking a controller for its settings:
    see slurm_wait). Printed for comparison, not judged: the same job count with every
    job the first job's resources as constants, which spares Snakemake evaluating a
    function per resource and job when it prints the job.
(2) Regeneration: ``make paper`` (every table, figure and the HTML report from the
    records on disk) on fabricated records of the default campaign, and on a campaign of
    imports alone (the default campaign with no record on disk, every published table and
    claims file under ``imports:``), against collecting, merging and building the same
    tables and figures in one Python process. Target: ``make paper`` <= 10 s.

Each part runs in a scratch copy of the workflow of ``--repo`` (default: this checkout),
whose ``archbench`` the runs import, so one checkout's script measures another's code.

    python scripts/bench_workflow.py [--part dryrun|paper|all] [--jobs 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archbench.plan.campaign import load_campaign_file, raw_path  # noqa: E402
from archbench.plan.submission import RESOURCE_DEFAULTS, job_resources  # noqa: E402
from archbench.workloads.kernels import KERNELS  # noqa: E402

WORKFLOW_PARTS = ("Snakefile", "Makefile", "rules", "scripts", "config", "profiles",
                  "containers", "report", "data")
DRYRUN_TARGET = 1.3
PAPER_TARGET_S = 10.0
CPU_SECONDS: list[float] = []  # of every timed_run, in order
BIG_CAMPAIGN = "config/campaigns/bsc-2019.yaml"

# Bare Snakefiles of the campaign's shape. Each has one rule with the same resources as
# archbench's measurement jobs: the keys whose value is the same for every job as constants,
# the others as functions of the job looking its value up (resources.json), declaring their
# parameters once as archbench's do (Snakemake's overwrite_function_params).
REFERENCE_HEADER = '''
import inspect, json
from snakemake.common import overwrite_function_params
RESOURCES = json.load(open("resources.json"))
def per_job(func):
    overwrite_function_params(func, inspect.signature(func).parameters)
    return func
def job_resource(key, name):
    return per_job(lambda wildcards: RESOURCES["per_job"][name(wildcards)][key])
'''

# "same job count": the same record paths, wildcards and logs, all inputs of one target.
REFERENCE_SNAKEFILE = REFERENCE_HEADER + '''
PATHS = json.load(open("paths.json"))
def record(wildcards):
    return f"results/raw/{wildcards.system}/{wildcards.experiment}/{wildcards.config_id}/rep{wildcards.rep}.json"
wildcard_constraints:
    system=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    experiment=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    config_id=r"[^/]+",
    rep=r"\\d+",
rule all:
    input: PATHS
rule run_measurement:
    output: "results/raw/{system}/{experiment}/{config_id}/rep{rep}.json"
    log:
        supervisor="logs/run_measurement/{system}/{experiment}/{config_id}/rep{rep}.log",
        worker="logs/run_measurement/{system}/{experiment}/{config_id}/rep{rep}.worker.log",
    threads: 1
    resources:
        **RESOURCES["constant"], **{k: job_resource(k, record) for k in RESOURCES["varying"]},
    shell: "touch {output}"
'''


def copy_workflow(repo: Path, dest: Path) -> Path:
    """The workflow files of ``repo`` (no results) copied into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for part in WORKFLOW_PARTS:
        src = repo / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
        elif src.exists():
            shutil.copy2(src, dest / part)
    return dest


def environment(repo: Path) -> dict:
    """The environment runs get: ``repo``'s archbench first, this interpreter's tools."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(repo)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("TF_USE_LEGACY_KERAS", "1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def timed_run(argv: list[str], cwd: Path, env: dict) -> float:
    """Wall seconds of one command (output to a file, as a redirected log); fails loudly.
    Its CPU seconds (user + system, its children's included) go to CPU_SECONDS: on a
    machine other work loads, they vary less than wall time."""
    with tempfile.TemporaryFile() as out:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        CPU_SECONDS.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            out.seek(0)
            tail = out.read().decode(errors="replace")[-3000:]
            raise SystemExit(f"{' '.join(argv)} failed in {cwd} ({proc.returncode}):\n{tail}")
    return elapsed


# "same DAG": the campaign's jobs and edges (dag.json), each job's inputs looked up.
SAME_DAG_SNAKEFILE = REFERENCE_HEADER + '''
JOBS = json.load(open("dag.json"))  # (not DAG: the name is Snakemake's)
def path(wildcards):
    return wildcards.path
wildcard_constraints:
    path=r".+",
rule all:
    input: JOBS["target"]
rule job:
    input: per_job(lambda wildcards: JOBS["inputs"][wildcards.path])
    output: "{path}"
    log: "logs/{path}.log"
    threads: 1
    resources:
        **RESOURCES["constant"], **{k: job_resource(k, path) for k in RESOURCES["varying"]},
    shell: "touch {output}"
'''


def dag_of(cwd: Path, env: dict, args: list[str]) -> dict:
    """The jobs and edges of a dry run (``snakemake --dag``) as {"target": the inputs of
    rule all, "inputs": {job: its input jobs}}, a job named by its rule and number (the
    labels leave out wildcards of long ones)."""
    dot = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--dag", *args], cwd=cwd,
                         env=env, capture_output=True, text=True, check=True).stdout
    names, inputs, top = {}, {}, None
    for node, rule in re.findall(r'^\s*(\d+)\[label = "(\w+)', dot, re.M):
        top = node if rule == "all" else top
        names[node] = f"results/jobs/{rule}/{node}.json"
    for a, b in re.findall(r"^\s*(\d+) -> (\d+)", dot, re.M):
        inputs.setdefault(b, []).append(names[a])
    return {"target": inputs.pop(top),
            "inputs": {names[n]: inputs.get(n, []) for n in names if n != top}}


def job_counts(cwd: Path, env: dict, args: list[str]) -> dict[str, int]:
    """Jobs per rule of a dry run (Snakemake's job stats)."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", *args, "--quiet", "rules"],
                          cwd=cwd, env=env, capture_output=True, text=True, check=True)
    words = [line.split() for line in proc.stdout.splitlines()]
    return {w[0]: int(w[1]) for w in words if len(w) == 2 and w[1].isdigit() and w[0] != "total"}


def medians(samples: dict[str, list[float]]) -> dict[str, float]:
    return {k: statistics.median(v) for k, v in samples.items()}


# --------------------------------------------------------------------- (1) planning
def big_campaign(workdir: Path, jobs: int) -> tuple[str, int]:
    """The BSC 2019 campaign with repetitions raised to plan about ``jobs`` measurements
    (its experiments' own repetitions too); (file name, measurements)."""
    text = (workdir / BIG_CAMPAIGN).read_text()
    base = len(load_campaign_file(workdir / BIG_CAMPAIGN).measurements)
    factor = max(1, round(jobs / base))
    assert "repetitions: 4 " in text, f"{BIG_CAMPAIGN}: its `repetitions: 4` default is gone"
    scaled = text.replace("repetitions: 4 ", f"repetitions: {4 * factor} ", 1)
    (workdir / "big.yaml").write_text(scaled)
    return "big.yaml", len(load_campaign_file(workdir / "big.yaml").measurements)


def measurement_resources(campaign) -> dict[str, dict]:
    """Record path -> the resources archbench gives that measurement's job."""
    return {f"results/{raw_path(m)}":
            {**RESOURCE_DEFAULTS, **job_resources(m, campaign.systems[m["system"]])}
            for m in campaign.measurements}


def write_resources(dest: Path, jobs: dict[str, dict], names: list[str]) -> list[str]:
    """resources.json of a reference: the keys whose value is the same for every job as
    constants, the others per job, each of ``names`` given the values of a job of ``jobs``
    (its own when it is one of them, else theirs in turn: the same values as often);
    returns the keys given per job."""
    values = list(jobs.values())
    keys = sorted(set().union(*values))
    varying = [k for k in keys if any(v.get(k) != values[0].get(k) for v in values)]
    per_job = {name: {k: jobs.get(name, values[i % len(values)]).get(k) for k in varying}
               for i, name in enumerate(names)}
    constant = {k: values[0][k] for k in keys if k not in varying and k in values[0]}
    (dest / "resources.json").write_text(json.dumps(
        {"constant": constant, "varying": varying, "per_job": per_job}))
    return varying


def printed_resources(cwd: Path, env: dict, args: list[str]) -> dict[str, list[str]]:
    """Output file -> the resources a printed dry run shows for its job (sorted)."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", *args], cwd=cwd, env=env,
                         capture_output=True, text=True, check=True).stdout
    found = re.findall(r"^    output: (\S+)\n(?:    .*\n)*?    resources: (.*)$", out, re.M)
    return {path: sorted(line.split(", ")) for path, line in found}


def bench_dryrun(repo: Path, jobs: int, runs: int, *, scratch: Path) -> dict[str, float]:
    env = environment(repo)
    subject = copy_workflow(repo, scratch / "dryrun")
    campaign, measurements = big_campaign(subject, jobs)
    common = ["--profile", "profiles/slurm", "--configfile", campaign]
    counts = job_counts(subject, env, common)
    total = sum(counts.values())
    assert counts["run_measurement"] == measurements, counts
    resources = measurement_resources(load_campaign_file(subject / campaign))

    records = sorted(resources)
    padding = [f"results/raw/pad/pad/pad/rep{i}.json" for i in range(total - 1 - len(records))]
    dag = dag_of(subject, env, common)
    edges = len(dag["target"]) + sum(map(len, dag["inputs"].values()))
    star, same = scratch / "reference", scratch / "same-dag"  # same job count, same DAG
    for ref, snakefile, names in ((star, REFERENCE_SNAKEFILE, records + padding),
                                  (same, SAME_DAG_SNAKEFILE, sorted(dag["inputs"]))):
        ref.mkdir()
        shutil.copytree(subject / "profiles", ref / "profiles")
        (ref / "Snakefile").write_text(snakefile)
        varying = write_resources(ref, resources, names)
    (star / "paths.json").write_text(json.dumps(records + padding))
    (same / "dag.json").write_text(json.dumps(dag))
    for ref in (star, same):
        ref_counts = job_counts(ref, env, ["--profile", "profiles/slurm"])
        assert sum(ref_counts.values()) == total, (ref, ref_counts, total)
    # the same resources, job for job, as Snakemake prints them
    ours, theirs = (printed_resources(subject, env, common),
                    printed_resources(star, env, ["--profile", "profiles/slurm"]))
    differ = [p for p in records if ours.get(p) != theirs.get(p)]
    assert not differ, f"{differ[0]}: archbench {ours.get(differ[0])!r}, reference {theirs.get(differ[0])!r}"
    # for comparison: the same job count, every job the first one's resources (constants)
    constant = scratch / "constant"
    shutil.copytree(star, constant)
    write_resources(constant, {records[0]: resources[records[0]]}, records + padding)
    print(f"(1) dry run: {total} jobs ({measurements} measurements, {edges} edges); "
          f"references of {total} jobs, one rule with the same resources (per job: "
          f"{', '.join(varying)}): same job count ({len(records) + len(padding)} edges), "
          f"same DAG ({edges} edges); and for comparison the same job count with every job "
          f"the first one's resources (constants)")

    snakemake = [sys.executable, "-m", "snakemake", "-n"]
    refs = {"count": ("same job count", star), "dag": ("same DAG", same),
            "const": ("constants", constant)}
    cases = [(f"{ref}_{mode}", cwd, args + ([] if mode == "p" else ["--quiet"]))
             for mode in ("q", "p")
             for ref, cwd, args in (("sub", subject, common),
                                    *((r, d, ["--profile", "profiles/slurm"])
                                      for r, (_, d) in refs.items()))]
    samples: dict[str, list[float]] = {key: [] for key, _, _ in cases}
    cpu: dict[str, list[float]] = {k: [] for k in samples}
    for i in range(runs):
        for key, cwd, extra in (cases if i % 2 == 0 else cases[::-1]):
            samples[key].append(timed_run(snakemake + extra, cwd, env))
            cpu[key].append(CPU_SECONDS[-1])
        print(f"    run {i}: " + "  ".join(f"{k} {v[-1]:.2f} s" for k, v in samples.items()),
              flush=True)
    m, c = medians(samples), medians(cpu)
    ratios = {}
    for mode, label in (("q", "--quiet"), ("p", "printed")):
        for ref, (name, _) in refs.items():
            sub, base = f"sub_{mode}", f"{ref}_{mode}"
            wall, cpu_ratio = m[sub] / m[base], c[sub] / c[base]
            verdict = (f"target <= {DRYRUN_TARGET}x: "
                       f"{'met' if max(wall, cpu_ratio) <= DRYRUN_TARGET else 'NOT met'}")
            if ref == "const":
                verdict = "(for comparison)"
            else:
                ratios[f"{label}, {name}"] = max(wall, cpu_ratio)
            print(f"    {label:8s} vs {name:14s}: archbench {m[sub]:6.2f} s (CPU {c[sub]:5.2f} s)"
                  f"   bare Snakemake {m[base]:6.2f} s (CPU {c[base]:5.2f} s)   ratio "
                  f"{wall:4.2f}x wall, {cpu_ratio:4.2f}x CPU   {verdict}")
    return ratios


# --------------------------------------------------------------------- (2) regeneration
def fabricate_default_records(workdir: Path) -> int:
    """A valid ok record at the path of every measurement of the default campaign."""
    from archbench.core import provenance
    from archbench.core.record import make_record
    from archbench.execute.supervisor import identity_fields
    host = provenance.host_fields()
    measurements = load_campaign_file(workdir / "config/config.yaml").measurements
    for i, m in enumerate(measurements):
        path = (workdir / "results/raw" / m["system"] / m["experiment"] / m["config_id"]
                / f"rep{m['repetition']}.json")
        unit = "img/s" if m["kind"] == "train" else KERNELS[m["kernel"]].unit
        record = make_record(**{**host, **identity_fields(m, Path("worker.log")),
                                "env": {**host["env"], **m.get("env", {})},
                                "start_time": "2024-01-01T00:00:00Z",
                                "end_time": "2024-01-01T00:01:00Z", "status": "ok",
                                "reason": "", "throughput": 10.0 + (i * 37 % 101) / 10,
                                "throughput_unit": unit})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return len(measurements)


def imports_only(workdir: Path) -> list[str]:
    """Make the default campaign list every shipped import file; return them."""
    imports = sorted(str(p.relative_to(workdir)) for p in (workdir / "data/published").rglob("*.csv"))
    config = workdir / "config/config.yaml"
    config.write_text(config.read_text() + f"\nimports: {json.dumps(imports)}\n")
    return imports


# the same artifacts in one Python process: collect, merge, every table and figure
ONE_PROCESS = '''
import sys, yaml
from pathlib import Path
import matplotlib
matplotlib.use("Agg")
from archbench.results.artifacts import make_figure_files, make_table_files, merge_measurements
from archbench.results.collect import collect, write_table
from archbench.results.figures import FIGURES
from archbench.results.claims import is_claims_file
from archbench.results.tables import TABLES
out = Path(sys.argv[1]); out.mkdir()
config = yaml.safe_load(open("config/config.yaml"))
imports = config.get("imports", [])
frame, errors = collect(sorted(str(p) for p in Path("results/raw").rglob("rep*.json")))
write_table(frame, out / "measurements.csv", out / "measurements.parquet")
merge_measurements(out / "measurements.csv", [p for p in imports if not is_claims_file(p)],
                   output=out / "measurements_all.csv")
for name, spec in TABLES.items():
    if spec.uses_published and not imports:
        continue
    make_table_files(name, out / "measurements_all.csv",
                     outputs={f: str(out / f"{name}.{f}") for f in ("csv", "md", "tex")},
                     published=imports if spec.uses_published else ())
for name in FIGURES:
    make_figure_files(name, out / "measurements_all.csv",
                      [str(out / f"{name}.{f}") for f in ("png", "pdf", "svg")])
'''


def bench_paper(repo: Path, runs: int, scratch: Path) -> dict[str, float]:
    env = environment(repo)
    (scratch / "one_process.py").write_text(ONE_PROCESS)
    cases = {}
    default = copy_workflow(repo, scratch / "paper-default")
    cases["default campaign"] = (default, f"{fabricate_default_records(default)} records")
    imports = copy_workflow(repo, scratch / "paper-imports")
    cases["imports alone"] = (imports, f"{len(imports_only(imports))} import files, no record")
    make = ["make", "-o", "setup", "paper"]  # -o setup: the environment exists already
    ratios = {}
    for label, (workdir, what) in cases.items():
        (workdir / ".venv").symlink_to(Path(sys.prefix))
        timed_run(make, workdir, env)  # a first build: the rerun then regenerates
        samples: dict[str, list[float]] = {"make": [], "one": []}
        cpu: dict[str, list[float]] = {"make": [], "one": []}
        for i in range(runs):
            shutil.rmtree(workdir / "one", ignore_errors=True)
            order = [("make", make), ("one", [sys.executable, str(scratch / "one_process.py"), "one"])]
            for key, argv in (order if i % 2 == 0 else order[::-1]):
                samples[key].append(timed_run(argv, workdir, env))
                cpu[key].append(CPU_SECONDS[-1])
        built = sorted(p.name for p in (workdir / "one").iterdir() if p.suffix != ".parquet")
        made = [p for p in built if (workdir / "results/tables" / p).exists()
                or (workdir / "results/figures" / p).exists()]
        assert made == built, sorted(set(built) - set(made))
        m = medians(samples)
        ratios[label] = m["make"] / m["one"]
        print(f"(2) paper, {label} ({what}, {len(built)} artifacts):")
        print(f"    make paper {m['make']:6.2f} s   one Python process {m['one']:6.2f} s   "
              f"ratio {ratios[label]:4.2f}x   target make paper <= {PAPER_TARGET_S:.0f} s: "
              f"{'met' if m['make'] <= PAPER_TARGET_S else 'NOT met'}   "
              f"(runs: make {', '.join(f'{t:.1f}' for t in samples['make'])};"
              f" one {', '.join(f'{t:.1f}' for t in samples['one'])};"
              f" CPU make {statistics.median(cpu['make']):.1f} s,"
              f" one {statistics.median(cpu['one']):.1f} s)", flush=True)
    return ratios


def slurm_wait() -> float:
    """Seconds ``scontrol show config`` takes here (0 without Slurm): the Slurm plugin
    runs it whenever Snakemake loads it, i.e. in every snakemake call, and waits for it up
    to 10 s when Slurm is installed but no controller answers."""
    if not shutil.which("scontrol"):
        return 0.0
    start = time.perf_counter()
    try:
        subprocess.run(["scontrol", "show", "config"], capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        pass
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("dryrun", "paper", "all"), default="all")
    parser.add_argument("--jobs", type=int, default=10_000, help="measurements to plan in (1)")
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs per median")
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1],
                        help="checkout whose workflow and archbench are measured")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args(argv)
    wait = slurm_wait()
    if wait > 1:
        print(f"note: `scontrol show config` took {wait:.1f} s here (Slurm installed, no "
              "controller answering): every snakemake call below waits that long while the "
              "Slurm plugin loads; start the cluster (scripts/slurm_cluster.sh up) or stop "
              "it with `down` to measure without it")
    with tempfile.TemporaryDirectory(prefix="archbench-bench-") as tmp:
        scratch = args.keep or Path(tmp)
        scratch.mkdir(parents=True, exist_ok=True)
        if args.part in ("dryrun", "all"):
            bench_dryrun(args.repo.resolve(), args.jobs, args.runs, scratch=scratch)
        if args.part in ("paper", "all"):
            bench_paper(args.repo.resolve(), args.runs, scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
