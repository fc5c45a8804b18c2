"""BSC 2019 (TensorFlow on MareNostrum4, Dibona and Power9) as a campaign: the shipped
config/campaigns/bsc-2019.yaml runs the paper's matrix, and the engine pieces it needs
(vendor axis on a system without a vendor library, per-layout batch sizes, `best` over
several hybrid sweeps) work.

The paper's matrix is written out below as plain data from its text and tables; every
expected count is computed here from that data, never by the expander's own helpers.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from archbench.core.record import make_record, schema
from archbench.core.validate import ConfigError
from archbench.plan.campaign import load_campaign, load_campaign_file
from archbench.plan.experiment_types import hybrid, thread_scaling
from archbench.plan.systems import resolve_system
from archbench.results import tables
from archbench.results.claims import read_claims
from archbench.results.collect import records_to_frame
from archbench.results.tables.best import resolve_best

CAMPAIGN = Path(__file__).resolve().parents[2] / "config" / "campaigns" / "bsc-2019.yaml"
CLAIMS = CAMPAIGN.parents[2] / "data" / "published" / "bsc-2019" / "bsc-2019-claims.csv"
REPS = 4  # Sec. IV: "we average four executions for each test"

# Sec. III: cores per node (2 sockets each).
CORES = {"marenostrum4": 48, "dibona": 64, "power9": 40}
# Table I: a vendor library on MareNostrum4 (MKL) and Dibona (ArmPL), none on Power9.
VENDOR_SETTINGS = {"marenostrum4": 2, "dibona": 2, "power9": 1}

# Sec. IV-A (Figs. 2-6): AlexNet, one process; thread counts 1, 2, 4, 8, 16, a socket, the
# node; batches 32-512 with both builds, 1024-8192 with the vendor library only.
THREADS = {"marenostrum4": [1, 2, 4, 8, 16, 24, 48], "dibona": [1, 2, 4, 8, 16, 32, 64],
           "power9": [1, 2, 4, 8, 16, 20, 40]}
SMALL_BATCHES = [32, 64, 128, 256, 512]
LARGE_BATCHES = [1024, 2048, 4096, 8192]

# Table II: processes per node and the batch each process trains with.
MN4_PROCESSES = [1, 2, 4, 8, 16, 24, 48]
MN4_BATCH = {"alexnet": [8192, 4096, 2048, 1024, 512, 341, 170],
             "resnet50": [512, 256, 128, 64, 32, 21, 10]}
# Dibona and Power9: every layout filling the node (Table II lists MN4's columns only).
LAYOUT_PROCESSES = {"dibona": [1, 2, 4, 8, 16, 32, 64], "power9": [1, 2, 4, 5, 8, 10, 20, 40]}


def other_batch(model: str, processes: int) -> int:
    """Table II, Dibona and Power9: AlexNet 512 at 1 x N and 256 otherwise; ResNet-50 64."""
    if model == "resnet50":
        return 64
    return 512 if processes == 1 else 256


def inter_values(threads: int) -> set[int]:
    """Inter-op threads tried per layout: 1, 2 and the process's threads (Table III: 1, 2, 20)."""
    return {1, 2, threads}


# Table III: the best configuration per cluster and model (processes, threads, inter-op).
TABLE_III = {("marenostrum4", "alexnet"): (1, 48, 1), ("marenostrum4", "resnet50"): (1, 48, 1),
             ("dibona", "alexnet"): (4, 16, 2), ("dibona", "resnet50"): (8, 8, 2),
             ("power9", "alexnet"): (2, 20, 20), ("power9", "resnet50"): (20, 2, 2)}
# Table III in full, each row run as published beside the sweep's best (Table IV's
# efficiencies belong to these layouts): (ppn, threads, inter, batch). Three batches are no
# Table II per-process batch (Dibona AlexNet, Power9 AlexNet and ResNet-50).
TABLE_III_AS_PUBLISHED = {("marenostrum4", "alexnet"): (1, 48, 1, 8192),
                          ("marenostrum4", "resnet50"): (1, 48, 1, 512),
                          ("dibona", "alexnet"): (4, 16, 2, 2048),
                          ("dibona", "resnet50"): (8, 8, 2, 64),
                          ("power9", "alexnet"): (2, 20, 20, 2048),
                          ("power9", "resnet50"): (20, 2, 2, 128)}
VENDOR = {"marenostrum4": True, "dibona": True, "power9": False}  # Table I: none on Power9
NODES = [1, 2, 4, 8, 16]  # Figs. 14-15, Table IV
DATA = ["synthetic", "real"]
MODELS = ["alexnet", "resnet50"]


