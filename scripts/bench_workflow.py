"""Workflow speed at scale: what archbench adds on top of Snakemake, as ratios measured in
one run against references of the same shape (medians of ``--runs`` interleaved runs).

(1) Planning: ``snakemake -n --profile profiles/slurm`` of a ~10,000-job campaign (the
    BSC 2019 campaign with its repetitions raised until it plans ``--jobs`` jobs), with
    ``--quiet`` and with every job printed, against bare Snakemake dry-running a DAG of
    the same shape: as many jobs, one rule writing the same record paths with the same
    wildcards, logs and resources (constant values), the same profile. Target: <= 1.3x.
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
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from archbench.campaign import load_campaign_file  # noqa: E402

WORKFLOW_PARTS = ("Snakefile", "Makefile", "rules", "scripts", "config", "profiles",
                  "containers", "report", "data")
DRYRUN_TARGET = 1.3
PAPER_TARGET_S = 10.0
CPU_SECONDS: list[float] = []  # of every timed_run, in order
BIG_CAMPAIGN = "config/campaigns/bsc-2019.yaml"

# A bare Snakefile of the same shape as the campaign's DAG: one rule, the same record
# paths, wildcards, logs and resources (constants), and a target rule listing them all.
REFERENCE_SNAKEFILE = '''
import json
PATHS = json.load(open("paths.json"))
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
        nodes=1, tasks=1, cpus_per_task=48, mem_mb=88473, runtime=65,
        slurm_partition="main", slurm_account="", slurm_extra="", measurement_slots=1,
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
    scaled = text.replace("repetitions: 4 ", f"repetitions: {4 * factor} ", 1)
    assert scaled != text, f"{BIG_CAMPAIGN}: its `repetitions: 4` default is gone"
    (workdir / "big.yaml").write_text(scaled)
    return "big.yaml", len(load_campaign_file(workdir / "big.yaml").measurements)


def bench_dryrun(repo: Path, jobs: int, runs: int, *, scratch: Path) -> dict[str, float]:
    env = environment(repo)
    subject = copy_workflow(repo, scratch / "dryrun")
    campaign, measurements = big_campaign(subject, jobs)
    common = ["--profile", "profiles/slurm", "--configfile", campaign]
    counts = job_counts(subject, env, common)
    total = sum(counts.values())
    assert counts["run_measurement"] == measurements, counts

    reference = scratch / "reference"
    reference.mkdir()
    shutil.copytree(subject / "profiles", reference / "profiles")
    (reference / "Snakefile").write_text(REFERENCE_SNAKEFILE)
    records = sorted(f"results/raw/{m['system']}/{m['experiment']}/{m['config_id']}/"
                     f"rep{m['repetition']}.json"
                     for m in load_campaign_file(subject / campaign).measurements)
    padding = [f"results/raw/pad/pad/pad/rep{i}.json" for i in range(total - 1 - len(records))]
    (reference / "paths.json").write_text(json.dumps(records + padding))
    ref_counts = job_counts(reference, env, ["--profile", "profiles/slurm"])
    assert sum(ref_counts.values()) == total, (ref_counts, total)
    print(f"(1) dry run: {total} jobs ({measurements} measurements), reference {total} jobs")

    snakemake = [sys.executable, "-m", "snakemake", "-n"]
    samples: dict[str, list[float]] = {k: [] for k in ("ref_q", "sub_q", "ref_p", "sub_p")}
    cpu: dict[str, list[float]] = {k: [] for k in samples}
    for i in range(runs):
        order = [("ref_q", reference, ["--profile", "profiles/slurm", "--quiet"]),
                 ("sub_q", subject, common + ["--quiet"]),
                 ("ref_p", reference, ["--profile", "profiles/slurm"]),
                 ("sub_p", subject, common)]
        for key, cwd, extra in (order if i % 2 == 0 else order[::-1]):
            samples[key].append(timed_run(snakemake + extra, cwd, env))
            cpu[key].append(CPU_SECONDS[-1])
        print(f"    run {i}: " + "  ".join(f"{k} {v[-1]:.2f} s" for k, v in samples.items()),
              flush=True)
    m, c = medians(samples), medians(cpu)
    ratios = {"quiet": m["sub_q"] / m["ref_q"], "printed": m["sub_p"] / m["ref_p"]}
    for mode, (sub, ref) in (("--quiet", ("sub_q", "ref_q")), ("printed", ("sub_p", "ref_p"))):
        ratio = m[sub] / m[ref]
        print(f"    {mode:8s} archbench {m[sub]:6.2f} s   bare Snakemake {m[ref]:6.2f} s   "
              f"ratio {ratio:4.2f}x   target <= {DRYRUN_TARGET}x: "
              f"{'met' if ratio <= DRYRUN_TARGET else 'NOT met'}   "
              f"(CPU {c[sub]:.2f} s vs {c[ref]:.2f} s: {c[sub] / c[ref]:4.2f}x)")
    return ratios


# --------------------------------------------------------------------- (2) regeneration
def fabricate_default_records(workdir: Path) -> int:
    """A valid ok record at the path of every measurement of the default campaign."""
    from archbench import provenance
    from archbench.record import make_record
    from archbench.run import identity_fields
    host = provenance.host_fields()
    measurements = load_campaign_file(workdir / "config/config.yaml").measurements
    for i, m in enumerate(measurements):
        path = (workdir / "results/raw" / m["system"] / m["experiment"] / m["config_id"]
                / f"rep{m['repetition']}.json")
        unit = "img/s" if m["kind"] == "train" else (
            "GB/s" if m.get("kernel") == "stream" else "GFLOP/s")
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
from archbench.artifacts import make_figure_files, make_table_files, merge_measurements
from archbench.collect import collect, write_table
from archbench.figures import FIGURES
from archbench.published import is_claims_file
from archbench.tables import TABLES
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("dryrun", "paper", "all"), default="all")
    parser.add_argument("--jobs", type=int, default=10_000, help="measurements to plan in (1)")
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs per median")
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1],
                        help="checkout whose workflow and archbench are measured")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    args = parser.parse_args(argv)
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
