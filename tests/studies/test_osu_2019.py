"""The shipped OSU 2019 campaign runs the paper's experiment matrix ("Performance
Characterization of DNN Training using TensorFlow and PyTorch on Modern Clusters", Jain et
al., Cluster 2019): counts per experiment and system and the layouts the paper fixes,
written out here from its text (Table I, Secs. IV-IX) as plain data; plus the per-process
thread settings the matrix needs (`cores_minus_one`, 0 = TensorFlow decides)."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import REPO

from archbench.plan.campaign import ConfigError, load_campaign, load_campaign_file
from archbench.plan.systems import resolve_system

CAMPAIGN = REPO / "config" / "campaigns" / "osu-2019.yaml"
REPETITIONS = 3  # Sec. IV-B: each experiment three times, averaged
FIVE_MODELS = ["resnet50", "resnet101", "resnet152", "inception_v3", "inception_v4"]
RESNETS = ["resnet50", "resnet101", "resnet152"]
BATCHES_16_TO_1024 = [16, 32, 64, 128, 256, 512, 1024]  # Fig. 1(b)

# Table I and Sec. IV-A: (cores per node, hardware threads per core, nodes of the real
# cluster, interconnect). Pitzer's and Stampede2's sizes are the centres' node counts.
HARDWARE = {
    "osu-skylake-28": (28, 1, 12, "InfiniBand EDR"),    # RI2: 12 Skylake nodes
    "osu-broadwell-28": (28, 1, 20, "InfiniBand EDR"),  # RI2: 20 Broadwell nodes
    "osu-skylake-40": (40, 1, 224, "InfiniBand EDR"),   # Pitzer
    "osu-skylake-48": (48, 2, 1736, "Intel Omni-Path"),  # Stampede2 SKX, hyper-threaded
    "osu-epyc-64": (64, 2, 8, "InfiniBand EDR"),        # 2 x 32 cores, 128 hardware threads
    "osu-skylake-28-k80": (28, 1, 12, "InfiniBand EDR"),  # RI2's Skylake nodes, their K80s
    "osu-skylake-40-v100": (40, 1, 32, "InfiniBand EDR"),  # Pitzer's 32 GPU nodes
}
# Sec. IV-A: GPUs per node and model of the GPU systems (Sec. VII, Figs. 15-16)
GPUS = {"osu-skylake-28-k80": (2, "K80"), "osu-skylake-40-v100": (2, "V100")}
FIG16_MODELS = [*RESNETS, "inception_v3"]

# Multi-node figures: (experiment, system) -> (models, batch, ppn, intra, inter, nodes).
SCALING = {
    # Fig. 7, Sec. VI-A: 2 ppn, BS 128 (Sec. V-A), 28 - 1 threads over 2 processes.
    ("scaling_skylake1", "osu-skylake-28"): (FIVE_MODELS, 128, 2, 13, 1, [1, 2, 4, 8]),
    # Fig. 8, Sec. VI-B: 2 ppn x 13 intra x 1 inter; ResNet-50 at BS 128, the rest at 64.
    ("scaling_broadwell_resnet50", "osu-broadwell-28"): (["resnet50"], 128, 2, 13, 1,
                                                         [1, 2, 4, 8, 16]),
    ("scaling_broadwell", "osu-broadwell-28"): (FIVE_MODELS[1:], 64, 2, 13, 1, [1, 2, 4, 8, 16]),
    # Fig. 9, Secs. VI-C and IX: 16 nodes, 4 ppn for 40 cores.
    ("scaling_skylake2", "osu-skylake-40"): (FIVE_MODELS, 128, 4, 9, 1, [1, 2, 4, 8, 16]),
    # Fig. 17, Secs. V-B and VI-D: 4 ppn x 11 intra x 2 inter, up to 128 nodes.
    ("scaling_skylake3", "osu-skylake-48"): (FIVE_MODELS, 64, 4, 11, 2,
                                             [1, 2, 4, 8, 16, 32, 64, 128]),
    # Fig. 13, Sec. VI-E: 16 ppn, 5 intra, 2 inter, 8 nodes.
    ("scaling_epyc", "osu-epyc-64"): (FIVE_MODELS, 128, 16, 5, 2, [1, 2, 4, 8]),
}

# Every (experiment, system) -> configurations the paper's matrix has (before repetitions).
EXPECTED_CONFIGURATIONS = {
    ("threads", "osu-skylake-28"): 28 * len(BATCHES_16_TO_1024),      # Fig. 1: 1-28 threads
    ("threads", "osu-broadwell-28"): 28 * len(BATCHES_16_TO_1024),    # Fig. 2
    ("threads", "osu-skylake-40"): 40 * len(BATCHES_16_TO_1024),      # Fig. 3
    ("threads_hyperthreaded", "osu-skylake-48"): (48 + 1) * len(BATCHES_16_TO_1024),  # Fig. 4: 1-48, 96
    ("ppn_batch", "osu-skylake-48"): len([1, 2, 4, 8, 16, 32]) * len([16, 32, 64, 128]),  # Fig. 5
    ("sp_vs_mp", "osu-skylake-48"): 2 * len(["SP", "MP"]) * len([1, 2]),  # Fig. 6: 2 models x inter 1, 2
    ("sp_vs_mp_32_nodes", "osu-skylake-48"): len(FIVE_MODELS) * len(["SP", "MP-Tuned"]),  # Fig. 10
    ("mp_default_32_nodes", "osu-skylake-48"): len(FIVE_MODELS),                         # Fig. 10
    ("batch_128_nodes", "osu-skylake-48"): len(FIVE_MODELS) * len([16, 32, 64, 128]),   # Fig. 11
    ("horovod_cycle_time", "osu-skylake-48"): len(RESNETS) * len([1, 3.5, 10, 30, 90, 300, 600]),  # Fig. 18
    **{key: len(models) * len(nodes) for key, (models, _, _, _, _, nodes) in SCALING.items()},
    # Fig. 15: one GPU, five models x BS 16-128; Fig. 16: 1, 2, 4 nodes x one GPU, 4 models
    **{("gpu_single", name): len(FIVE_MODELS) * 4 for name in GPUS},
    **{("gpu_scaling", name): len(FIG16_MODELS) * 3 for name in GPUS},
}


@pytest.fixture(scope="module")
def measurements() -> list[dict]:
    return load_campaign_file(CAMPAIGN).measurements


def of(measurements: list[dict], experiment: str) -> list[dict]:
    return [m for m in measurements if m["experiment"] == experiment]


def test_measurement_counts_follow_the_paper_matrix(measurements):
    counts = Counter((m["experiment"], m["system"]) for m in measurements)
    expected = {key: n * REPETITIONS for key, n in EXPECTED_CONFIGURATIONS.items()}
    assert dict(counts) == expected


@pytest.mark.parametrize("key", list(SCALING), ids=[e for e, _ in SCALING])
def test_scaling_runs_the_layout_the_paper_states_per_system(measurements, key):
    models, batch, ppn, intra, inter, nodes = SCALING[key]
    ms = [m for m in of(measurements, key[0]) if m["system"] == key[1]]
    assert {m["model"] for m in ms} == set(models)
    assert sorted({m["nodes"] for m in ms}) == nodes
    assert {(m["batch_per_process"], m["processes_per_node"], m["intra_threads"],
             m["inter_threads"], m["strategy"]) for m in ms} == {(batch, ppn, intra, inter, "horovod")}
    assert all(m["global_batch"] == batch * ppn * m["nodes"] for m in ms)


def test_gpu_runs_as_the_paper_ran_them(measurements):
    """Sec. VII: TensorFlow on K80 and V100 GPUs; every run on a GPU system is a GPU run
    (device gpu, one process per GPU, NCHW), none on a CPU system; Fig. 16 on 1, 2 and 4
    GPUs, one per node."""
    for m in measurements:
        if m["system"] not in GPUS:
            assert m.get("device", "cpu") == "cpu" and not m.get("gpus")
            continue
        per_node, model = GPUS[m["system"]]
        assert model in resolve_system(m["system"])["gpu_model"]
        assert m["device"] == "gpu" and m["data_format"] == "NCHW"
        assert m["processes_per_node"] == m["gpus_per_node"] == 1 <= per_node
        assert m["gpus"] == m["nodes"] == m["workers"]
        assert m["intra_threads"] == HARDWARE[m["system"]][0]  # host threads: all cores
    fig16 = of(measurements, "gpu_scaling")
    assert {(m["strategy"], m["scaling_unit"]) for m in fig16} == {("horovod", "gpus")}
    assert sorted({m["gpus"] for m in fig16}) == [1, 2, 4]
    assert {m["model"] for m in fig16} == set(FIG16_MODELS)
    fig15 = of(measurements, "gpu_single")
    assert {(m["gpus"], m["strategy"]) for m in fig15} == {(1, "single")}


def test_intel_systems_leave_one_core_per_process_to_horovod(measurements):
    # Sec. IX: intra-op threads = cores per process - 1 on Intel (EPYC states its own 5).
    for m in measurements:
        if m["experiment"].startswith("scaling") and m["system"] != "osu-epyc-64":
            cores = HARDWARE[m["system"]][0]
            assert m["intra_threads"] == cores // m["processes_per_node"] - 1


def test_epyc_runs_stock_tensorflow(measurements):
    # Sec. IV-B: TensorFlow v1.12 without Intel's optimisations on the AMD processors.
    epyc = [m for m in measurements if m["system"] == "osu-epyc-64"]
    assert epyc and not any(m["vendor_library_enabled"] for m in epyc)


def test_fig10_compares_mp_tuned_mp_default_and_sp_on_32_nodes(measurements):
    ms = of(measurements, "sp_vs_mp_32_nodes") + of(measurements, "mp_default_32_nodes")
    assert {m["nodes"] for m in ms} == {32}
    layouts = {(m["processes_per_node"], m["intra_threads"], m["inter_threads"]) for m in ms}
    # SP (one process, 48 - 1 threads), MP-Tuned (4 x 11, inter 2), MP-Default (TF decides)
    assert layouts == {(1, 47, 2), (4, 11, 2), (4, 0, 0)}


def test_single_node_mp_sweeps_on_skylake3(measurements):
    fig5 = of(measurements, "ppn_batch")
    assert {m["model"] for m in fig5} == {"resnet152"}
    assert {(m["processes_per_node"], m["intra_threads"]) for m in fig5} == {
        (p, max(1, 48 // p - 1)) for p in (1, 2, 4, 8, 16, 32)}
    fig6 = of(measurements, "sp_vs_mp")
    assert {m["model"] for m in fig6} == {"resnet152", "inception_v4"}
    assert {(m["processes_per_node"], m["intra_threads"], m["inter_threads"]) for m in fig6} == {
        (1, 47, 1), (1, 47, 2), (4, 11, 1), (4, 11, 2)}


def test_thread_scaling_reaches_the_hyperthreads_of_skylake3(measurements):
    fig4 = of(measurements, "threads_hyperthreaded")
    assert max(m["intra_threads"] for m in fig4) == 48 * 2
    fig1 = [m for m in of(measurements, "threads") if m["system"] == "osu-skylake-28"]
    assert sorted({m["batch_per_process"] for m in fig1}) == BATCHES_16_TO_1024
    assert {m["intra_threads"] for m in fig1} == set(range(1, 29))


def test_horovod_cycle_time_over_40_iterations(measurements):
    ms = of(measurements, "horovod_cycle_time")
    cycles = {m["tuning"]["horovod_cycle_time_ms"] for m in ms}
    assert {3.5, 90, 600} <= cycles  # Sec. VIII: the default and the values the text names
    assert {m["measured_steps"] for m in ms} == {40}
    assert {(m["processes_per_node"], m["intra_threads"], m["inter_threads"]) for m in ms} == {(4, 11, 2)}
    assert {m["model"] for m in ms} == set(RESNETS)


def test_node_counts_stay_within_each_real_cluster(measurements):
    for m in measurements:
        assert m["nodes"] <= HARDWARE[m["system"]][2]
    assert max(m["nodes"] for m in measurements if m["system"] != "osu-skylake-48") <= 16


@pytest.mark.parametrize("name", list(HARDWARE))
def test_system_files_match_table_1(name):
    cores, threads_per_core, nodes, network = HARDWARE[name]
    system = resolve_system(name)
    assert system["sockets"] * system["cores_per_socket"] == cores
    assert (system["threads_per_core"], system["nodes"], system["interconnect"]) == (
        threads_per_core, nodes, network)


# ------------------------------------------------ per-process threads of multi-process types
SMALL = {"arch": "x86_64", "sockets": 2, "cores_per_socket": 6, "nodes": 4, "launcher": "srun",
         "vendor_library": "onednn"}


def expand(experiment: dict) -> list[dict]:
    config = {"campaign": "t", "systems": ["s"], "system_definitions": {"s": SMALL},
              "defaults": {"repetitions": 1, "image_size": 32, "steps": 2, "warmup_steps": 0},
              "experiments": {"e": experiment}}
    return load_campaign(config).measurements


@pytest.mark.parametrize("value, intra", [("cores_minus_one", 2), ("cores", 3), (0, 0), (2, 2)])
def test_node_scaling_threads_per_process(value, intra):
    ms = expand({"type": "node_scaling", "models": ["small_cnn"], "batch_sizes": [8],
                 "processes_per_node": 4, "threads_per_process": value, "nodes": [1, 2]})
    assert {m["intra_threads"] for m in ms} == {intra}  # 12 cores / 4 processes = 3 each


def test_node_scaling_default_threads_fill_the_cores():
    ms = expand({"type": "node_scaling", "models": ["small_cnn"], "batch_sizes": [8],
                 "processes_per_node": 4, "nodes": [1]})
    assert {m["intra_threads"] for m in ms} == {3}


def test_ppn_sweep_intra_threads_axis_with_tensorflow_default():
    ms = expand({"type": "ppn_sweep", "models": ["small_cnn"], "batch_sizes": [8],
                 "processes_per_node": [1, 12], "intra_threads": ["cores_minus_one", 0],
                 "inter_threads": ["cores"]})
    assert {(m["processes_per_node"], m["intra_threads"], m["inter_threads"]) for m in ms} == {
        (1, 11, 11), (1, 0, 0), (12, 1, 1), (12, 0, 0)}
    assert len({m["config_id"] for m in ms}) == 4


def test_horovod_tuning_threads_per_process_token():
    ms = expand({"type": "horovod_tuning", "models": ["small_cnn"], "batch_sizes": [8],
                 "cycle_time_ms": [3.5], "fusion_threshold_mb": [64], "processes_per_node": 2,
                 "threads_per_process": "cores_minus_one"})
    assert {m["intra_threads"] for m in ms} == {5}


@pytest.mark.parametrize("experiment, key", [
    ({"type": "node_scaling", "models": ["small_cnn"], "batch_sizes": [8],
      "threads_per_process": -1}, "threads_per_process"),
    ({"type": "ppn_sweep", "models": ["small_cnn"], "batch_sizes": [8],
      "intra_threads": ["half"]}, "intra_threads"),
])
def test_schema_rejects_bad_process_threads(experiment, key):
    with pytest.raises(ConfigError, match=key):
        expand(experiment)
