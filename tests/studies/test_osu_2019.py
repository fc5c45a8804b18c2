"""The shipped OSU 2019 campaign runs the paper's experiment matrix ("Performance
Characterization of DNN Training using TensorFlow and PyTorch on Modern Clusters", Jain et
al., Cluster 2019): counts per experiment, system and framework and the layouts the paper
fixes, written out here from its text (Table I, Secs. IV-IX) as plain data; plus the
per-process thread settings the matrix needs (`cores_minus_one`, 0 = TensorFlow decides)."""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import REPO

from archbench.plan.campaign import ConfigError, load_campaign, load_campaign_file
from archbench.plan.systems import resolve_system
from archbench.results.claims import identity_of, read_claims

CAMPAIGN = REPO / "config" / "campaigns" / "osu-2019.yaml"
CLAIMS = REPO / "data" / "published" / "osu-2019" / "osu-2019-claims.csv"
REPETITIONS = 3  # Sec. IV-B: each experiment three times, averaged
FIVE_MODELS = ["resnet50", "resnet101", "resnet152", "inception_v3", "inception_v4"]
RESNETS = ["resnet50", "resnet101", "resnet152"]
BATCHES_16_TO_1024 = [16, 32, 64, 128, 256, 512, 1024]  # Fig. 1(b)
SKYLAKE3_NODES = [1, 2, 4, 8, 16, 32, 64, 128]  # Fig. 17; Fig. 12 (PyTorch) assumed the same
CYCLE_TIMES = [1, 3.5, 10, 30, 90, 300, 600]  # Figs. 18, 19: 3.5 (default), 90, 600 named

# PyTorch (Secs. VI-D, VI-E): the models of Figs. 12 and 14 and the batch per process Sec.
# VI-D gives each on Skylake-3, where 48 ppn (one per core) is best; EPYC runs ppn = BS = 32.
PT_BATCH_SKYLAKE3 = {"resnet50": 16, "resnet101": 16, "resnet152": 8, "inception_v3": 8}
PT_MODELS = list(PT_BATCH_SKYLAKE3)
PT_PPN_SKYLAKE3 = 48
PT_PPN_SWEEP = [1, 2, 4, 8, 16, 24, 48]  # Sec. VI-D: from 1 process (2.1 img/s) to the best, 48


def pt_models_at(batch: int, among: list[str] = PT_MODELS) -> list[str]:
    """The PyTorch models Sec. VI-D runs at ``batch`` on Skylake-3 (one experiment per batch)."""
    return [m for m in among if PT_BATCH_SKYLAKE3[m] == batch]


def intra_of(cores: int, ppn: int) -> int:
    """Sec. IX's rule: cores per process - 1 (a core to Horovod), at least one thread."""
    return max(1, cores // ppn - 1)


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
    ("scaling_skylake3", "osu-skylake-48"): (FIVE_MODELS, 64, 4, 11, 2, SKYLAKE3_NODES),
    # Fig. 13, Sec. VI-E: 16 ppn, 5 intra, 2 inter, 8 nodes.
    ("scaling_epyc", "osu-epyc-64"): (FIVE_MODELS, 128, 16, 5, 2, [1, 2, 4, 8]),
    # Fig. 12, Sec. VI-D: PyTorch, 48 ppn, BS 16 or 8 by model (threads and inter-op not stated).
    **{(f"scaling_skylake3_pytorch_bs{b}", "osu-skylake-48"): (
        pt_models_at(b), b, PT_PPN_SKYLAKE3, intra_of(48, PT_PPN_SKYLAKE3), 1, SKYLAKE3_NODES)
       for b in (16, 8)},
    # Fig. 14, Sec. VI-E: PyTorch, ppn and BS 32, "up to 8 nodes".
    ("scaling_epyc_pytorch", "osu-epyc-64"): (PT_MODELS, 32, 32, intra_of(64, 32), 1, [1, 2, 4, 8]),
}
# The frameworks each experiment runs: TensorFlow unless named here. Fig. 16 ran both on one
# matrix; the PyTorch CPU figures ran PyTorch at its own layouts.
PYTORCH_ONLY = [*(f"{e}_bs{b}" for e in ("ppn_pytorch", "scaling_skylake3_pytorch",
                                         "horovod_cycle_time_pytorch") for b in (16, 8)),
                "scaling_epyc_pytorch"]
FRAMEWORKS = {"gpu_scaling": ["tensorflow", "pytorch"], **{e: ["pytorch"] for e in PYTORCH_ONLY}}


