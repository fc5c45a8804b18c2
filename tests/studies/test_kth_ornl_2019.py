"""The shipped KTH/ORNL 2019 campaign runs the paper's experiment matrix ("TensorFlow Doing
HPC", Chien et al. 2019): counts per experiment and system, and the settings the paper
fixes, written out here from the paper's text (Sec. V, VI, Table I) as plain data."""

from __future__ import annotations

import pytest
from conftest import REPO, snakemake

from archbench.plan.campaign import load_campaign_file
from archbench.plan.systems import resolve_system
from archbench.results.claims import read_claims
from archbench.results.claims_vs_plan import planned_runs
from archbench.results.tables import build_table

CAMPAIGN = REPO / "config" / "campaigns" / "kth-ornl-2019.yaml"
CLAIMS = REPO / "data" / "published" / "kth-ornl-2019" / "kth-ornl-2019-claims.csv"
REPETITIONS = 5  # Sec. V: repeated "from five to 10 times", median reported

# Table I: TensorFlow instances (one per GPU or K80 engine) per node.
INSTANCES_PER_NODE = {"tegner-k420": 1, "tegner-k80": 2, "kebnekaise-k80": 4, "kebnekaise-v100": 2}

# (experiment, system) -> (kernel, sizes, tile size, worker counts), from Sec. VI.
MATRIX = {
    # VI-A: 2..128 MB between two nodes, Tegner K420 and Kebnekaise K80 nodes, tensors on
    # the GPUs; on Tegner also in host memory.
    ("stream", "tegner-k420"): ("stream_comm", [2, 4, 8, 16, 32, 64, 128], None, [2]),
    ("stream", "kebnekaise-k80"): ("stream_comm", [2, 4, 8, 16, 32, 64, 128], None, [2]),
    ("stream_host_memory", "tegner-k420"): ("stream_comm", [2, 4, 8, 16, 32, 64, 128], None, [2]),
    # VI-B: K420 tile 4096 on 2^14..2^16, K80 tile 8192 on 2^15 and 2^16 only.
    ("matmul_tegner_k420", "tegner-k420"): ("matmul", [2**14, 2**15, 2**16], 4096, [2, 4, 8]),
    ("matmul_tegner_k80", "tegner-k80"): ("matmul", [2**15, 2**16], 8192, [2, 4, 8]),
    ("matmul_kebnekaise_k80", "kebnekaise-k80"): ("matmul", [2**15, 2**16], 8192, [2, 4, 8, 16]),
    # VI-C: 2^16 only on Kebnekaise K80 from 8 to 16 GPUs.
    ("cg_tegner_k80", "tegner-k80"): ("cg", [2**14, 2**15], None, [2, 4, 8]),
    ("cg_kebnekaise_k80", "kebnekaise-k80"): ("cg", [2**14, 2**15], None, [2, 4, 8, 16]),
    ("cg_kebnekaise_k80_65536", "kebnekaise-k80"): ("cg", [2**16], None, [8, 16]),
    ("cg_kebnekaise_v100", "kebnekaise-v100"): ("cg", [2**14, 2**15], None, [2, 4, 8]),
    # VI-D: K420 2^29 in 64 tiles of 2^23, K80 2^31 in 128 tiles of 2^24, 2..8 GPUs.
    ("fft_tegner_k420", "tegner-k420"): ("fft", [2**29], 2**23, [2, 4, 8]),
    ("fft_tegner_k80", "tegner-k80"): ("fft", [2**31], 2**24, [2, 4, 8]),
}
EXPECTED_TOTAL = sum(len(sizes) * len(workers) * REPETITIONS for _, sizes, _, workers in MATRIX.values())


@pytest.fixture(scope="module")
def campaign():
    return load_campaign_file(CAMPAIGN)


def of(campaign, experiment: str, system: str) -> list[dict]:
    return [m for m in campaign.measurements if (m["experiment"], m["system"]) == (experiment, system)]


def test_every_experiment_and_system_runs_the_papers_count(campaign):
    ran = {(m["experiment"], m["system"]) for m in campaign.measurements}
    assert ran == set(MATRIX)
    for (experiment, system), (_, sizes, _, workers) in MATRIX.items():
        assert len(of(campaign, experiment, system)) == len(sizes) * len(workers) * REPETITIONS, experiment
    assert len(campaign.measurements) == EXPECTED_TOTAL
    assert campaign.config["statistic"] == "median"


@pytest.mark.parametrize("key", sorted(MATRIX), ids=lambda k: f"{k[0]}-{k[1]}")
def test_sizes_tiles_and_workers_follow_the_paper(campaign, key):
    kernel, sizes, tile, workers = MATRIX[key]
    runs = of(campaign, *key)
    assert {m["kernel"] for m in runs} == {kernel}
    assert sorted({m["problem_size"] for m in runs}) == sizes
    assert {m["tile_size"] for m in runs} == {tile}
    assert sorted({m["workers"] for m in runs}) == workers