@pytest.fixture(scope="module")
def campaign():
    return load_campaign_file(CAMPAIGN)


@pytest.fixture(scope="module")
def counts(campaign) -> Counter:
    return Counter((m["experiment"], m["system"]) for m in campaign.measurements)


def configurations(campaign, experiment: str, system: str) -> list[dict]:
    return [m for m in campaign.measurements
            if m["experiment"] == experiment and m["system"] == system and m["repetition"] == 0]


# ------------------------------------------------------------------ the paper's matrix
@pytest.mark.parametrize("system", ["marenostrum4", "dibona", "power9"])
def test_thread_scaling_runs_figs_2_to_6(campaign, counts, system):
    short = {"marenostrum4": "mn4"}.get(system, system)
    small = len(THREADS[system]) * len(SMALL_BATCHES) * VENDOR_SETTINGS[system] * REPS
    assert counts[(f"threads-{short}", system)] == small
    large = len(THREADS[system]) * len(LARGE_BATCHES) * REPS if system != "power9" else 0
    assert counts[(f"threads-{short}-large", system)] == large
    confs = [c for e in (f"threads-{short}", f"threads-{short}-large")
             for c in configurations(campaign, e, system)]
    assert {c["model"] for c in confs} == {"alexnet"}  # Sec. IV-A uses AlexNet only
    assert {c["processes_per_node"] for c in confs} == {1}
    assert sorted({c["intra_threads"] for c in confs}) == THREADS[system]
    assert max(c["intra_threads"] for c in confs) == CORES[system]
    large_confs = [c for c in confs if c["batch_per_process"] > 512]
    assert all(c["vendor_library_enabled"] for c in large_confs)  # vendor library only


def test_power9_runs_vanilla_only(campaign):
    power9 = [m for m in campaign.measurements if m["system"] == "power9"]
    assert power9 and all(m["vendor_library_enabled"] is False for m in power9)
    assert all(m["vendor_library"] is None for m in power9)


