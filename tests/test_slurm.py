"""Integration: the tiny campaign through `snakemake --profile profiles/slurm-test` on a
real two-node Slurm cluster started by scripts/slurm_cluster.sh (sbatch via the executor
plugin, accounting via slurmdbd). Under CI=true this must run: it fails instead of skipping."""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest
from conftest import REPO, copy_workflow, snakemake

from archbench.plan.campaign import load_campaign_file, raw_path
from archbench.plan.submission import job_resources

pytestmark = pytest.mark.slurm


def sacct_job_ids(env: dict) -> set[str]:
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-S", "now-1hour"],
                         capture_output=True, text=True, env=env, check=True, timeout=60).stdout
    return {line.split("|")[0] for line in out.splitlines() if line}


def run_through_slurm(campaign: str, workdir, env: dict, timeout: int, targets=()):
    """tests/campaigns/<campaign> through `snakemake --profile profiles/slurm-test`
    (every output, or only ``targets``)."""
    copy_workflow(workdir)
    (workdir / campaign).write_text((REPO / "tests/campaigns" / campaign).read_text())
    snakemake(workdir, *targets, "--profile", "profiles/slurm-test", "--configfile", campaign,
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
    """Horovod (MPI via PMIx) and MultiWorkerMirroredStrategy in TensorFlow, Horovod and
    DDP in PyTorch, over n1 and n2: each one Slurm job of two nodes whose srun step's two
    tasks train together; throughput counts both workers' images."""
    records = [json.loads(p.read_text()) for p in (two_node_run / "results/raw").rglob("rep*.json")]
    assert sorted((r["framework"], r["strategy"]) for r in records) == [
        ("pytorch", "ddp"), ("pytorch", "horovod"), ("tensorflow", "horovod"), ("tensorflow", "mirrored")]
    for r in records:  # a failure shows its worker's log (a rare one must be diagnosable)
        assert r["status"] == "ok", (r["reason"], (two_node_run / r["log_path"]).read_text()[-6000:])
        assert (r["nodes"], r["workers"], r["global_batch"]) == (2, 2, 8)
        if r["framework"] == "pytorch":  # the two replicas agree after every step
            assert r["metrics"]["replica_weight_spread"]["value"] == 0.0
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
    assert sorted(zip(table["framework"], table["strategy"])) == sorted(
        (r["framework"], r["strategy"]) for r in records) and set(table["nodes"]) == {2}
    by_strategy = {(r["framework"], r["strategy"]): r["throughput"] for r in records}
    for row in table.itertuples():
        assert row.img_s == pytest.approx(by_strategy[row.framework, row.strategy])


@pytest.fixture(scope="module")
def batch_run(slurm_env, tmp_path_factory):
    # the records (collected in measurements.csv, a local job) and the plan, no tables
    return run_through_slurm("batch_slurm.yaml", tmp_path_factory.mktemp("batch"), slurm_env, 900,
                             targets=("results/tables/measurements.csv",
                                      "results/plan/batch-slurm.md"))


def sacct_allocations(job_ids: set[str], env: dict) -> dict[str, dict]:
    """Job id -> its allocation's sacct fields (time limit in minutes, CPUs, memory, nodes)."""
    out = subprocess.run(["sacct", "-n", "-X", "-P", "--noconvert", "-j", ",".join(sorted(job_ids)),
                          "-o", "JobID,TimelimitRaw,ReqCPUS,ReqMem,NNodes,State"],
                         capture_output=True, text=True, env=env, check=True, timeout=60).stdout
    rows = [line.split("|") for line in out.splitlines() if line]
    return {r[0]: {"minutes": int(r[1]), "cpus": int(r[2]), "mem": r[3], "nodes": int(r[4]),
                   "state": r[5]} for r in rows}


def test_a_batch_runs_its_measurements_one_after_another_in_one_node_sized_job(batch_run, slurm_env):
    """measurements_per_job 3: five measurements in two Slurm jobs, each asking for one member's node,
    CPUs and memory and the sum of its members' time limits; every measurement its own
    record, the one that ran out of time recorded as such beside ok ones of its batch."""
    campaign = load_campaign_file(batch_run / "batch_slurm.yaml")
    requests = {f"results/{raw_path(m)}": job_resources(m, campaign.systems[m["system"]])
                for m in campaign.measurements}
    limits = {p: r["runtime"] for p, r in requests.items()}  # timeout_minutes + RUNTIME_MARGIN_MIN
    memory = {r["mem_mb"] for r in requests.values()}  # the system's, one per node
    assert len(memory) == 1
    paths = sorted((batch_run / "results/raw").rglob("rep*.json"))
    records = [json.loads(p.read_text()) for p in paths]
    for path, record in zip(paths, records):
        record["limit"] = limits[str(path.relative_to(batch_run))]
    assert len(records) == 5
    by_status = sorted((r["experiment"], r["status"]) for r in records)
    assert by_status == [("threads", "ok")] * 4 + [("too_short", "timeout")], by_status
    assert all(r["throughput"] > 0 for r in records if r["status"] == "ok")
    jobs: dict[str, list[dict]] = {}
    for r in records:
        jobs.setdefault(r["slurm_job_id"], []).append(r)
    assert None not in jobs and sorted(len(m) for m in jobs.values()) == [2, 3]
    assert set(jobs) <= sacct_job_ids(slurm_env)
    allocations = sacct_allocations(set(jobs), slurm_env)
    for job_id, members in jobs.items():
        alloc = allocations[job_id]
        assert alloc["state"] == "COMPLETED", alloc
        assert alloc["minutes"] == sum(m["limit"] for m in members), alloc
        # one member's request (2 CPUs of a node, the system's memory), not the members' sum
        assert (alloc["nodes"], alloc["cpus"]) == (1, 2), alloc
        assert alloc["mem"] in (f"{min(memory)}M", f"{min(memory)}Mn"), alloc
    # one after another: the members' runs (start to record) never overlap
    for members in jobs.values():
        spans = sorted((m["start_time"], m["end_time"]) for m in members)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans
    plan = pd.read_csv(batch_run / "results/plan/batch-slurm.csv")
    assert (plan["measurements"].sum(), plan["jobs"].sum()) == (5, 2)


@pytest.fixture(scope="module")
def ps_run(slurm_env, tmp_path_factory):
    return run_through_slurm("ps_slurm.yaml", tmp_path_factory.mktemp("slurm-ps"), slurm_env, 900)


def sacct_steps(job_id: str, env: dict) -> list[list[str]]:
    """(JobID, NNodes, NTasks, State) of a job and its steps, as sacct reports them."""
    out = subprocess.run(["sacct", "-n", "-P", "-j", job_id, "-o", "JobID,NNodes,NTasks,State"],
                         capture_output=True, text=True, env=env, check=True, timeout=60).stdout
    return [line.split("|") for line in out.splitlines() if line]


def task_nodes(record: dict, workdir) -> dict[str, str]:
    """Each task's Slurm node, as the task logged it ("archbench.train: worker:0 on node n1")."""
    log = (workdir / record["log_path"]).read_text()  # relative to the workflow directory
    return dict(line.split(": ", 1)[1].split(" on node ") for line in log.splitlines()
                if line.startswith("archbench.train: ") and " on node " in line)


def test_synchronous_parameter_servers_run_one_worker_per_node(ps_run, slurm_env):
    """1 PS + 2 workers: one Slurm job of both nodes, one srun step of 3 tasks; each node
    runs one worker, the PS beside one of them; throughput counts both workers' images.
    1 worker + 1 PS on a node of its own: a job of 2 nodes, the PS alone on the second."""
    records = {r["experiment"]: r for r in (json.loads(p.read_text()) for p in
                                            (ps_run / "results/raw").rglob("rep*.json"))}
    assert sorted(records) == ["ps", "ps_own_node"]
    r = records["ps"]
    assert r["status"] == "ok", r["reason"]
    assert (r["strategy"], r["variable_update"], r["parameter_servers"]) == (
        "parameter_server", "parameter_server", 1)
    assert (r["nodes"], r["workers"], r["global_batch"]) == (2, 2, 8)
    assert r["metrics"]["images"]["value"] == 2 * 4 * 2
    assert r["throughput"] == pytest.approx(16 / r["metrics"]["window_s"]["value"])
    steps = sacct_steps(r["slurm_job_id"], slurm_env)
    assert steps[0][1] == "2", steps
    assert any(s[0].split(".")[-1].isdigit() and s[1:] == ["2", "3", "COMPLETED"]
               for s in steps), steps
    placed = task_nodes(r, ps_run)
    assert sorted(placed) == ["ps:0", "worker:0", "worker:1"], placed
    assert placed["worker:0"] != placed["worker:1"]
    assert placed["ps:0"] in (placed["worker:0"], placed["worker:1"])

    own = records["ps_own_node"]
    assert own["status"] == "ok", own["reason"]
    assert (own["variable_update"], own["nodes"], own["workers"]) == ("distributed_replicated", 1, 1)
    assert own["metrics"]["parameter_server_only_hosts"]["value"] == 0  # both nodes: one host
    steps = sacct_steps(own["slurm_job_id"], slurm_env)
    assert steps[0][1] == "2", steps  # the plan asked a node for the PS
    assert any(s[0].split(".")[-1].isdigit() and s[1:] == ["2", "2", "COMPLETED"]
               for s in steps), steps
    placed = task_nodes(own, ps_run)
    assert sorted(placed) == ["ps:0", "worker:0"] and placed["ps:0"] != placed["worker:0"], placed


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
