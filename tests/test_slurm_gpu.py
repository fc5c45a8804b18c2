"""Integration: GPU requests on the local Slurm cluster, whose two nodes declare 2 GPUs each
as generic resources but have none (scripts/slurm_cluster.sh). tests/campaigns/gpu_slurm.yaml
through `snakemake --profile profiles/slurm-test`: sacct shows each GPU job's gres/gpu and
its tasks (one per GPU), every rank logs the GPU it bound from Slurm's CUDA_VISIBLE_DEVICES
by its local rank, each GPU measurement is recorded as the failure "no GPU visible to
TensorFlow", and the CPU measurement beside them succeeds."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from test_slurm import run_through_slurm, sacct_steps

from archbench.workloads.gpu import NO_GPU

pytestmark = pytest.mark.slurm
BOUND = re.compile(r"^archbench\.workloads\.gpu: local rank (\d+) bound to CUDA_VISIBLE_DEVICES=(\S*)$", re.M)


@pytest.fixture(scope="module")
def gpu_run(slurm_env, tmp_path_factory):
    return run_through_slurm("gpu_slurm.yaml", tmp_path_factory.mktemp("gpu"), slurm_env, 900,
                             targets=("results/tables/measurements.csv",))


def sacct_tres(job_id: str, env: dict) -> tuple[str, str]:
    """(ReqTRES, AllocTRES) of a job's allocation."""
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "ReqTRES,AllocTRES"],
                         capture_output=True, text=True, env=env, check=True, timeout=60).stdout
    req, alloc = out.splitlines()[0].split("|")
    return req, alloc


def test_gpu_jobs_ask_one_task_per_gpu_and_fail_for_want_of_a_gpu(gpu_run, slurm_env):
    records = [json.loads(p.read_text()) for p in (gpu_run / "results/raw").rglob("rep*.json")]
    by_experiment = {}
    for r in records:
        by_experiment.setdefault(r["experiment"], []).append(r)
    assert sorted((e, len(rs)) for e, rs in by_experiment.items()) == [
        ("cpu", 1), ("gpus", 3), ("one_gpu", 1)]
    cpu = by_experiment["cpu"][0]
    assert cpu["status"] == "ok" and cpu["throughput"] > 0 and cpu["device"] in (None, "cpu"), cpu
    for r in by_experiment["gpus"] + by_experiment["one_gpu"]:
        ranks = r["gpus"]
        assert (r["device"], r["status"]) == ("gpu", "failed"), r
        assert NO_GPU in r["reason"] and r["throughput"] is None and r["devices"] == [], r
        # the request: gres/gpu = the job's GPUs (gpus_per_node on each node), as asked
        req, alloc = sacct_tres(r["slurm_job_id"], slurm_env)
        assert f"gres/gpu={ranks}" in req and f"gres/gpu={ranks}" in alloc, (req, alloc)
        assert f"node={r['nodes']}" in alloc, alloc
        # the ranks: one Slurm step task per GPU (the launcher's srun, or the job's one task)
        steps = sacct_steps(r["slurm_job_id"], slurm_env)
        assert any(s[0].split(".")[-1].isdigit() and s[1:3] == [str(r["nodes"]), str(ranks)]
                   for s in steps), steps
        # every rank bound the GPU of its local rank from what Slurm set on its node
        bound = BOUND.findall((gpu_run / r["log_path"]).read_text())
        assert len(bound) == ranks, bound
        per_rank = dict(bound)
        assert len(per_rank) == r["gpus_per_node"] and len(set(per_rank.values())) == len(per_rank)
        assert all(bound.count(b) == r["nodes"] for b in bound), bound  # same on every node
        assert re.search(rf"{re.escape(NO_GPU)} \(CUDA_VISIBLE_DEVICES='\d'\)", r["reason"]), r


def test_slurm_sets_the_gpus_of_the_node_and_each_rank_binds_its_own(slurm_env):
    """What a rank inherits from Slurm on a node with --gres=gpu:2 and two tasks: both see
    CUDA_VISIBLE_DEVICES=0,1 and their SLURM_LOCALID; archbench.workloads.gpu.bind_gpu keeps the
    entry of its local rank."""
    code = ("import os; from archbench.workloads import gpu; seen = os.environ['CUDA_VISIBLE_DEVICES']; "
            "print(os.environ['SLURM_LOCALID'], seen, gpu.bind_gpu('gpu'))")
    out = subprocess.run(["srun", "--nodes=1", "--ntasks=2", "--cpus-per-task=1", "--gres=gpu:2",
                          "--mem=500", "python", "-c", code],
                         capture_output=True, text=True, env=slurm_env, check=True, timeout=120)
    assert sorted(out.stdout.split("\n")[:-1]) == ["0 0,1 0", "1 0,1 1"], out
    assert sorted(BOUND.findall(out.stderr)) == [("0", "0"), ("1", "1")], out.stderr
