"""Campaign expansion of every training experiment type, `best` placeholders and their
resolution from (fabricated) hybrid records, and schema errors."""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd
import pytest

from archbench.plan.campaign import ConfigError, load_campaign, raw_path
from archbench.plan.experiment_types.hybrid import hybrid_layouts
from archbench.plan.experiment_types.inter_intra import MKL_ENV
from archbench.plan.experiment_types.ppn_sweep import ppn_intra
from archbench.results import tables
from archbench.results.tables.best import resolve_best
from archbench.workloads.training.benchmark import command_for

SYSTEM = {"arch": "x86_64", "sockets": 2, "cores_per_socket": 4, "nodes": 4,
          "launcher": "srun", "vendor_library": "onednn"}


def expand(experiment: dict, system: dict | None = None, repetitions: int = 1) -> list[dict]:
    config = {"campaign": "t", "systems": ["s"], "system_definitions": {"s": system or SYSTEM},
              "defaults": {"repetitions": repetitions, "image_size": 32, "steps": 3,
                           "warmup_steps": 1},
              "experiments": {"e": experiment}}
    if isinstance(experiment.get("best"), str):  # the sweep it names (its runs are not returned)
        config["experiments"][experiment["best"]] = {"type": "hybrid", "models": ["alexnet"],
                                                     "batch_per_process": [8]}
    return [m for m in load_campaign(config).measurements if m["experiment"] == "e"]


def layouts(ms: list[dict]) -> set[tuple]:
    return {(m["nodes"], m["processes_per_node"], m["intra_threads"]) for m in ms}


def test_thread_scaling_accepts_cores_for_inter_threads():
    ms = expand({"type": "thread_scaling", "models": ["alexnet"], "batch_per_process": [8],
                 "threads": [1, 8], "inter_threads": [1, "cores"]})
    assert {(m["intra_threads"], m["inter_threads"]) for m in ms} == {(1, 1), (1, 8), (8, 1), (8, 8)}


def test_batch_sweep_defaults_to_all_cores():
    ms = expand({"type": "batch_sweep", "models": ["resnet50"], "batch_per_process": [8, 16, 32],
                 "data": ["synthetic", "real"]}, repetitions=3)
    assert len(ms) == 3 * 2 * 3
    assert {m["intra_threads"] for m in ms} == {8} and {m["strategy"] for m in ms} == {"single"}
    assert {m["repetition"] for m in ms} == {0, 1, 2}


def test_hybrid_fills_the_node_with_processes_times_threads():
    assert hybrid_layouts(48) == [(1, 48), (2, 24), (3, 16), (4, 12), (6, 8), (8, 6), (12, 4),
                                  (16, 3), (24, 2), (48, 1)]
    ms = expand({"type": "hybrid", "models": ["resnet50"], "batch_per_process": [64],
                 "inter_threads": [1, 2]})
    assert layouts(ms) == {(1, 1, 8), (1, 2, 4), (1, 4, 2), (1, 8, 1)}
    assert all(m["processes_per_node"] * m["intra_threads"] == 8 for m in ms)
    assert {m["strategy"] for m in ms} == {"horovod"} and len(ms) == 8
    assert all(m["global_batch"] == 64 * m["processes_per_node"] for m in ms)


def test_hybrid_per_node_batches_are_divided_among_processes():
    ms = expand({"type": "hybrid", "models": ["alexnet"], "batch_per_process": [8],
                 "batch_mode": "per_node", "processes": [1, 2, 4, 8, 16]})
    assert {(m["processes_per_node"], m["batch_per_process"]) for m in ms} == {
        (1, 8), (2, 4), (4, 2), (8, 1)}  # 16 processes exceed the 8 cores


