"""Workflow tests: dry runs of every shipped campaign, bad input stopped before any job,
and a really executed tiny campaign whose tables are checked against its raw records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, snakemake

from archbench.core.record import raw_path
from archbench.execute.specfiles import digest
from archbench.plan.campaign import load_campaign_file

pytestmark = pytest.mark.workflow

CAMPAIGNS = sorted((REPO / "config" / "campaigns").glob("*.yaml"))


def test_dry_run_of_the_default_campaign(workflow_copy):
    proc = snakemake(workflow_copy, "-n", "--profile", "profiles/local", "--quiet", "rules")
    expected = len(load_campaign_file(workflow_copy / "config" / "config.yaml").measurements)
    counts = dict(line.split()[:2] for line in proc.stdout.splitlines()
                  if len(line.split()) == 2 and line.split()[1].isdigit())
    assert int(counts["run_measurement"]) == expected
    assert not (workflow_copy / "results").exists()  # a dry run writes nothing


@pytest.mark.parametrize("campaign", CAMPAIGNS, ids=[c.stem for c in CAMPAIGNS])
def test_dry_run_of_every_shipped_campaign_with_the_slurm_profile(workflow_copy, campaign):
    proc = snakemake(workflow_copy, "-n", "--profile", "profiles/slurm", "--configfile",
                     str(campaign), "--quiet", "rules")
    counts = dict(line.split()[:2] for line in proc.stdout.splitlines()
                  if len(line.split()) == 2 and line.split()[1].isdigit())
    # one job per measurement; tests/studies/ check each study's measurements against its paper
    assert int(counts["run_measurement"]) == len(load_campaign_file(campaign).measurements)


@pytest.mark.parametrize("edit, key", [
    (("threads: [1, 2]", "threads: [-1, 2]"), "experiments.threads.threads.0"),
    (("models: [small_cnn]", "models: [lenet9]"), "experiments.threads.models.0"),
    (("batch_per_process: [4]", "batch_per_process: four"), "experiments.threads.batch_per_process"),
    (("batch_per_process: [4]", "batch_sizes: [4]"),
     "tiny.yaml: experiments.threads.batch_sizes: renamed batch_per_process"),
    (("steps: 2", "steps: 2\n  color: blue"), "tiny.yaml: defaults.color: not a key of thread_scaling"),
])
def test_invalid_campaign_stops_before_any_job_with_one_line(workflow_copy, edit, key):
    tiny = workflow_copy / "tiny.yaml"
    tiny.write_text(tiny.read_text().replace(*edit))
    proc = snakemake(workflow_copy, "--profile", "profiles/local", "--configfile", "tiny.yaml",
                     check=False, timeout=120)
    assert proc.returncode != 0
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("archbench:")]
    assert len(errors) == 1 and key in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (workflow_copy / "results").exists()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny campaign, really executed once for this module."""
    from conftest import copy_workflow
    workdir = copy_workflow(tmp_path_factory.mktemp("tiny"))
    snakemake(workdir, "--profile", "profiles/local", "--configfile", "tiny.yaml", timeout=900)
    return workdir


def raw_records(workdir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((workdir / "results/raw").rglob("rep*.json"))]


def test_tiny_campaign_produces_one_ok_record_per_measurement(tiny_run):
    records = raw_records(tiny_run)
    expected = load_campaign_file(tiny_run / "tiny.yaml").measurements
    assert len(records) == len(expected) == 4
    assert all(r["status"] == "ok" and r["throughput"] > 0 for r in records)
    assert {(r["intra_threads"], r["vendor_library_enabled"]) for r in records} == {
        (1, True), (1, False), (2, True), (2, False)}


def test_measurements_table_equals_the_raw_records(tiny_run):
    table = pd.read_csv(tiny_run / "results/tables/measurements.csv")
    parquet = pd.read_parquet(tiny_run / "results/tables/measurements.parquet")
    records = {r["run_id"]: r for r in raw_records(tiny_run)}
    assert len(table) == len(parquet) == len(records)
    for row in table.itertuples():
        assert row.throughput == pytest.approx(records[row.run_id]["throughput"])
        assert row.status == "ok"
    assert (tiny_run / "results/tables/invalid_records.txt").read_text() == ""