@pytest.mark.parametrize("model", MODELS)
def test_hybrid_on_marenostrum4_follows_table_ii(campaign, counts, model):
    expected = sum(len(inter_values(48 // p)) for p in MN4_PROCESSES) * 2 * REPS
    assert counts[(f"hybrid-mn4-{model}", "marenostrum4")] == expected
    confs = configurations(campaign, f"hybrid-mn4-{model}", "marenostrum4")
    for p, batch in zip(MN4_PROCESSES, MN4_BATCH[model]):
        layout = [c for c in confs if c["processes_per_node"] == p]
        assert {c["batch_per_process"] for c in layout} == {batch}
        assert {c["intra_threads"] for c in layout} == {48 // p}
        assert {c["inter_threads"] for c in layout} == inter_values(48 // p)


@pytest.mark.parametrize("system", ["dibona", "power9"])
@pytest.mark.parametrize("model", MODELS)
def test_hybrid_on_dibona_and_power9_follows_table_ii(campaign, counts, system, model):
    cores = CORES[system]
    expected = sum(len(inter_values(cores // p)) for p in LAYOUT_PROCESSES[system])
    assert counts[(f"hybrid-{model}", system)] == expected * VENDOR_SETTINGS[system] * REPS
    confs = configurations(campaign, f"hybrid-{model}", system)
    assert sorted({c["processes_per_node"] for c in confs}) == LAYOUT_PROCESSES[system]
    for c in confs:
        assert c["processes_per_node"] * c["intra_threads"] == cores  # all resources used
        assert c["batch_per_process"] == other_batch(model, c["processes_per_node"])
        assert c["strategy"] == "horovod" and c["nodes"] == 1


def test_every_table_iii_layout_is_in_a_hybrid_sweep(campaign):
    for (system, model), (p, t, inter) in TABLE_III.items():
        sweeps = [m for m in campaign.measurements if m["experiment_type"] == "hybrid"
                  and m["system"] == system and m["model"] == model]
        assert any((m["processes_per_node"], m["intra_threads"], m["inter_threads"]) == (p, t, inter)
                   for m in sweeps), (system, model)


@pytest.mark.parametrize("system", ["marenostrum4", "dibona", "power9"])
def test_node_scaling_runs_figs_14_15_on_up_to_16_nodes(campaign, counts, system):
    assert counts[("scaling", system)] == len(MODELS) * len(NODES) * len(DATA) * REPS
    confs = configurations(campaign, "scaling", system)
    assert sorted({c["nodes"] for c in confs}) == NODES
    assert {c["data"] for c in confs} == set(DATA)
    assert all(c["strategy"] == "horovod" and len(c["best_of"]) == 4 for c in confs)


@pytest.mark.parametrize("system, model", sorted(TABLE_III_AS_PUBLISHED))
def test_every_table_iii_row_scales_as_published(campaign, counts, system, model):
    name = f"scaling-table3-{system}-{model}"
    assert counts[(name, system)] == len(NODES) * len(DATA) * REPS
    ppn, threads, inter, batch = TABLE_III_AS_PUBLISHED[(system, model)]
    confs = configurations(campaign, name, system)
    assert sorted({c["nodes"] for c in confs}) == NODES and {c["data"] for c in confs} == set(DATA)
    for c in confs:
        assert (c["model"], c["processes_per_node"], c["intra_threads"]) == (model, ppn, threads)
        assert (c["inter_threads"], c["batch_per_process"]) == (inter, batch)
        assert c["workers"] == ppn * c["nodes"] and c["vendor_library_enabled"] == VENDOR[system]


def test_table_iv_claims_are_keyed_to_the_published_layout_series(campaign):
    """Every Table IV efficiency names its Table III layout, and the scaling-table3-*
    series of that system and model runs it on every node count: the claim is measured
    whatever layout the sweep picks for `scaling`."""
    claims = read_claims(CLAIMS)
    table_iv = claims[claims["metric"] == "efficiency"]
    assert len(table_iv) == len(TABLE_III_AS_PUBLISHED) * len(NODES) * len(DATA)
    for _, claim in table_iv.iterrows():
        layout = (claim["processes_per_node"], claim["threads"], claim["inter_threads"], claim["batch"])
        assert layout == TABLE_III_AS_PUBLISHED[(claim["system"], claim["model"])]
        series = configurations(campaign, f"scaling-table3-{claim['system']}-{claim['model']}",
                                claim["system"])
        assert any((c["nodes"], c["data"]) == (claim["nodes"], claim["data"]) for c in series)


def test_no_other_experiments(counts):
    systems = {"threads-mn4": 1, "threads-mn4-large": 1, "threads-dibona": 1,
               "threads-dibona-large": 1, "threads-power9": 1, "hybrid-mn4-alexnet": 1,
               "hybrid-mn4-resnet50": 1, "hybrid-alexnet": 2, "hybrid-resnet50": 2, "scaling": 3,
               **{f"scaling-table3-{s}-{m}": 1 for s, m in TABLE_III_AS_PUBLISHED}}
    assert Counter(e for e, _ in counts) == Counter(systems)


# -------------------------------------------- best layout, vendor speedup on the campaign
def fabricated(measurements: list[dict], throughput) -> list[dict]:
    """A valid ok record per measurement with ``throughput(measurement)`` img/s."""
    known = schema()["properties"]
    out = []
    for m in measurements:
        fields = {k: v for k, v in m.items() if k in known and k != "env"}
        out.append(make_record(**fields, throughput=throughput(m), throughput_unit="img/s",
                               start_time="2019-01-01T00:00:00Z", end_time="2019-01-01T00:01:00Z"))
    return out


def table_iii_wins(m: dict) -> float:
    """img/s that makes Table III's layout (with the vendor library where there is one)
    the best of every sweep."""
    layout = (m["processes_per_node"], m["intra_threads"], m["inter_threads"])
    best = layout == TABLE_III[(m["system"], m["model"])]
    return 100.0 if best and m["vendor_library_enabled"] == (m["system"] != "power9") else 50.0


def test_scaling_takes_table_iii_layouts_from_the_four_hybrid_sweeps(campaign):
    sweeps = [m for m in campaign.measurements if m["experiment_type"] == "hybrid"]
    frame = records_to_frame(fabricated(sweeps, table_iii_wins))
    placeholders = [m for m in campaign.measurements
                    if m["experiment"] == "scaling" and m["repetition"] == 0]
    for m in resolve_best(placeholders, frame):
        p, t, inter = TABLE_III[(m["system"], m["model"])]
        assert (m["processes_per_node"], m["intra_threads"], m["inter_threads"]) == (p, t, inter)
        mn4 = MN4_BATCH[m["model"]][MN4_PROCESSES.index(p)] if m["system"] == "marenostrum4" else None
        assert m["batch_per_process"] == (mn4 or other_batch(m["model"], p))
        assert m["global_batch"] == m["batch_per_process"] * p * m["nodes"]


def test_vendor_speedup_has_no_power9_rows(campaign):
    one_node = [m for m in campaign.measurements if m["experiment_type"] != "node_scaling"]
    records = fabricated(one_node, lambda m: 20.0 if m["vendor_library_enabled"] else 10.0)
    table = tables.vendor_speedup(records_to_frame(records))
    assert set(table["system"]) == {"marenostrum4", "dibona"}
    dibona = Counter(table.loc[table["system"].eq("dibona"), "experiment"])
    layouts = sum(len(inter_values(64 // p)) for p in LAYOUT_PROCESSES["dibona"])
    assert dibona == {"threads-dibona": len(THREADS["dibona"]) * len(SMALL_BATCHES),
                      "hybrid-alexnet": layouts, "hybrid-resnet50": layouts}
    assert table["speedup"].eq(2.0).all()


# ------------------------------------------------------------ engine pieces, in general
def system(vendor: str, cores: int = 4) -> dict:
    return resolve_system("box", {"arch": "x86_64", "cores_per_socket": cores,
                                  "vendor_library": vendor})


def test_vendor_axis_on_a_system_without_a_vendor_library_is_off_only():
    experiment = {"type": "thread_scaling", "models": ["alexnet"], "batch_per_process": [8],
                  "threads": [1, 2], "vendor_library": ["on", "off"]}
    with_library = thread_scaling.expand(experiment, system("onednn"))
    without = thread_scaling.expand(experiment, system("none"))
    assert Counter(c["vendor_library_enabled"] for c in with_library) == {True: 2, False: 2}
    assert [c["vendor_library_enabled"] for c in without] == [False, False]
    # the default axis (["on"]) is the vanilla run there too
    del experiment["vendor_library"]
    assert {c["vendor_library_enabled"] for c in thread_scaling.expand(experiment, system("none"))} == {False}


def test_layout_batch_per_process_replaces_the_batches_of_their_layouts():
    experiment = {"type": "hybrid", "models": ["alexnet"], "batch_per_process": [8],
                  "layout_batch_per_process": [{"processes": 1, "batch_per_process": [16, 32]}]}
    confs = hybrid.expand(experiment, system("none"))
    batches = {(c["processes_per_node"], c["batch_per_process"]) for c in confs}
    assert batches == {(1, 16), (1, 32), (2, 8), (4, 8)}
    per_node = hybrid.expand({**experiment, "batch_mode": "per_node"}, system("none"))
    assert {(c["processes_per_node"], c["batch_per_process"]) for c in per_node} == {
        (1, 16), (1, 32), (2, 4), (4, 2)}


def small_campaign(**scaling) -> dict:
    return {"campaign": "t", "systems": ["box"],
            "system_definitions": {"box": {"arch": "x86_64", "cores_per_socket": 2}},
            "experiments": {
                "a": {"type": "hybrid", "models": ["alexnet"], "batch_per_process": [4],
                      "processes": [1]},
                "b": {"type": "hybrid", "models": ["alexnet"], "batch_per_process": [8],
                      "processes": [2]},
                "scaling": {"type": "node_scaling", "models": ["alexnet"], "nodes": [1],
                            **scaling}}}


@pytest.mark.parametrize("bad", [[], ["a", "a"], ["a b"], [1]])
def test_best_must_name_experiments(bad):
    with pytest.raises(ConfigError, match="best"):
        load_campaign(small_campaign(best=bad))


def test_best_over_a_list_takes_the_highest_of_all_named_sweeps():
    measurements = load_campaign(small_campaign(best=["a", "b"])).measurements
    sweeps = [m for m in measurements if m["experiment"] in ("a", "b")]
    frame = records_to_frame(fabricated(sweeps, lambda m: 10.0 * m["processes_per_node"]))
    (resolved,) = resolve_best([m for m in measurements if m["experiment"] == "scaling"
                                and m["repetition"] == 0], frame)
    assert (resolved["processes_per_node"], resolved["batch_per_process"]) == (2, 8)  # from b
    assert resolved["tuning"]["best_of"] == ["a", "b"]
    only_a = load_campaign(small_campaign(best="a")).measurements
    (from_a,) = resolve_best([m for m in only_a if m["experiment"] == "scaling"
                              and m["repetition"] == 0], frame)
    assert (from_a["processes_per_node"], from_a["batch_per_process"]) == (1, 4)
