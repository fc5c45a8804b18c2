"""Integration: the tiny campaign through `snakemake --profile profiles/slurm-test` on a
real two-node Slurm cluster started by scripts/slurm_cluster.sh (sbatch via the executor
plugin, accounting via slurmdbd). Under CI=true this must run: it fails instead of skipping."""

from __future__ import annotations

import json
import os
import subprocess

import pandas as pd
import pytest
from conftest import REPO, copy_workflow, in_ci, snakemake, tool_env

pytestmark = pytest.mark.slurm
SCRIPT = REPO / "scripts" / "slurm_cluster.sh"


@pytest.fixture(scope="session")
def slurm_env():
    """Bring the local cluster up (idempotent) and return the environment to reach it."""
    reason = None
    if os.geteuid() != 0:
        reason = "starting a local Slurm cluster needs root"
    else:
        up = subprocess.run(["bash", str(SCRIPT), "up"], capture_output=True, text=True, timeout=600)
        if up.returncode != 0:
            reason = f"scripts/slurm_cluster.sh up failed: {up.stderr.strip()[-2000:]}"
    if reason:
        if in_ci():
            pytest.fail(f"CI requires the Slurm integration test: {reason}")
        pytest.skip(reason)
    exports = subprocess.run(["bash", str(SCRIPT), "env"], capture_output=True, text=True,
                             check=True).stdout
    extra = dict(line.removeprefix("export ").split("=", 1) for line in exports.splitlines()
                 if line.startswith("export "))
    return tool_env(**{k: v.strip("'\"") for k, v in extra.items()})


def sacct_job_ids(env: dict) -> set[str]:
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-S", "now-1hour"],
                         capture_output=True, text=True, env=env, check=True, timeout=60).stdout
    return {line.split("|")[0] for line in out.splitlines() if line}


def run_through_slurm(campaign: str, workdir, env: dict, timeout: int):
    """tests/campaigns/<campaign> through `snakemake --profile profiles/slurm-test`."""
    copy_workflow(workdir)
    (workdir / campaign).write_text((REPO / "tests/campaigns" / campaign).read_text())
    snakemake(workdir, "--profile", "profiles/slurm-test", "--configfile", campaign,
              timeout=timeout, env=env)
    return workdir


@pytest.fixture(scope="module")
def slurm_run(slurm_env, tmp_path_factory):
    return run_through_slurm("tiny_slurm.yaml", tmp_path_factory.mktemp("slurm"), slurm_env, 1500)


def test_every_measurement_ran_as_a_slurm_job_seen_by_sacct(slurm_run, slurm_env):
    records = [json.loads(p.read_text()) for p in (slurm_run / "results/raw").rglob("rep*.json")]
    assert len(records) == 4
    assert all(r["status"] == "ok" and r["throughput"] > 0 for r in records), records
    job_ids = {r["slurm_job_id"] for r in records}
    assert None not in job_ids and len(job_ids) == 4
    assert job_ids <= sacct_job_ids(slurm_env)


@pytest.fixture(scope="module")
def two_node_run(slurm_env, tmp_path_factory):
    return run_through_slurm("two_nodes_slurm.yaml", tmp_path_factory.mktemp("slurm2"), slurm_env, 900)


def test_two_node_training_runs_as_one_srun_step_over_both_nodes(two_node_run, slurm_env):
    """Horovod (MPI via PMIx) and MultiWorkerMirroredStrategy over n1 and n2: each one
    Slurm job of two nodes whose srun step's two tasks train together; throughput counts
    both workers' images."""
    records = [json.loads(p.read_text()) for p in (two_node_run / "results/raw").rglob("rep*.json")]
    assert sorted(r["strategy"] for r in records) == ["horovod", "mirrored"]
    for r in records:
        assert r["status"] == "ok", r["reason"]
        assert (r["nodes"], r["workers"], r["global_batch"]) == (2, 2, 8)
        assert r["throughput"] > 0 and r["loss_first"] is not None
        out = subprocess.run(["sacct", "-n", "-P", "-j", r["slurm_job_id"], "-o",
                              "JobID,NNodes,NTasks,State"], capture_output=True, text=True,
                             env=slurm_env, check=True, timeout=60).stdout
        steps = [line.split("|") for line in out.splitlines() if line]
        assert steps[0][1] == "2", out  # the allocation spans both nodes
        # a numbered job step (the launcher's srun, not the batch script): 2 tasks, 2 nodes
        assert any(s[0].split(".")[-1].isdigit() and s[1:] == ["2", "2", "COMPLETED"]
                   for s in steps), out
    table = pd.read_csv(two_node_run / "results/tables/node_scaling.csv")
    assert sorted(table["strategy"]) == ["horovod", "mirrored"] and set(table["nodes"]) == {2}
    by_strategy = {r["strategy"]: r["throughput"] for r in records}
    for row in table.itertuples():
        assert row.img_s == pytest.approx(by_strategy[row.strategy])