def test_each_record_ran_the_spec_its_run_planned(tiny_run):
    """The supervisor takes its spec from results/specs/<campaign>/<digest>.json, a file named
    by the digest of its bytes; the printed command names the file, not a spec; a dry run
    writes none."""
    spec_dir = tiny_run / "results/specs/tiny"
    specs = {p.stem: json.loads(p.read_text()) for p in spec_dir.iterdir()}
    assert all(digest((spec_dir / f"{d}.json").read_text()) == d for d in specs)
    paths = sorted(str(p.relative_to(tiny_run)) for p in (tiny_run / "results/raw").rglob("rep*.json"))
    by_record = {f"results/{raw_path(s['measurement'])}": (d, s) for d, s in specs.items()}
    assert sorted(by_record) == paths
    for path in paths:
        record, (_, spec) = json.loads((tiny_run / path).read_text()), by_record[path]
        assert record["config_id"] == spec["measurement"]["config_id"]
        assert record["intra_threads"] == spec["measurement"]["intra_threads"]
        assert record["repetition"] == spec["measurement"]["repetition"]
    written = {p.name: p.stat().st_mtime_ns for p in spec_dir.iterdir()}
    proc = snakemake(tiny_run, "-n", "-p", "-f", paths[0], "--profile", "profiles/local",
                     "--configfile", "tiny.yaml")
    name = by_record[paths[0]][0]
    assert f"archbench.run --spec-file results/specs/tiny/{name}.json --output {paths[0]}" in proc.stdout
    assert '"measurement"' not in proc.stdout
    assert {p.name: p.stat().st_mtime_ns for p in spec_dir.iterdir()} == written  # dry run: untouched


def test_plan_lists_every_job(tiny_run):
    plan = pd.read_csv(tiny_run / "results/plan/tiny.csv")
    assert plan["jobs"].sum() == 4


def test_second_invocation_reruns_nothing(tiny_run):
    proc = snakemake(tiny_run, "-n", "--profile", "profiles/local", "--configfile", "tiny.yaml")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_deleted_and_corrupt_records_are_rerun_and_recollected(tiny_run, tmp_path):
    """A record removed by hand and one truncated on disk: the next run quarantines the
    corrupt one, reruns both measurements and nothing else, and recollects the table."""
    import shutil
    workdir = shutil.copytree(tiny_run, tmp_path / "copy", symlinks=True)
    records = sorted((workdir / "results/raw").rglob("rep*.json"))
    deleted, corrupt = records[0], records[1]
    untouched = {p: p.read_bytes() for p in records[2:]}
    deleted.unlink()
    truncated = corrupt.read_text()[:50]
    corrupt.write_text(truncated)
    proc = snakemake(workdir, "--profile", "profiles/local", "--configfile", "tiny.yaml", timeout=900)
    log = proc.stdout + proc.stderr
    assert log.count("rule run_measurement") == 2, log[-3000:]
    assert "invalid record moved to" in log
    quarantined = [p for p in (workdir / "results/quarantine").rglob("rep*.json.*")
                   if p.suffix != ".reason"]
    assert [p.read_text() for p in quarantined] == [truncated]
    assert json.loads(deleted.read_text())["status"] == "ok"
    assert json.loads(corrupt.read_text())["status"] == "ok"
    assert {p: p.read_bytes() for p in untouched} == untouched
    table = pd.read_csv(workdir / "results/tables/measurements.csv")
    assert sorted(table["run_id"]) == sorted(r["run_id"] for r in raw_records(workdir))


def test_derived_tables_follow_the_raw_records(tiny_run):
    """Thread efficiency and vendor speedup recomputed here from the raw records."""
    records = raw_records(tiny_run)
    p = {(r["intra_threads"], r["vendor_library_enabled"]): r["throughput"] for r in records}
    eff = pd.read_csv(tiny_run / "results/tables/thread_efficiency.csv")
    for row in eff.itertuples():
        vendor = str(row.vendor_library_enabled) in ("True", "true", "on")
        expected = p[(row.threads, vendor)] / (row.threads * p[(1, vendor)])
        assert row.efficiency == pytest.approx(expected, rel=1e-6)
    assert len(eff) == 4
    speedup = pd.read_csv(tiny_run / "results/tables/vendor_speedup.csv")
    for row in speedup.itertuples():
        assert row.speedup == pytest.approx(p[(row.intra_threads, True)] / p[(row.intra_threads, False)], rel=1e-6)
    assert len(speedup) == 2


