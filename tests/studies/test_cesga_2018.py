"""The shipped CESGA 2018 campaign runs the report's experiment matrix ("Official
TensorFlow benchmark on Finis Terrae II", CESGA 2018-002): counts per experiment and the
settings the report fixes, written out here from its text (Secs. 2.5-3.2) as plain data."""

from __future__ import annotations

import pytest
from conftest import REPO

from archbench.core.hardware import cores_of
from archbench.plan.campaign import load_campaign_file
from archbench.plan.submission import job_resources
from archbench.plan.systems import resolve_system

CAMPAIGN = REPO / "config" / "campaigns" / "cesga-2018.yaml"
REPETITIONS = 5  # Sec. 2.6
NODE_CORES = 24  # Sec. 2.1: 2 Haswell 2680v3, 24 cores per thin node
CORES = list(range(1, NODE_CORES + 1))
C = "cores"  # "number of cores": the cores used by the run

# Secs. 3.1.1.1-3.1.1.4: --mkl=False, inter {0,1,2} x intra {0,1,cores}, and inter = intra = cores.
MKL_OFF_PAIRS = [(0, 0), (0, 1), (0, C), (1, 0), (1, 1), (1, C), (2, 0), (2, 1), (2, C), (C, C)]
# Sec. 3.1.2: --mkl=True, kmp_blocktime=0, intra = cores, inter 0, 1, 2.
MKL_ON_PAIRS = [(0, C), (1, C), (2, C)]
# Sec. 3.1.4: MNIST on 12 and 24 cores, intra 0, inter 0, 1, 2, mkl False (Fig. 8) and True (Fig. 9).
MNIST_CORES, MNIST_PAIRS, MNIST_MKL = [12, 24], [(0, 0), (1, 0), (2, 0)], ["off", "on"]
# Sec. 3.2, Table 3: 1 parameter server, 1..9 workers, one task per 24-core node.
WORKERS = list(range(1, 10))


def resolved(pair: tuple, cores: int) -> tuple[int, int]:
    """(inter, intra) as thread counts on ``cores`` cores."""
    return tuple(cores if v == C else v for v in pair)


def distinct_runs(pairs: list[tuple], cores: list[int]) -> int:
    """Configurations of a sweep: settings that coincide on a core count are one run."""
    return sum(len({resolved(p, c) for p in pairs}) for c in cores)


EXPECTED = {
    "inter_intra": distinct_runs(MKL_OFF_PAIRS, CORES) * REPETITIONS,
    "inter_intra_mkl": distinct_runs(MKL_ON_PAIRS, CORES) * REPETITIONS,
    "mnist": distinct_runs(MNIST_PAIRS, MNIST_CORES) * len(MNIST_MKL) * REPETITIONS,
    "parameter_servers": len(WORKERS) * REPETITIONS,
}


@pytest.fixture(scope="module")
def campaign():
    return load_campaign_file(CAMPAIGN)


def runs(campaign, experiment: str) -> list[dict]:
    return [m for m in campaign.measurements if m["experiment"] == experiment]


def threads_by_cores(ms: list[dict]) -> dict[int, set]:
    out: dict[int, set] = {}
    for m in ms:
        out.setdefault(m["tuning"]["cores"], set()).add((m["inter_threads"], m["intra_threads"]))
    return out


def test_every_experiment_runs_the_papers_count(campaign):
    assert {m["experiment"] for m in campaign.measurements} == set(EXPECTED)
    for experiment, count in EXPECTED.items():
        assert len(runs(campaign, experiment)) == count, experiment
    assert {m["system"] for m in campaign.measurements} == {"finisterrae2"}


def test_the_thin_node_is_the_papers():
    node = resolve_system("finisterrae2")
    assert cores_of(node) == NODE_CORES and node["memory_per_node_gb"] == 128
    assert node["threads_per_core"] == 1
    assert node["nodes"] >= len(WORKERS) + 1  # the parameter server had a node of its own


def test_resnet50_batch_64_and_the_step_counts_of_table_1(campaign):
    for m in campaign.measurements:
        if m["experiment"] == "mnist":
            continue
        assert (m["model"], m["batch_per_process"], m["data"]) == ("resnet50", 64, "synthetic")
        assert (m["warmup_steps"], m["measured_steps"]) == (10, 100)


@pytest.mark.parametrize("experiment, pairs", [("inter_intra", MKL_OFF_PAIRS),
                                               ("inter_intra_mkl", MKL_ON_PAIRS)])
def test_thread_settings_per_core_count_follow_the_paper(campaign, experiment, pairs):
    seen = threads_by_cores(runs(campaign, experiment))
    assert sorted(seen) == CORES
    for cores, threads in seen.items():
        assert threads == {resolved(p, cores) for p in pairs}, cores


def test_cores_series_means_the_cores_used_and_nothing_exceeds_the_node(campaign):
    sweep = runs(campaign, "inter_intra") + runs(campaign, "inter_intra_mkl")
    for m in sweep:
        assert 1 <= m["tuning"]["cores"] <= NODE_CORES
        assert m["intra_threads"] <= m["tuning"]["cores"]
        assert m["inter_threads"] in (0, 1, 2, m["tuning"]["cores"])
    # Fig. 5: inter = intra = the cores used, at every core count
    fig5 = {m["tuning"]["cores"] for m in runs(campaign, "inter_intra")
            if m["inter_threads"] == m["intra_threads"] == m["tuning"]["cores"]}
    assert fig5 == set(CORES)


def test_mkl_settings_only_where_the_paper_set_them(campaign):
    for m in runs(campaign, "inter_intra"):
        assert "KMP_BLOCKTIME" not in m["env"]
    for m in runs(campaign, "inter_intra_mkl") + runs(campaign, "parameter_servers"):
        assert str(m["env"]["KMP_BLOCKTIME"]) == "0"
        assert m["env"]["KMP_AFFINITY"].startswith("granularity=fine")
    mnist_on = [m for m in runs(campaign, "mnist") if "KMP_BLOCKTIME" in m["env"]]
    assert len(mnist_on) == len(runs(campaign, "mnist")) // 2


def test_mnist_stand_in_is_a_small_real_data_cnn_at_mnists_size(campaign):
    ms = runs(campaign, "mnist")
    assert {(m["model"], m["data"], m["image_size"], m["num_classes"]) for m in ms} == {
        ("digits_cnn", "real", 28, 10)}
    assert sorted(threads_by_cores(ms)) == MNIST_CORES
    assert {m["intra_threads"] for m in ms} == {0}


def test_distributed_runs_one_ps_and_one_24_core_worker_per_node(campaign):
    ms = runs(campaign, "parameter_servers")
    assert sorted({m["workers"] for m in ms}) == WORKERS
    for m in ms:
        assert m["strategy"] == "parameter_server" and m["parameter_servers"] == 1
        # tf_cnn_benchmarks' default update, synchronous; the PS on a thin node of its own
        assert m["variable_update"] == "parameter_server"
        assert m["tuning"]["ps_placement"] == "separate"
        resources = job_resources(m, resolve_system("finisterrae2"))
        assert (resources["nodes"], resources["tasks"]) == (m["workers"] + 1, m["workers"] + 1)
        assert (m["nodes"], m["processes_per_node"]) == (m["workers"], 1)
        assert (m["intra_threads"], m["inter_threads"]) == (NODE_CORES, 1)
        assert m["global_batch"] == 64 * m["workers"]
        assert m["scaling_unit"] == "workers"  # Sec. 3.2: scalability over workers, not tasks