def frameworks_of(experiment: str) -> list[str]:
    return FRAMEWORKS.get(experiment, ["tensorflow"])


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
    ("horovod_cycle_time", "osu-skylake-48"): len(RESNETS) * len(CYCLE_TIMES),  # Fig. 18
    **{key: len(models) * len(nodes) for key, (models, _, _, _, _, nodes) in SCALING.items()},
    # Fig. 15: one GPU, five models x BS 16-128; Fig. 16: 1, 2, 4 nodes x one GPU, 4 models
    **{("gpu_single", name): len(FIVE_MODELS) * 4 for name in GPUS},
    **{("gpu_scaling", name): len(FIG16_MODELS) * 3 for name in GPUS},
    # PyTorch, Sec. VI-D: one Skylake-3 node, ppn 1-48, per batch group of models
    **{(f"ppn_pytorch_bs{b}", "osu-skylake-48"): len(pt_models_at(b)) * len(PT_PPN_SWEEP)
       for b in (16, 8)},
    # Fig. 19: the ResNets of Fig. 18 at their Fig. 12 batch, every cycle time
    **{(f"horovod_cycle_time_pytorch_bs{b}", "osu-skylake-48"):
       len(pt_models_at(b, RESNETS)) * len(CYCLE_TIMES) for b in (16, 8)},
}


@pytest.fixture(scope="module")
def measurements() -> list[dict]:
    return load_campaign_file(CAMPAIGN).measurements


def of(measurements: list[dict], experiment: str) -> list[dict]:
    return [m for m in measurements if m["experiment"] == experiment]


def test_measurement_counts_follow_the_paper_matrix(measurements):
    counts = Counter((m["experiment"], m["system"], m["framework"]) for m in measurements)
    expected = {(experiment, system, framework): n * REPETITIONS
                for (experiment, system), n in EXPECTED_CONFIGURATIONS.items()
                for framework in frameworks_of(experiment)}
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
    assert {m["framework"] for m in ms} == set(frameworks_of(key[0]))


def test_gpu_runs_as_the_paper_ran_them(measurements):
    """Sec. VII: TensorFlow on K80 and V100 GPUs; every run on a GPU system is a GPU run
    (device gpu, one process per GPU, NCHW), none on a CPU system; Fig. 16 on 1, 2 and 4
    GPUs, one per node, each configuration with TensorFlow and with PyTorch ("#TF", "#PT");
    Fig. 15 TensorFlow only."""
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
    ids = {f: {m["config_id"] for m in fig16 if m["framework"] == f} for f in ("tensorflow", "pytorch")}
    # a PyTorch id is the TensorFlow one with the framework before its GPU part
    assert ids["pytorch"] == {config_id.replace("_gpu1", "_pytorch_gpu1") for config_id in ids["tensorflow"]}
    fig15 = of(measurements, "gpu_single")
    assert {(m["gpus"], m["strategy"], m["framework"]) for m in fig15} == {(1, "single", "tensorflow")}


def test_scaling_leaves_one_core_per_process_to_horovod(measurements):
    # Sec. IX: intra-op threads = cores per process - 1, at least 1 (PyTorch's 48 ppn on 48
    # cores: 1); TensorFlow on EPYC runs the 5 threads Sec. VI-E states.
    for m in measurements:
        if (m["experiment"].startswith("scaling")
                and (m["system"], m["framework"]) != ("osu-epyc-64", "tensorflow")):
            cores = HARDWARE[m["system"]][0]
            assert m["intra_threads"] == intra_of(cores, m["processes_per_node"])


def test_epyc_runs_stock_tensorflow(measurements):
    # Sec. IV-B: TensorFlow v1.12 without Intel's optimisations on the AMD processors.
    epyc = [m for m in measurements if m["system"] == "osu-epyc-64" and m["framework"] == "tensorflow"]
    assert epyc and not any(m["vendor_library_enabled"] for m in epyc)


def test_pytorch_runs_horovod_at_the_layouts_the_paper_gives(measurements):
    """Secs. VI-D, VI-E: PyTorch with Horovod on Skylake-3 at BS 16 (ResNet-50/101) or 8
    (ResNet-152, Inception-v3) and 48 ppn beyond the single-node sweep, on EPYC at ppn = BS
    = 32; the single-node sweep runs every model from one process to 48."""
    cpu = [m for m in measurements if m["framework"] == "pytorch" and m.get("device", "cpu") == "cpu"]
    assert {m["experiment"] for m in cpu} == set(PYTORCH_ONLY)
    assert {m["strategy"] for m in cpu} == {"horovod"}
    for m in cpu:
        if m["system"] == "osu-epyc-64":
            assert (m["batch_per_process"], m["processes_per_node"]) == (32, 32)
            continue
        assert m["system"] == "osu-skylake-48"
        assert m["batch_per_process"] == PT_BATCH_SKYLAKE3[m["model"]]
        if not m["experiment"].startswith("ppn_pytorch"):
            assert m["processes_per_node"] == PT_PPN_SKYLAKE3
    sweep = [m for m in cpu if m["experiment"].startswith("ppn_pytorch")]
    assert {m["nodes"] for m in sweep} == {1}
    for model in PT_MODELS:
        ppns = {(m["processes_per_node"], m["intra_threads"]) for m in sweep if m["model"] == model}
        assert ppns == {(p, intra_of(48, p)) for p in PT_PPN_SWEEP}