def test_inter_intra_sweeps_cores_threads_and_mkl_settings():
    ms = expand({"type": "inter_intra", "models": ["resnet50"], "batch_per_process": [64],
                 "cores": [1, 4], "inter_threads": [0, 1, 2, "cores"],
                 "intra_threads": [0, 1, "cores"]})
    ids = [m["config_id"] for m in ms]
    assert len(ids) == len(set(ids))
    # 1 core: inter {0,1,2} x intra {0,1}; 4 cores: inter {0,1,2,4} x intra {0,1,4}; x mkl 2
    assert len(ms) == (3 * 2 + 4 * 3) * 2
    on = [m for m in ms if m["env"]]
    assert len(on) == len(ms) // 2 and all(m["env"] == MKL_ENV for m in on)
    assert {m["tuning"]["cores"] for m in ms} == {1, 4}
    four = [m for m in ms if m["tuning"]["cores"] == 4]
    assert {m["intra_threads"] for m in four} == {0, 1, 4}
    assert "--cores" in command_for(four[0], SYSTEM)


def test_inter_intra_all_cores_and_custom_env():
    ms = expand({"type": "inter_intra", "models": ["small_cnn"], "batch_per_process": [8],
                 "cores": "all", "inter_threads": [1], "intra_threads": ["cores"],
                 "mkl_settings": ["on"], "mkl_env": {"KMP_BLOCKTIME": 1, "OMP_NUM_THREADS": 4}})
    assert [m["intra_threads"] for m in ms] == list(range(1, 9))
    assert ms[0]["env"] == {"KMP_BLOCKTIME": "1", "OMP_NUM_THREADS": "4"}


