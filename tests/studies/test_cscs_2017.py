"""The shipped CSCS 2017 campaign runs the paper's experiment matrix (Bugliarello, "Distributed
TensorFlow: a performance evaluation", CSCS 2017): counts per system, and the settings
the paper fixes, written out here from its text (Secs. 5.1-5.3, Tables 1-3) as plain data."""

from __future__ import annotations

import pytest
from conftest import REPO

from archbench.core.hardware import cores_of
from archbench.plan.campaign import load_campaign_file
from archbench.plan.systems import resolve_system

CAMPAIGN = REPO / "config" / "campaigns" / "cscs-2017.yaml"
REPETITIONS = 5  # Sec. 5.1: each test run 5 times
BATCH_PER_GPU = 64  # Sec. 5.3
DATA = ["real", "synthetic"]
# Sec. 5.1, Tables 1-3: both synchronous variable updates tried, the best one reported
VARIABLE_UPDATES = ["distributed_replicated", "parameter_server"]

# Sec. 5.2 and Tables 1-3: GPUs per node and the GPU counts (p2.8xlarge's 1, 2, 4 and 8
# GPUs share one node); every run is a GPU run, one worker process per GPU.
SYSTEMS = {
    "piz-daint": {"experiment": "scaling", "gpus_per_node": 1, "model": "P100",
                  "gpus": [1, 2, 4, 8, 16, 32, 64, 128]},
    "aws-p2-xlarge": {"experiment": "scaling", "gpus_per_node": 1, "model": "K80",
                      "gpus": [1, 2, 4, 8, 16, 32, 64, 128]},
    "aws-p2-8xlarge": {"experiment": "scaling_8gpu", "gpus_per_node": 8, "model": "K80",
                       "gpus": [1, 2, 4, 8, 16, 32, 64, 128]},
}

# Tables 1-3: (system, GPUs) -> parameter servers of the peak (synthetic and real alike).
PAPER_BEST_PS = {
    "piz-daint": {1: 1, 2: 1, 4: 3, 8: 2, 16: 4, 32: 12, 64: 40, 128: 116},
    "aws-p2-xlarge": {1: 1, 2: 2, 4: 4, 8: 8, 16: 12, 32: 32, 64: 64, 128: 128},
    "aws-p2-8xlarge": {1: 1, 2: 1, 4: 1, 8: 1, 16: 1, 32: 3, 64: 8, 128: 16},
}


def ps_sample(workers: int) -> set[int]:
    """PS counts tried with ``workers`` workers. The paper tried "several values ranging
    from 1 to the number of Workers" (Sec. 5.1) without listing them; the sample is the
    powers of two up to the workers, the workers count, and every count a best setting of
    Tables 1-3 used, where it fits."""
    published = {ps for best in PAPER_BEST_PS.values() for ps in best.values()}
    return ({2 ** k for k in range(workers.bit_length()) if 2 ** k <= workers} | {workers}
            | {ps for ps in published if ps <= workers})


def expected_runs(system: str) -> int:
    """One worker per GPU: the PS counts of each size are tried against its GPUs."""
    return (sum(len(ps_sample(g)) for g in SYSTEMS[system]["gpus"]) * len(DATA)
            * len(VARIABLE_UPDATES) * REPETITIONS)


@pytest.fixture(scope="module")
def campaign():
    return load_campaign_file(CAMPAIGN)


def runs(campaign, system: str) -> list[dict]:
    return [m for m in campaign.measurements if m["system"] == system]


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_every_system_runs_the_papers_count(campaign, system):
    ms = runs(campaign, system)
    assert len(ms) == expected_runs(system)
    assert {m["experiment"] for m in ms} == {SYSTEMS[system]["experiment"]}