def test_tables_have_the_shape_of_a_local_run(slurm_run, tmp_path):
    local = copy_workflow(tmp_path / "local")
    snakemake(local, "--profile", "profiles/local", "--configfile", "tiny.yaml", timeout=900)
    for table in sorted((local / "results/tables").glob("*.csv")):
        ours = pd.read_csv(slurm_run / "results/tables" / table.name) if table.stat().st_size else None
        theirs = pd.read_csv(table) if table.stat().st_size else None
        if theirs is not None:
            assert list(ours.columns) == list(theirs.columns), table.name
            assert ours.shape == theirs.shape, table.name


@pytest.fixture(scope="module")
def placement_run(slurm_env, tmp_path_factory):
    return run_through_slurm("placement_slurm.yaml", tmp_path_factory.mktemp("placement"),
                             slurm_env, 900)


def sacct_job(job_id: str, env: dict) -> dict:
    """The allocation line of one job as sacct shows it (field -> value)."""
    fields = ["JobID", "State", "Constraints", "QOS", "NodeList", "ReqMem", "ReqCPUS", "AllocCPUS"]
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", ",".join(fields)],
                         capture_output=True, text=True, env=env, check=True, timeout=60).stdout
    return dict(zip(fields, out.splitlines()[0].split("|")))


def test_placement_keys_reach_every_job_as_sacct_shows_them(placement_run, slurm_env):
    """constraint, qos, exclude, exclusive and memory of tests/campaigns/placement_slurm.yaml
    on each job: sacct's Constraints, QOS, NodeList (n1 excluded), ReqMem (90 % of 2.5 GiB)
    and, for --exclusive (no sacct field of its own in Slurm 22.05), every CPU of the node
    allocated to a job asking for one."""
    records = [json.loads(p.read_text()) for p in (placement_run / "results/raw").rglob("rep*.json")]
    assert len(records) == 5 and all(r["status"] == "ok" for r in records), records
    node_cpus = subprocess.run(["sinfo", "-h", "-N", "-n", "n1", "-o", "%c"], capture_output=True,
                               text=True, env=slurm_env, check=True, timeout=60).stdout.split()[0]
    for r in records:
        job = sacct_job(r["slurm_job_id"], slurm_env)
        assert (job["State"], job["Constraints"], job["QOS"]) == ("COMPLETED", "bench", "bench"), job
        assert job["ReqMem"] == f"{int(2.5 * 1024 * 0.9)}M", job
        assert (job["ReqCPUS"], job["AllocCPUS"]) == ("1", node_cpus), job
        assert r["slurm_nodes"] == job["NodeList"], (r, job)
        if r["system"] == "placed":
            assert job["NodeList"] == "n2", job


def test_repetitions_kept_on_the_same_nodes_ran_on_the_nodes_of_repetition_0(placement_run, slurm_env):
    records = [json.loads(p.read_text()) for p in (placement_run / "results/raw/pinned").rglob("rep*.json")]
    by_config: dict[str, dict[int, str]] = {}
    for r in records:
        by_config.setdefault(r["config_id"], {})[r["repetition"]] = r["slurm_job_id"]
    assert len(by_config) == 2 and all(sorted(reps) == [0, 1] for reps in by_config.values())
    for reps in by_config.values():
        nodes = [sacct_job(reps[k], slurm_env)["NodeList"] for k in (0, 1)]
        assert nodes[0] == nodes[1], nodes
        # the pin was asked for: repetition 1's job requested repetition 0's node (scontrol
        # keeps finished jobs for MinJobAge = 300 s)
        shown = subprocess.run(["scontrol", "show", "job", "-o", reps[1]], capture_output=True,
                               text=True, env=slurm_env, check=True, timeout=60).stdout
        assert f"ReqNodeList={nodes[0]} " in shown, shown