def test_pytorch_horovod_cycle_time(measurements):
    # Fig. 19 (Sec. VIII-2): PyTorch's cycle-time relation, 1.25x for ResNet-50 at 600 ms
    ms = [m for m in measurements if m["experiment"].startswith("horovod_cycle_time_pytorch")]
    assert {m["framework"] for m in ms} == {"pytorch"}
    assert {m["model"] for m in ms} == set(RESNETS)
    assert {m["tuning"]["horovod_cycle_time_ms"] for m in ms} == set(CYCLE_TIMES)
    assert {(m["measured_steps"], m["nodes"], m["processes_per_node"]) for m in ms} == {
        (40, 2, PT_PPN_SKYLAKE3)}


def test_every_claim_names_a_configuration_the_campaign_runs(measurements):
    # a claim whose identity no measurement has could only ever read "not measured"
    fields = {"batch": "batch_per_process", "threads": "intra_threads"}
    for _, claim in read_claims(CLAIMS).iterrows():
        identity = {fields.get(k, k): v for k, v in identity_of(claim).items()}
        assert any(all(m.get(k) == v for k, v in identity.items()) for m in measurements), (
            claim["source"], identity)


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
    # the campaign's rule: TensorFlow on hyper-threaded Skylake-3 runs 2 inter-op threads
    # (Sec. V-B), on the systems without hyper-threading 1
    assert {m["inter_threads"] for m in fig4} == {2}
    assert {m["inter_threads"] for m in of(measurements, "threads")} == {1}
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
    ms = expand({"type": "node_scaling", "models": ["small_cnn"], "batch_per_process": [8],
                 "processes_per_node": 4, "threads_per_process": value, "nodes": [1, 2]})
    assert {m["intra_threads"] for m in ms} == {intra}  # 12 cores / 4 processes = 3 each


def test_node_scaling_default_threads_fill_the_cores():
    ms = expand({"type": "node_scaling", "models": ["small_cnn"], "batch_per_process": [8],
                 "processes_per_node": 4, "nodes": [1]})
    assert {m["intra_threads"] for m in ms} == {3}


def test_ppn_sweep_intra_threads_axis_with_tensorflow_default():
    ms = expand({"type": "ppn_sweep", "models": ["small_cnn"], "batch_per_process": [8],
                 "processes_per_node": [1, 12], "intra_threads": ["cores_minus_one", 0],
                 "inter_threads": ["cores"]})
    assert {(m["processes_per_node"], m["intra_threads"], m["inter_threads"]) for m in ms} == {
        (1, 11, 11), (1, 0, 0), (12, 1, 1), (12, 0, 0)}
    assert len({m["config_id"] for m in ms}) == 4


def test_horovod_tuning_threads_per_process_token():
    ms = expand({"type": "horovod_tuning", "models": ["small_cnn"], "batch_per_process": [8],
                 "cycle_time_ms": [3.5], "fusion_threshold_mb": [64], "processes_per_node": 2,
                 "threads_per_process": "cores_minus_one"})
    assert {m["intra_threads"] for m in ms} == {5}


@pytest.mark.parametrize("experiment, key", [
    ({"type": "node_scaling", "models": ["small_cnn"], "batch_per_process": [8],
      "threads_per_process": -1}, "threads_per_process"),
    ({"type": "ppn_sweep", "models": ["small_cnn"], "batch_per_process": [8],
      "intra_threads": ["half"]}, "intra_threads"),
])
def test_schema_rejects_bad_process_threads(experiment, key):
    with pytest.raises(ConfigError, match=key):
        expand(experiment)


def test_node_ranges_the_text_does_not_state_are_listed_as_assumed(measurements):
    """Figs. 7 and 8 give no node counts: the map's "Assumed" list names the ranges the
    campaign runs, so neither can change without the other."""
    text = (REPO / "docs" / "studies" / "osu-2019.md").read_text()
    assumed = text.split("\n## Assumed\n", 1)[1]
    for figure, experiment in (("Fig. 7", "scaling_skylake1"), ("Fig. 8", "scaling_broadwell")):
        nodes = sorted({m["nodes"] for m in of(measurements, experiment)})
        line = next(item for item in assumed.split("\n- ") if item.startswith(figure))
        assert f"nodes {', '.join(map(str, nodes))} (1-{nodes[-1]})" in line.replace("\n  ", " ")
    header = CAMPAIGN.read_text()
    assert "Fig. 7 (Skylake-1) 1-8 and Fig. 8" in header and "(Broadwell) 1-16" in header