def test_no_system_beyond_the_papers_three(campaign):
    assert {m["system"] for m in campaign.measurements} == set(SYSTEMS)
    assert len(campaign.measurements) == sum(expected_runs(s) for s in SYSTEMS)


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_systems_have_the_papers_gpus_per_node(system):
    node = resolve_system(system)
    assert node["gpus_per_node"] == SYSTEMS[system]["gpus_per_node"]
    assert SYSTEMS[system]["model"] in node["gpu_model"]
    assert node["nodes"] == max(SYSTEMS[system]["gpus"]) // SYSTEMS[system]["gpus_per_node"]


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_inception_v3_at_64_images_per_gpu(campaign, system):
    for m in runs(campaign, system):
        assert (m["model"], m["image_size"]) == ("inception_v3", 299)
        assert (m["warmup_steps"], m["measured_steps"]) == (10, 100)
        assert m["batch_per_process"] == BATCH_PER_GPU
        assert m["global_batch"] == BATCH_PER_GPU * m["gpus"]  # 64 x GPUs
        assert m["strategy"] == "parameter_server"
        assert m["data_format"] == "NCHW"  # Sec. 5.3


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_gpu_runs_one_worker_per_gpu(campaign, system):
    """Every run asks for GPUs: device gpu, one worker process per GPU, gpus = nodes x GPUs
    per node, the node's cores shared by its workers, a series over GPUs; 1, 2, 4 and 8
    GPUs of a p2.8xlarge share one node, then 8 per node."""
    per_node = SYSTEMS[system]["gpus_per_node"]
    cores = cores_of(resolve_system(system))
    layouts = set()
    for m in runs(campaign, system):
        assert m["device"] == "gpu" and m["scaling_unit"] == "gpus"
        assert m["processes_per_node"] == m["gpus_per_node"] <= per_node
        assert m["gpus"] == m["nodes"] * m["gpus_per_node"] == m["workers"]
        assert m["intra_threads"] == cores // m["gpus_per_node"]
        assert f"_gpu{m['gpus_per_node']}" in m["config_id"]  # before the settings hash
        layouts.add((m["gpus"], m["nodes"], m["gpus_per_node"]))
    assert sorted(layouts) == [(g, -(-g // per_node), min(g, per_node))
                               for g in SYSTEMS[system]["gpus"]]


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_both_synchronous_updates_with_the_servers_beside_the_workers(campaign, system):
    """Sec. 5.3: PSs run on the workers' nodes; each (size, PS count, data) runs both
    variable updates, greedy variable placement (tf_cnn_benchmarks' distributed setter)."""
    tried: dict[tuple, set] = {}
    for m in runs(campaign, system):
        assert m["tuning"].get("ps_placement", "colocated") == "colocated"
        assert m["tuning"]["ps_variable_placement"] == "greedy"
        tried.setdefault((m["nodes"], m["parameter_servers"], m["data"]), set()).add(
            m["variable_update"])
    assert all(sorted(updates) == VARIABLE_UPDATES for updates in tried.values())


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_ps_counts_range_from_one_to_the_workers_per_size(campaign, system):
    tried: dict[tuple, set] = {}
    for m in runs(campaign, system):
        tried.setdefault((m["workers"], m["data"]), set()).add(m["parameter_servers"])
    sizes = SYSTEMS[system]["gpus"]  # one worker per GPU
    assert sorted(tried) == sorted((n, d) for n in sizes for d in DATA)
    for (workers, _), counts in tried.items():
        assert counts == ps_sample(workers)
        assert max(counts) == workers  # footnote 3: never more PSs than workers


@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_the_papers_best_ps_count_is_tried_at_every_size(campaign, system):
    tried = {(m["gpus"], m["parameter_servers"]) for m in runs(campaign, system)}
    for gpus, ps in PAPER_BEST_PS[system].items():
        assert (gpus, ps) in tried, (gpus, ps)


@pytest.mark.workflow
@pytest.mark.parametrize("target, request_", [
    # Piz Daint, 4 nodes x 1 P100: a task of 12 cores per GPU (the 2 PSs beside the
    # workers share their cores: the launcher's srun overcommits, the job asks no more)
    ("piz-daint/scaling/inception_v3_b64_N4_p1_t12_i1_vloff_synthetic_parameter_server_ps2_"
     "parameter_server_gpu1_9014af05", ("gpu:1", "4", "4", "12")),
    # p2.8xlarge, 16 GPUs = 2 nodes x 8 K80 engines, a worker (task) per GPU
    ("aws-p2-8xlarge/scaling_8gpu/inception_v3_b64_N2_p8_t2_i1_vloff_synthetic_parameter_"
     "server_ps2_parameter_server_gpu8_9014af05", ("gpu:8", "2", "16", "2")),
])
def test_dry_run_requests_the_gpus(workflow_copy, target, request_):
    """A dry run through the Slurm profile shows each measurement's GPU request (gres per
    node, tasks, CPUs per task) and the plan's GPU-hours; the K80 systems are warned of."""
    from conftest import snakemake
    proc = snakemake(workflow_copy, f"results/raw/{target}/rep0.json", "-n", "--profile",
                     "profiles/slurm", "--configfile", str(CAMPAIGN))
    job = proc.stdout[proc.stdout.index("rule run_measurement:"):]
    resources = dict(kv.split("=", 1) for kv in
                     job[job.index("resources: ") + 11:].splitlines()[0].split(", "))
    assert (resources["gres"], resources["nodes"], resources["tasks"],
            resources["cpus_per_task"]) == request_
    assert float(proc.stderr.split(" GPU-hours")[0].split()[-1]) > 0
    warned = {line.split()[2] for line in proc.stderr.splitlines() if line.startswith("**Warning:**")}
    assert warned == {"aws-p2-xlarge", "aws-p2-8xlarge"}