def test_every_table_and_figure_file_is_produced(tiny_run):
    from archbench.results.figures import FIGURES
    from archbench.results.tables import TABLES
    for name in TABLES:
        for ext in ("csv", "md", "tex"):
            path = tiny_run / f"results/tables/{name}.{ext}"
            if TABLES[name].uses_published:  # only for a campaign with published values
                assert not path.exists(), name
            else:
                assert path.stat().st_size > 0, name
    for name in FIGURES:
        for ext, magic in (("png", b"\x89PNG"), ("pdf", b"%PDF"), ("svg", b"<?xml")):
            assert (tiny_run / f"results/figures/{name}.{ext}").read_bytes().startswith(magic)


def test_paper_regenerates_byte_identical_artifacts_without_benchmarks(tiny_run):
    def artifacts():
        return {p.relative_to(tiny_run): p.read_bytes() for d in ("results/tables", "results/figures")
                for p in sorted((tiny_run / d).iterdir()) if p.suffix != ".parquet"}
    before = artifacts()
    raw_before = {p: p.stat().st_mtime_ns for p in (tiny_run / "results/raw").rglob("*.json")}
    for _ in range(2):
        proc = snakemake(tiny_run, "paper", "--profile", "profiles/local", "--configfile", "tiny.yaml",
                         "--config", "regenerate_only=True", "--forcerun", "collect_measurements",
                         timeout=900)
        assert "run_measurement" not in proc.stdout + proc.stderr
        assert artifacts() == before
    assert {p: p.stat().st_mtime_ns for p in raw_before} == raw_before


def test_paper_without_regenerate_only_says_how_and_runs_nothing(tiny_run):
    proc = snakemake(tiny_run, "paper", "--profile", "profiles/local", "--configfile", "tiny.yaml",
                     "-n", check=False)
    assert proc.returncode != 0 and "regenerate_only=True" in proc.stdout + proc.stderr


def test_editing_an_import_sidecar_rebuilds_the_merged_table(workflow_copy):
    imports = workflow_copy / "data/published/cesga-2018"
    # the throughputs alone: a claims file must name configurations the campaign runs
    (workflow_copy / "imp.yaml").write_text(
        (workflow_copy / "tiny.yaml").read_text()
        + "imports: [data/published/cesga-2018/cesga-2018-table3.csv]\n")
    snakemake(workflow_copy, "results/tables/measurements_all.csv",
              "results/tables/vs_published.csv", "--profile", "profiles/local",
              "--configfile", "imp.yaml", "--config", "regenerate_only=True", timeout=300)
    merged = pd.read_csv(workflow_copy / "results/tables/measurements_all.csv")
    assert (merged["source"] == "CESGA 2018, Table 3").sum() == 9
    compared = pd.read_csv(workflow_copy / "results/tables/vs_published.csv")
    # every published value listed once; the tiny campaign measured none of them
    assert len(compared) == 9
    assert set(compared["status"]) == {"not measured"}
    sidecar = imports / "cesga-2018-table3.yaml"
    sidecar.write_text(sidecar.read_text() + "\n# edited\n")
    proc = snakemake(workflow_copy, "results/tables/measurements_all.csv", "--profile",
                     "profiles/local", "--configfile", "imp.yaml", "--config",
                     "regenerate_only=True", "-n", timeout=300)
    assert "merge_measurements" in proc.stdout + proc.stderr


def test_report_is_built(tiny_run):
    snakemake(tiny_run, "--profile", "profiles/local", "--configfile", "tiny.yaml",
              "--report", "results/report.html", timeout=600)
    html = (tiny_run / "results/report.html").read_text(errors="replace")
    assert "thread_scaling.png" in html and len(html) > 10_000


def test_best_takes_the_layout_of_the_finished_hybrid_sweep(workflow_copy):
    (workflow_copy / "best.yaml").write_text((REPO / "tests/campaigns/best.yaml").read_text())
    snakemake(workflow_copy, "results/tables/measurements.csv", "--profile", "profiles/local",
              "--configfile", "best.yaml", timeout=900)
    records = raw_records(workflow_copy)
    hybrid = [r for r in records if r["experiment"] == "layout"]
    scaling = [r for r in records if r["experiment"] == "scaling"]
    assert len(hybrid) == 2 and len(scaling) == 1 and all(r["status"] == "ok" for r in records)
    winner = max(hybrid, key=lambda r: r["throughput"])
    assert (scaling[0]["processes_per_node"], scaling[0]["intra_threads"]) == (
        winner["processes_per_node"], winner["intra_threads"])