@pytest.mark.parametrize("key", [k for k in sorted(MATRIX) if not k[0].startswith("stream")],
                         ids=lambda k: f"{k[0]}-{k[1]}")
def test_workers_fill_nodes_as_table_one_says(campaign, key):
    per_node = INSTANCES_PER_NODE[key[1]]
    for m in of(campaign, *key):
        assert m["processes_per_node"] == min(per_node, m["workers"])
        assert m["nodes"] * m["processes_per_node"] == m["workers"]


@pytest.mark.parametrize("key", [k for k in sorted(MATRIX) if k[0] != "stream_host_memory"],
                         ids=lambda k: f"{k[0]}-{k[1]}")
def test_one_tensorflow_instance_per_gpu(campaign, key):
    """Sec. V: one instance per GPU (per K80 engine); every run a GPU run."""
    for m in of(campaign, *key):
        assert m["device"] == "gpu" and m["scaling_unit"] == "gpus"
        assert m["gpus_per_node"] == m["processes_per_node"] == m["workers"] // m["nodes"]
        assert m["gpus"] == m["workers"] and m["gpus_per_node"] <= INSTANCES_PER_NODE[key[1]]
        assert f"_N{m['nodes']}_gpu{m['gpus_per_node']}" in m["config_id"]


def test_stream_pushes_between_two_nodes_a_hundred_times(campaign):
    runs = [m for m in campaign.measurements if m["experiment"].startswith("stream")]
    assert {(m["workers"], m["nodes"], m["processes_per_node"]) for m in runs} == {(2, 2, 1)}
    assert {m["measured_steps"] for m in runs} == {100}  # Sec. VI-A: 100 invocations


def test_stream_tensors_on_gpus_and_on_tegner_in_host_memory(campaign):
    """Fig. 7: GPU-resident tensors on Tegner K420 and Kebnekaise K80; host-memory tensors
    on Tegner, where no GPU takes part: a CPU run, never labelled GPU."""
    placed = {(m["experiment"], m["system"], m.get("device"), m.get("gpus_per_node"))
              for m in campaign.measurements if m["kernel"] == "stream_comm"}
    assert placed == {("stream", "tegner-k420", "gpu", 1), ("stream", "kebnekaise-k80", "gpu", 1),
                      ("stream_host_memory", "tegner-k420", None, None)}
    ids = {m["config_id"] for m in campaign.measurements if m["system"] == "tegner-k420"
           and m["kernel"] == "stream_comm" and m["problem_size"] == 64}
    assert ids == {"stream_comm_n64_t0_w2_N2_gpu1", "stream_comm_n64_t0_w2_N2"}