def test_ppn_sweep_leaves_a_core_per_process():
    assert [ppn_intra(48, p) for p in (1, 2, 4, 8, 16, 48)] == [47, 23, 11, 5, 2, 1]
    ms = expand({"type": "ppn_sweep", "models": ["resnet50"], "batch_per_process": [32],
                 "nodes": [1, 2, 16]})
    assert layouts(ms) == {(n, p, max(1, 8 // p - 1)) for n in (1, 2) for p in (1, 2, 4, 8)}
    assert all(m["workers"] == m["nodes"] * m["processes_per_node"] for m in ms)


def test_node_scaling_explicit_with_every_strategy():
    ms = expand({"type": "node_scaling", "models": ["alexnet"], "batch_per_process": [64],
                 "processes_per_node": 2, "strategies": ["horovod", "mirrored", "parameter_server"],
                 "parameter_servers": [1, 2], "data": ["synthetic", "real"]})
    counts = Counter((m["strategy"], m["nodes"]) for m in ms)
    assert counts == {(s, n): (4 if s == "parameter_server" else 2)
                      for s in ("horovod", "mirrored", "parameter_server") for n in (1, 2, 4)}
    assert {m["intra_threads"] for m in ms} == {4}
    ps = [m for m in ms if m["strategy"] == "parameter_server"]
    assert {m["parameter_servers"] for m in ps} == {1, 2}
    assert len({m["config_id"] for m in ps}) == len(ps)
    assert len({raw_path(m) for m in ms}) == len(ms)
    for m in ms:
        assert command_for(m, SYSTEM)[0] == "srun"


def test_node_scaling_best_expands_to_placeholders():
    ms = expand({"type": "node_scaling", "models": ["resnet50", "alexnet"], "best": "hyb",
                 "nodes": [1, 2]})
    assert len(ms) == 4 and all(m["best_of"] == "hyb" for m in ms)
    assert all(m["tuning"]["best_of"] == "hyb" for m in ms)
    with pytest.raises(ValueError, match="placeholder"):
        command_for(ms[0], SYSTEM)


def hybrid_runs(rows) -> pd.DataFrame:
    """Tidy rows of a hybrid sweep "hyb" on system "s": (model, p, t, batch, img/s or None)."""
    return pd.DataFrame([dict(experiment="hyb", experiment_type="hybrid", system="s", kind="train",
                              model=model, data="synthetic", strategy="horovod",
                              vendor_library_enabled=True, nodes=1, processes_per_node=p,
                              workers=p, intra_threads=t, inter_threads=1, batch_per_process=b,
                              config_id=f"{model}_{p}x{t}_b{b}", throughput=v,
                              throughput_unit="img/s", status="ok" if v else "oom")
                         for model, p, t, b, v in rows])


def fabricated_summary() -> pd.DataFrame:
    return hybrid_runs([("resnet50", 1, 8, 64, 10.0), ("resnet50", 2, 4, 64, 14.0),
                        ("resnet50", 4, 2, 32, 13.0), ("resnet50", 8, 1, 16, None),
                        ("alexnet", 1, 8, 256, 90.0), ("alexnet", 8, 1, 32, 40.0)])


def test_resolve_best_takes_the_highest_mean_per_system_and_model():
    ms = expand({"type": "node_scaling", "models": ["resnet50", "alexnet"], "best": "hyb",
                 "nodes": [1, 4], "strategies": ["horovod", "parameter_server"]}, repetitions=2)
    ms.append({**ms[0], "best_of": None, "config_id": "untouched"})
    resolved = resolve_best(ms, fabricated_summary())
    assert len(resolved) == len(ms) and resolved[-1]["config_id"] == "untouched"
    for m in resolved[:-1]:
        assert "best_of" not in m and m["tuning"]["best_of"] == "hyb"
        expected = {"resnet50": (2, 4, 64), "alexnet": (1, 8, 256)}[m["model"]]
        assert (m["processes_per_node"], m["intra_threads"], m["batch_per_process"]) == expected
        assert m["workers"] == m["nodes"] * m["processes_per_node"]
        assert m["global_batch"] == m["workers"] * m["batch_per_process"]
        assert m["config_id"].startswith(f"{m['model']}_b{expected[2]}_N{m['nodes']}_p{expected[0]}")
        assert command_for(m, SYSTEM)[0] == "srun"
    ids = {(m["config_id"], m["repetition"]) for m in resolved}
    assert len(ids) == len(resolved)


def test_resolve_best_from_the_tidy_measurements_table():
    tidy = hybrid_runs([("resnet50", 1, 8, 32, 5.0), ("resnet50", 1, 8, 32, 7.0),
                        ("resnet50", 4, 2, 32, 6.5), ("resnet50", 4, 2, 32, None)])
    ms = expand({"type": "node_scaling", "models": ["resnet50"], "best": "hyb", "nodes": [2]})
    (m,) = resolve_best(ms, tidy)
    assert (m["processes_per_node"], m["intra_threads"]) == (4, 2)  # mean 6.5 > 6.0


def test_the_hybrid_best_table_names_the_layout_node_scaling_runs():
    # a vendor-off layout is fastest overall; node scaling (vendor on) must run the
    # vendor-on winner, and the table must publish exactly that one for vendor on
    on = hybrid_runs([("resnet50", 1, 8, 64, 10.0), ("resnet50", 2, 4, 64, 12.0)])
    off = hybrid_runs([("resnet50", 4, 2, 64, 30.0)]).assign(vendor_library_enabled=False)
    tidy = pd.concat([on, off], ignore_index=True)
    ms = expand({"type": "node_scaling", "models": ["resnet50"], "best": "hyb", "nodes": [2]})
    (m,) = resolve_best(ms, tidy)
    table = tables.best_hybrid(tidy)
    row = table[table["vendor_library_enabled"].eq(True)].iloc[0]
    assert (m["processes_per_node"], m["intra_threads"], m["batch_per_process"]) == (2, 4, 64)
    assert (row["processes_per_node"], row["intra_threads"], row["batch_per_process"]) == (2, 4, 64)
    assert set(table["configuration"]) == {"2x4", "4x2"}  # one winner per vendor setting


def test_resolve_best_takes_the_layout_of_the_same_framework():
    tensorflow = hybrid_runs([("resnet50", 1, 8, 64, 10.0), ("resnet50", 2, 4, 64, 12.0)])
    pytorch = hybrid_runs([("resnet50", 4, 2, 64, 9.0), ("resnet50", 8, 1, 64, 11.0)])
    tidy = pd.concat([tensorflow, pytorch.assign(framework="pytorch")], ignore_index=True)
    ms = expand({"type": "node_scaling", "models": ["resnet50"], "best": "hyb", "nodes": [2],
                 "framework": ["tensorflow", "pytorch"]})
    layouts_ = {m["framework"]: (m["processes_per_node"], m["intra_threads"])
                for m in resolve_best(ms, tidy)}
    assert layouts_ == {"tensorflow": (2, 4), "pytorch": (8, 1)}
    assert len(tables.best_hybrid(tidy)) == 2  # one best layout per framework


def test_resolve_best_without_results_raises_or_drops():
    ms = expand({"type": "node_scaling", "models": ["vgg16"], "best": "hyb", "nodes": [1]})
    with pytest.raises(ValueError, match="no successful run of 'hyb'.*vgg16"):
        resolve_best(ms, fabricated_summary())
    assert resolve_best(ms, fabricated_summary(), on_missing="drop") == []


def test_horovod_tuning_sets_knobs_per_configuration():
    ms = expand({"type": "horovod_tuning", "models": ["resnet50"], "batch_per_process": [32],
                 "cycle_time_ms": [1, 5, 10], "fusion_threshold_mb": [0, 64],
                 "processes_per_node": 4})
    assert len(ms) == 6 and layouts(ms) == {(1, 4, 2)}
    knobs = {(m["tuning"]["horovod_cycle_time_ms"], m["tuning"]["horovod_fusion_threshold_bytes"])
             for m in ms}
    assert knobs == {(c, f) for c in (1, 5, 10) for f in (0, 64 << 20)}
    argv = command_for(ms[0], SYSTEM)
    assert "--horovod-cycle-time" in argv and "--horovod-fusion-threshold" in argv


def test_gloo_controller_stays_on_one_node():
    ms = expand({"type": "ppn_sweep", "models": ["small_cnn"], "batch_per_process": [8],
                 "horovod_controller": ["mpi", "gloo"], "processes_per_node": [2]})
    assert {m["tuning"].get("horovod_controller", "mpi") for m in ms} == {"mpi", "gloo"}
    with pytest.raises(ConfigError, match="gloo"):
        expand({"type": "ppn_sweep", "models": ["small_cnn"], "batch_per_process": [8], "nodes": [2],
                "horovod_controller": ["gloo"]})


def test_digits_experiment_at_the_digits_size():
    ms = expand({"type": "batch_sweep", "models": ["digits_cnn"], "batch_per_process": [64],
                 "image_size": 8, "num_classes": 10, "data": ["synthetic", "real"]})
    assert {(m["image_size"], m["data"]) for m in ms} == {(8, "synthetic"), (8, "real")}


@pytest.mark.parametrize("experiment,message", [
    ({"type": "node_scaling", "models": ["alexnet"], "best": "hyb", "batch_per_process": [8]},
     "experiments.e.best: takes processes, threads and batch from 'hyb'; remove batch_per_process"),
    ({"type": "node_scaling", "models": ["alexnet"]}, "experiments.e.batch_per_process: missing \\(required\\)"),
    ({"type": "hybrid", "models": ["alexnet"], "batch_per_process": [8], "threads_per_process": 2},
     "threads_per_process"),
    ({"type": "horovod_tuning", "models": ["alexnet"], "batch_per_process": [8], "cycle_time_ms": [0],
      "fusion_threshold_mb": [1]}, "cycle_time_ms"),
    ({"type": "inter_intra", "models": ["alexnet"], "batch_per_process": [8], "intra_threads": ["all"]},
     "intra_threads"),
    ({"type": "inter_intra", "models": ["alexnet"], "batch_per_process": [8],
      "mkl_env": {"KMP_AFFINITY": "x; rm -rf /"}}, "mkl_env"),
])
def test_schema_rejects_bad_experiments(experiment, message):
    with pytest.raises(ConfigError, match=message):
        expand(experiment)


# one small experiment of every training type (on the 8-core, 4-node SYSTEM)
TRAINING = {
    "thread_scaling": {"models": ["alexnet"], "batch_per_process": [8], "threads": [1, 8]},
    "batch_sweep": {"models": ["alexnet"], "batch_per_process": [8, 16]},
    "hybrid": {"models": ["alexnet"], "batch_per_process": [8], "processes": [1, 2]},
    "inter_intra": {"models": ["alexnet"], "batch_per_process": [8], "cores": [2, 4]},
    "ppn_sweep": {"models": ["alexnet"], "batch_per_process": [8], "processes_per_node": [1, 2],
                  "nodes": [1, 2]},
    "node_scaling": {"models": ["alexnet"], "batch_per_process": [8], "nodes": [1, 2]},
    "horovod_tuning": {"models": ["alexnet"], "batch_per_process": [8], "cycle_time_ms": [1, 5],
                       "fusion_threshold_mb": [0, 64]},
}


def pytorch_id(tensorflow_id: str) -> str:
    """The id of a TensorFlow configuration's PyTorch twin: _pytorch before the hash of
    its settings, if it has one."""
    return re.sub(r"(_[0-9a-f]{8})?$", r"_pytorch\1", tensorflow_id, count=1)


def without(m: dict, *keys: str) -> dict:
    return {k: v for k, v in m.items() if k not in keys}


@pytest.mark.parametrize("kind", list(TRAINING))
def test_the_framework_axis_runs_each_configuration_once_per_framework(kind):
    """TensorFlow keeps the ids it had; PyTorch runs the same configurations, ids ending
    in _pytorch, and its workers are started with --framework pytorch."""
    alone = expand({"type": kind, **TRAINING[kind]})
    both = expand({"type": kind, **TRAINING[kind], "framework": ["tensorflow", "pytorch"]})
    assert {m["framework"] for m in alone} == {"tensorflow"}
    assert len(both) == 2 * len(alone) >= 4
    tf = [m for m in both if m["framework"] == "tensorflow"]
    pt = [m for m in both if m["framework"] == "pytorch"]
    assert tf == alone
    assert [m["config_id"] for m in pt] == [pytorch_id(m["config_id"]) for m in alone]
    for a, b in zip(alone, pt):
        assert without(a, "framework", "config_id") == without(b, "framework", "config_id")
        argv = command_for(b, SYSTEM)
        assert argv[argv.index("--framework") + 1] == "pytorch"
    assert len({raw_path(m) for m in both}) == len(both)


def test_pytorch_alone_and_the_framework_order():
    ms = expand({"type": "thread_scaling", "models": ["alexnet"], "batch_per_process": [8],
                 "threads": [1], "framework": ["pytorch", "tensorflow"]})
    assert [m["framework"] for m in ms] == ["pytorch", "tensorflow"]
    (m,) = expand({"type": "thread_scaling", "models": ["alexnet"], "batch_per_process": [8],
                   "threads": [1], "framework": ["pytorch"]})
    assert m["config_id"] == "alexnet_b8_N1_p1_t1_i1_vlon_synthetic_single_pytorch"


def test_loader_workers_are_planned_for_pytorch_configurations_only():
    ms = expand({"type": "thread_scaling", "models": ["alexnet"], "batch_per_process": [8],
                 "threads": [2], "data": ["synthetic", "real"], "loader_workers": 3,
                 "framework": ["tensorflow", "pytorch"]})
    tuning = {(m["framework"], m["data"]): m.get("tuning") for m in ms}
    assert tuning == {("tensorflow", "synthetic"): None, ("tensorflow", "real"): None,
                      ("pytorch", "synthetic"): {"loader_workers": 3},
                      ("pytorch", "real"): {"loader_workers": 3}}
    real = next(m for m in ms if (m["framework"], m["data"]) == ("pytorch", "real"))
    argv = command_for(real, SYSTEM)
    assert argv[argv.index("--loader-workers") + 1] == "3"
    tf = next(m for m in ms if m["framework"] == "tensorflow")
    assert "--loader-workers" not in command_for(tf, SYSTEM)
    # the synthetic and real PyTorch runs keep one variant: the I/O-overhead table pairs them
    ids = [m["config_id"] for m in ms if m["framework"] == "pytorch"]
    assert len({i.rsplit("_", 1)[1] for i in ids}) == 1


def test_kernels_stay_tensorflow():
    config = {"campaign": "t", "systems": ["s"], "system_definitions": {"s": SYSTEM},
              "defaults": {"repetitions": 1},
              "experiments": {"e": {"type": "kernel", "kernels": ["matmul"], "sizes": [64],
                                    "workers": [1, 2]}}}
    ms = load_campaign(config).measurements
    assert len(ms) == 2 and {m["framework"] for m in ms} == {"tensorflow"}
    assert not any("pytorch" in m["config_id"] for m in ms)


@pytest.mark.parametrize("experiment, message", [
    ({"type": "node_scaling", "strategies": ["parameter_server"], "framework": ["pytorch"]},
     "framework: framework pytorch has no strategy 'parameter_server' (it has: single, horovod, ddp, fsdp2)"),
    ({"type": "node_scaling", "variable_update": ["ps_async"], "framework": ["tensorflow", "pytorch"]},
     "framework: framework pytorch has no strategy 'parameter_server' (it has: single, horovod, ddp, fsdp2)"),
    ({"type": "node_scaling", "strategies": ["mirrored"], "framework": ["pytorch"]},
     "framework: framework pytorch has no strategy 'mirrored' (it has: single, horovod, ddp, fsdp2)"),
    ({"type": "node_scaling", "strategies": ["ddp"]},
     "framework: framework tensorflow has no strategy 'ddp' (it has: single, horovod, mirrored, "
     "parameter_server)"),
    ({"type": "thread_scaling", "loader_workers": 2, "data": ["real"]},
     "loader_workers: only pytorch configurations take it (add pytorch to framework)"),
    ({"type": "thread_scaling", "loader_workers": 2, "framework": ["pytorch"]},
     "loader_workers: the loader feeds real data only (add real to data)"),
])
def test_a_framework_without_what_the_experiment_asks_is_refused(experiment, message):
    experiment = {"models": ["alexnet"], "batch_per_process": [8], "nodes": [1], **experiment}
    if experiment["type"] != "node_scaling":
        del experiment["nodes"]
    with pytest.raises(ConfigError) as info:
        expand(experiment)
    assert str(info.value) == f"experiments.e.{message}"


def test_a_framework_without_a_model_is_refused(monkeypatch):
    from archbench.workloads.training.pytorch import models as pytorch_models
    monkeypatch.delitem(pytorch_models.MODELS, "vgg16")
    assert expand({"type": "thread_scaling", "models": ["vgg16"], "batch_per_process": [8],
                   "threads": [1]})
    with pytest.raises(ConfigError, match=r"^experiments\.e\.framework: framework pytorch has no "
                                          r"model 'vgg16' \(it has: [a-z0-9_, ]+\)$"):
        expand({"type": "thread_scaling", "models": ["vgg16"], "batch_per_process": [8],
                "threads": [1], "framework": ["tensorflow", "pytorch"]})


def test_every_training_type_has_a_described_schema():
    from archbench.plan.campaign import experiment_schema
    from archbench.plan.experiment_types import EXPERIMENT_TYPES
    defs = experiment_schema()["$defs"]
    for kind in ("thread_scaling", "batch_sweep", "hybrid", "inter_intra", "ppn_sweep",
                 "node_scaling", "horovod_tuning"):
        assert kind in EXPERIMENT_TYPES and defs[kind]["description"]
        assert defs[kind]["unevaluatedProperties"] is False
        for name, prop in defs[kind].get("properties", {}).items():
            assert prop.get("description"), f"{kind}.{name}"


def test_every_type_feeds_registered_tables_and_figures():
    from archbench.plan.experiment_types import EXPERIMENT_TYPES, feeding
    from archbench.results.figures import FIGURES
    from archbench.results.tables import TABLES
    for t in EXPERIMENT_TYPES.values():
        assert t.tables and set(t.tables) <= set(TABLES), t.name
        assert set(t.figures) <= set(FIGURES), t.name
    assert feeding("node_scaling") == ["ppn_sweep", "node_scaling"]