def test_a_valid_record_in_the_wrong_place_is_excluded_then_quarantined_and_rerun(tiny_run, tmp_path):
    """Another run's record copied over a record: `paper` leaves it out (and names it), the
    next run quarantines it with the reason and reruns that measurement alone."""
    import shutil
    workdir = shutil.copytree(tiny_run, tmp_path / "copy", symlinks=True)
    records = sorted((workdir / "results/raw").rglob("rep*.json"))
    source, misplaced = records[0], records[1]
    shutil.copy2(source, misplaced)
    proc = snakemake(workdir, "paper", "--profile", "profiles/local", "--forcerun",
                     "collect_measurements", "--configfile", "tiny.yaml", "--config",
                     "regenerate_only=True", timeout=600)
    assert "Traceback" not in proc.stderr
    invalid = (workdir / "results/tables/invalid_records.txt").read_text()
    assert str(misplaced.relative_to(workdir)) in invalid and "the record of another run" in invalid
    assert len(pd.read_csv(workdir / "results/tables/measurements.csv")) == len(records) - 1

    proc = snakemake(workdir, "--profile", "profiles/local", "--configfile", "tiny.yaml", timeout=900)
    log = proc.stdout + proc.stderr
    assert log.count("rule run_measurement") == 1, log[-3000:]
    reasons = list((workdir / "results/quarantine").rglob("*.reason"))
    assert len(reasons) == 1 and "config_id" in reasons[0].read_text()
    record = json.loads(misplaced.read_text())
    assert record["run_id"] == "/".join(misplaced.parts[-2:]).removesuffix(".json")
    table = pd.read_csv(workdir / "results/tables/measurements.csv")
    assert len(table) == len(records) and table["run_id"].is_unique


def test_nonsense_records_are_excluded_then_quarantined_and_rerun(tiny_run, tmp_path):
    """Records that make no sense: a throughput of 1e30, negative step times and
    throughput, a throughput 3x its images over its window. `paper` leaves them out of the
    table (naming the field), the next run quarantines them with that reason and reruns
    those three measurements alone."""
    import shutil
    workdir = shutil.copytree(tiny_run, tmp_path / "copy", symlinks=True)
    records = sorted((workdir / "results/raw").rglob("rep*.json"))
    edits = [  # (what the reason says, the edit)
        ("throughput: 1e\\+30 is greater than", lambda r: {**r, "throughput": 1e30}),
        ("(throughput|step_times_s/\\d): -[0-9.]+ is less than",
         lambda r: {**r, "throughput": -1781.6, "step_times_s": [-t for t in r["step_times_s"]]}),
        ("throughput: .* is not metrics.images / metrics.window_s",
         lambda r: {**r, "throughput": 3 * r["throughput"]})]
    for path, (_, edit) in zip(records, edits):
        path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    snakemake(workdir, "paper", "--profile", "profiles/local", "--forcerun",
              "collect_measurements", "--configfile", "tiny.yaml", "--config",
              "regenerate_only=True", timeout=600)
    invalid = (workdir / "results/tables/invalid_records.txt").read_text().splitlines()
    assert len(invalid) == 3
    for path, (reason, _), line in zip(records, edits, invalid):
        assert re.match(f"{re.escape(str(path.relative_to(workdir)))}: {reason}", line), line
    table = pd.read_csv(workdir / "results/tables/measurements.csv")
    assert len(table) == len(records) - 3 and table["throughput"].between(0, 1e6).all()

    proc = snakemake(workdir, "--profile", "profiles/local", "--configfile", "tiny.yaml", timeout=900)
    log = proc.stdout + proc.stderr
    assert log.count("rule run_measurement") == 3, log[-3000:]
    reasons = sorted(p.read_text() for p in (workdir / "results/quarantine").rglob("*.reason"))
    assert reasons == sorted(f"{line}\n" for line in invalid)
    table = pd.read_csv(workdir / "results/tables/measurements.csv")
    assert len(table) == len(records) and (table["status"] == "ok").all()
    assert (workdir / "results/tables/invalid_records.txt").read_text() == ""