def test_kernel_settings_the_paper_fixes(campaign):
    matmul = [m for m in campaign.measurements if m["kernel"] == "matmul"]
    assert {m["tuning"]["reducers"] for m in matmul} == {2}  # Sec. VI-B: odd and even reducers
    cg = [m for m in campaign.measurements if m["kernel"] == "cg"]
    assert {m["iterations"] for m in cg} == {500}  # Sec. VI-C: 500 iterations
    fft = [m for m in campaign.measurements if m["kernel"] == "fft"]
    assert {m["tuning"]["merge"] for m in fft} == {0}  # Sec. VI-D: timed until tiles collected
    tiles = {m["system"]: m["problem_size"] // m["tile_size"] for m in fft}
    assert tiles == {"tegner-k420": 64, "tegner-k80": 128}


def test_grpc_bandwidth_claim_matches_the_gpu_memory_stream_runs(campaign):
    """Sec. VI-A: gRPC on Kebnekaise "similar ... to that of MPI" (480 MB/s), tensors on
    the K80s: keyed by what stream_bandwidth has (device gpu = GPU memory; gRPC is the
    transport archbench runs), it matches Fig. 7's seven message sizes of `stream`. The
    MPI and verbs values are no claims rows: TensorFlow 2 has neither transport."""
    claims = read_claims(CLAIMS)
    bandwidth = claims[claims["metric"] == "bandwidth"]
    assert len(bandwidth) == 1 and "gRPC" in bandwidth["note"].iloc[0]
    assert (bandwidth["system"].iloc[0], bandwidth["device"].iloc[0]) == ("kebnekaise-k80", "gpu")
    table = build_table("vs_published", planned_runs(campaign.measurements), published=bandwidth)
    assert len(table) == 7 and table["archbench"].notna().all()  # every size can be compared
    assert table["matched"].str.startswith("experiment=stream,").all()
    host = bandwidth.assign(system="tegner-k420", device="cpu")  # host memory: its own runs
    matched = build_table("vs_published", planned_runs(campaign.measurements), published=host)
    assert matched["matched"].str.startswith("experiment=stream_host_memory,").all()


def test_cg_speedup_claims_name_the_size_the_text_continues(campaign):
    """Sec. VI-C: 1.6x (2 to 4 K80s on Kebnekaise, N = 2^15), "for the same setting"
    1.3x (4 to 8), "Similarly" 1.36x (8 to 16; no size in that sentence): N = 2^15, the
    note says why. The abstract's 1.7x from two to four GPUs is Sect. VI-C's 1.74x."""
    claims = read_claims(CLAIMS)
    cg = claims[(claims["metric"] == "kernel_speedup") & (claims["kernel"] == "cg")]
    chain = cg[cg["system"] == "kebnekaise-k80"].sort_values("workers")
    assert chain[["workers", "baseline", "problem_size", "value"]].values.tolist() == [
        [4, 2, 32768, 1.6], [8, 4, 32768, 1.3], [16, 8, 32768, 1.36]]
    assert "names no size" in chain["note"].iloc[-1] and "2^15" in chain["note"].iloc[-1]
    abstract = cg[cg["source"].str.contains("Abstract")]
    assert abstract[["system", "problem_size", "workers", "baseline", "value"]].values.tolist() == [
        ["tegner-k80", 32768, 4, 2, 1.7]]
    table = build_table("vs_published", planned_runs(campaign.measurements), published=cg)
    assert len(table) == len(cg) and table["archbench"].notna().all()  # one series each


@pytest.mark.parametrize("name, cpu, sockets, cores, memory, gpus, network", [
    ("tegner-k420", "E5-2690 v3", 2, 12, 512, 1, "EDR"),
    ("tegner-k80", "E5-2690 v3", 2, 12, 512, 2, "EDR"),
    ("kebnekaise-k80", "E5-2690 v4", 2, 14, 128, 4, "FDR"),
    ("kebnekaise-v100", "E5-2690 v4", 2, 14, 128, 2, "FDR"),
])
def test_systems_describe_the_papers_nodes(name, cpu, sockets, cores, memory, gpus, network):
    """Sec. V: Tegner 2x E5-2690v3, 512 GB, EDR; Kebnekaise 2x E5-2690v4, 128 GB, FDR;
    GPUs as Table I counts them (one K80 engine = one GPU); enough nodes for the GPUs used."""
    system = resolve_system(name, None, REPO / "config" / "systems")
    assert cpu in system["cpu_model"] and system["arch"] == "x86_64"
    assert (system["sockets"], system["cores_per_socket"]) == (sockets, cores)
    assert (system["memory_per_node_gb"], system["gpus_per_node"]) == (memory, gpus)
    assert network in system["interconnect"]
    assert system["gpus_per_node"] == INSTANCES_PER_NODE[name]
    assert system["image"] == "x86_64-cuda"  # TensorFlow's CUDA build
    most = max(max(w) for (_, s), (_, _, _, w) in MATRIX.items() if s == name)
    assert system["nodes"] * INSTANCES_PER_NODE[name] >= most


@pytest.mark.workflow
def test_dry_run_plans_one_job_per_measurement(workflow_copy):
    proc = snakemake(workflow_copy, "-n", "--profile", "profiles/slurm", "--configfile",
                     str(CAMPAIGN), "--quiet", "rules")
    counts = dict(line.split()[:2] for line in proc.stdout.splitlines()
                  if len(line.split()) == 2 and line.split()[1].isdigit())
    assert int(counts["run_measurement"]) == EXPECTED_TOTAL


@pytest.mark.workflow
def test_dry_run_requests_one_task_per_gpu_and_warns_of_kepler(workflow_copy):
    """A dry run through the Slurm profile shows a V100 CG run's request (2 nodes x 2 GPUs:
    --gres=gpu:2 per node, 4 tasks, the node's 28 cores / 2 ranks each) and the plan's
    GPU-hours, and warns that the Kepler systems cannot run the CUDA image's TensorFlow."""
    target = "results/raw/kebnekaise-v100/cg_kebnekaise_v100/cg_n16384_t0_w4_N2_gpu2/rep0.json"
    proc = snakemake(workflow_copy, target, "-n", "--profile", "profiles/slurm",
                     "--configfile", str(CAMPAIGN))
    job = proc.stdout[proc.stdout.index("rule run_measurement:"):]
    resources = dict(kv.split("=", 1) for kv in
                     job[job.index("resources: ") + 11:].splitlines()[0].split(", "))
    assert (resources["gres"], resources["nodes"], resources["tasks"],
            resources["cpus_per_task"], resources["tasks_per_gpu"]) == ("gpu:2", "2", "4", "14", "0")
    assert float(proc.stderr.split(" GPU-hours")[0].split()[-1]) > 0
    warned = {line.split()[2] for line in proc.stderr.splitlines() if line.startswith("**Warning:**")}
    assert warned == {"tegner-k420", "tegner-k80", "kebnekaise-k80"}