def test_editing_a_system_reruns_only_what_affects_its_measurements(tiny_run, tmp_path):
    """A system's description is documentation: editing it reruns no measurement (a real
    invocation), only the platform table that prints it. Its cores shape every run:
    editing them reruns each of its measurements."""
    import os
    import shutil
    workdir = shutil.copytree(tiny_run, tmp_path / "copy", symlinks=True)
    # up to date first, whatever earlier tests (`paper`) did to the copied run
    snakemake(workdir, "--profile", "profiles/local", "--configfile", "tiny.yaml", timeout=600)
    system = workdir / "config/systems/local.yaml"
    text = system.read_text()
    edited = text.replace("description: The machine", "description: Edited, the machine")
    assert edited != text
    system.write_text(edited)
    proc = snakemake(workdir, "--profile", "profiles/local", "--configfile", "tiny.yaml", timeout=600)
    log = proc.stdout + proc.stderr
    rerun = {line.split()[-1].rstrip(":") for line in log.splitlines()
             if line.startswith(("rule ", "localrule "))}
    assert rerun == {"make_platform_table", "all"}, log[-3000:]
    assert "Edited, the machine" in (workdir / "results/tables/platform.md").read_text()

    cores = (os.cpu_count() or 1) + 2  # another count than `auto` detects
    system.write_text(edited.replace("cores_per_socket: auto", f"cores_per_socket: {cores}"))
    proc = snakemake(workdir, "-n", "--profile", "profiles/local", "--configfile", "tiny.yaml")
    log = proc.stdout + proc.stderr
    assert log.count("rule run_measurement") == 4, log[-3000:]
    assert "Params have changed" in log


MIXED_RESOURCES = """
campaign: mixed-resources
systems: [plain, placed]
system_definitions:
  plain:
    arch: auto
    sockets: 1
    cores_per_socket: 2
    memory_per_node_gb: 2
    partition: small
  placed:
    arch: auto
    sockets: 1
    cores_per_socket: 4
    memory_per_node_gb: 8
    partition: big
    account: proj
    constraint: bench
    qos: long
    exclude: [n1]
defaults: {repetitions: 1, image_size: 32, num_classes: 10, warmup_steps: 1, steps: 2,
           timeout_minutes: 5, batch_per_process: [4], models: [small_cnn]}
experiments:
  threads:
    type: thread_scaling
    threads: [1, 2]
    vendor_library: ["off"]
"""


def test_every_job_has_the_resources_of_its_measurement(workflow_copy):
    # run_measurement's resources are constants where the campaign has one value and
    # functions where it has several: each printed job must still carry exactly its own
    # measurement's job_resources (a key only the second system has never reaches the first)
    from archbench.plan.campaign import raw_path
    from archbench.plan.submission import job_resources
    (workflow_copy / "mixed.yaml").write_text(MIXED_RESOURCES)
    campaign = load_campaign_file(workflow_copy / "mixed.yaml")
    proc = snakemake(workflow_copy, "-n", "--profile", "profiles/slurm", "--configfile",
                     "mixed.yaml")
    printed = {}
    for block in proc.stdout.split("rule run_measurement:")[1:]:
        block = block.split("\n\n")[0]  # this job's lines alone
        fields = dict(line.strip().split(": ", 1) for line in block.splitlines()
                      if line.startswith("    ") and ": " in line)
        printed[fields["output"]] = dict(kv.split("=", 1) for kv in fields["resources"].split(", "))
    assert len(printed) == len(campaign.measurements) == 4
    own = ("nodes", "tasks", "cpus_per_task", "mem_mb", "runtime", "measurement_slots",
           "slurm_partition", "slurm_account", "constraint", "qos", "slurm_extra", "mpi")
    for m in campaign.measurements:
        expected = {"slurm_partition": "", "slurm_account": "", "slurm_extra": "",
                    **job_resources(m, campaign.systems[m["system"]])}
        got = printed[f"results/{raw_path(m)}"]
        assert {k: v for k, v in got.items() if k in own} == {k: str(v) for k, v in expected.items()}


def test_paper_then_a_normal_run_plans_nothing_new(tiny_run):
    """`paper` collects the records on disk as a normal run does: afterwards a normal dry
    run of the unchanged campaign plans nothing."""
    snakemake(tiny_run, "paper", "--profile", "profiles/local", "--configfile", "tiny.yaml",
              "--config", "regenerate_only=True", "--forcerun", "collect_measurements")
    plan = snakemake(tiny_run, "--profile", "profiles/local", "--configfile", "tiny.yaml", "-n")
    assert "Nothing to be done" in plan.stdout + plan.stderr, plan.stdout[-3000:]
