"""Three sweep keys the CESGA 2018 and CSCS 2017 matrices need: inter_intra's explicit
``thread_pairs`` and node_scaling's ``parameter_servers: all`` and ``scaling_unit``."""

from __future__ import annotations

from collections import defaultdict

import pytest

from archbench.plan.campaign import ConfigError, load_campaign

SYSTEM = {"arch": "x86_64", "sockets": 1, "cores_per_socket": 4, "nodes": 8,
          "launcher": "srun", "vendor_library": "onednn"}


def expand(experiment: dict) -> list[dict]:
    config = {"campaign": "t", "systems": ["s"], "system_definitions": {"s": SYSTEM},
              "defaults": {"repetitions": 1, "image_size": 32, "steps": 3, "warmup_steps": 1},
              "experiments": {"e": experiment}}
    return load_campaign(config).measurements


def inter_intra(**keys) -> dict:
    return {"type": "inter_intra", "models": ["small_cnn"], "batch_per_process": [8],
            "mkl_settings": ["off"], **keys}


def test_thread_pairs_run_only_the_listed_pairs_with_cores_resolved():
    ms = expand(inter_intra(cores=[1, 4], thread_pairs=[[1, 0], ["cores", "cores"], [2, "cores"]]))
    seen = defaultdict(set)
    for m in ms:
        seen[m["tuning"]["cores"]].add((m["inter_threads"], m["intra_threads"]))
    # on 1 core [cores, cores] = (1, 1) and [2, cores] = (2, 1); on 4 cores (4, 4), (2, 4)
    assert seen == {1: {(1, 0), (1, 1), (2, 1)}, 4: {(1, 0), (4, 4), (2, 4)}}


def test_without_thread_pairs_the_product_still_runs():
    ms = expand(inter_intra(cores=[4], inter_threads=[0, 1], intra_threads=[1, "cores"]))
    assert {(m["inter_threads"], m["intra_threads"]) for m in ms} == {(0, 1), (0, 4), (1, 1), (1, 4)}


@pytest.mark.parametrize("keys, message", [
    ({"thread_pairs": [[1, 0]], "inter_threads": [1]}, "experiments.e.thread_pairs: replaces"),
    ({"thread_pairs": [[1, 0, 2]]}, "thread_pairs"),
    ({"thread_pairs": [[1, "all"]]}, "thread_pairs"),
])
def test_bad_thread_pairs_are_refused(keys, message):
    with pytest.raises(ConfigError, match=message):
        expand(inter_intra(**keys))


def scaling(**keys) -> dict:
    return {"type": "node_scaling", "models": ["small_cnn"], "batch_per_process": [8],
            "strategies": ["parameter_server"], **keys}


def ps_per_workers(ms: list[dict]) -> dict[int, list[int]]:
    out = defaultdict(list)
    for m in ms:
        out[m["workers"]].append(m["parameter_servers"])
    return {w: sorted(c) for w, c in out.items()}


def test_all_parameter_servers_go_up_to_the_workers_of_each_size():
    ms = expand(scaling(nodes=[1, 3, 8], parameter_servers="all"))
    assert ps_per_workers(ms) == {1: [1], 3: [1, 2, 3], 8: [1, 2, 4, 8]}
    two_per_node = expand(scaling(nodes=[3], processes_per_node=2, parameter_servers="all"))
    assert ps_per_workers(two_per_node) == {6: [1, 2, 4, 6]}


def test_a_parameter_server_list_is_cut_at_each_sizes_workers():
    # "from 1 to the number of Workers" (CSCS 2017 Sec. 5.1): 2 PSs need 2 workers
    ms = expand(scaling(nodes=[1, 2], parameter_servers=[1, 2]))
    assert ps_per_workers(ms) == {1: [1], 2: [1, 2]}


def test_other_words_for_parameter_servers_are_refused():
    with pytest.raises(ConfigError, match="parameter_servers"):
        expand(scaling(parameter_servers="workers"))


def test_scaling_unit_names_what_the_series_counts():
    assert {m["scaling_unit"] for m in expand(scaling(nodes=[1, 2]))} == {"nodes"}
    ms = expand(scaling(nodes=[1, 2], scaling_unit="workers"))
    assert {m["scaling_unit"] for m in ms} == {"workers"}
    with pytest.raises(ConfigError, match="scaling_unit"):
        expand(scaling(scaling_unit="racks"))


# ------------------------------------------------- a setting is an axis by declaration

TRAINING_EXPERIMENTS = {
    "thread_scaling": {"threads": [1]},
    "batch_sweep": {},
    "hybrid": {"processes": [1]},
    "inter_intra": {"mkl_settings": ["off"], "thread_pairs": [[1, 1]]},
    "ppn_sweep": {"processes_per_node": [1], "nodes": [1]},
    "node_scaling": {"nodes": [1]},
    "horovod_tuning": {"cycle_time_ms": [1], "fusion_threshold_mb": [1], "processes_per_node": 1,
                       "nodes": [1]},
    "quality": {"models": ["digits_cnn"], "data": ["real"]},
}
# tune searches a declared axis rather than multiplying its measurements by it: tested in
# tests/test_tune.py (test_a_declared_axis_is_a_dimension_of_the_space)
SEARCHING = {"tune"}


def training_experiment(kind: str, **keys) -> dict:
    return {"type": kind, "models": ["small_cnn"], "batch_per_process": [8],
            **TRAINING_EXPERIMENTS[kind], **keys}


@pytest.fixture
def throwaway_axis(monkeypatch):
    """A sweepable setting registered as a new one would be: one declaration."""
    from archbench.plan.campaign import experiment_schema
    from archbench.workloads.training import settings

    knob = settings.Setting(name="throwaway_mode", default="plain", choices=("plain", "fancy"),
                            help="a throwaway mode", planned="tuning.throwaway_mode",
                            identity=True, axis="throwaway_modes")
    monkeypatch.setattr(settings, "SETTINGS", (*settings.SETTINGS, knob))
    experiment_schema.cache_clear()
    yield knob
    experiment_schema.cache_clear()


def test_the_training_types_know_every_setting_types_from_the_experiment_types():
    """Every training type is tested below (a new type joins TRAINING_EXPERIMENTS)."""
    from archbench.plan.experiment_types import EXPERIMENT_TYPES

    assert set(TRAINING_EXPERIMENTS) == set(EXPERIMENT_TYPES) - {"kernel"} - SEARCHING


@pytest.mark.parametrize("kind", sorted(TRAINING_EXPERIMENTS))
def test_a_declared_axis_is_an_experiment_key_every_training_type_sweeps(throwaway_axis, kind):
    """A Setting with ``axis`` is an experiment key of every training type, its values
    multiply the configurations, and it reaches the worker's command line; its default is
    left out of the tuning, so the ids of configurations that do not sweep it stay."""
    from archbench.workloads.training.settings import planned_argv

    plain = expand(training_experiment(kind))
    both = expand(training_experiment(kind, throwaway_modes=["plain", "fancy"]))
    assert len(both) == 2 * len(plain)
    assert {m["config_id"] for m in plain} < {m["config_id"] for m in both}
    fancy = [m for m in both if m.get("tuning", {}).get("throwaway_mode") == "fancy"]
    assert len(fancy) == len(plain)
    argv = planned_argv(fancy[0])
    assert argv[argv.index("--throwaway-mode") + 1] == "fancy"
    with pytest.raises(ConfigError, match=r"experiments\.e\.throwaway_modes\.0: 'odd' is not one of"):
        expand(training_experiment(kind, throwaway_modes=["odd"]))


def test_the_schema_keys_of_the_axes_are_the_settings(throwaway_axis):
    """``$defs/training`` takes a key per declared axis, made from the Setting."""
    from archbench.plan.campaign import experiment_schema
    from archbench.workloads.training.settings import axes

    defs = experiment_schema()["$defs"]
    declared = {s.axis for s in axes()}
    assert {"batch_per_process", "vendor_library", "data", "throwaway_modes"} <= declared
    assert declared <= set(defs["training"]["properties"])
    assert defs["training"]["properties"]["throwaway_modes"]["items"] == {"enum": ["plain", "fancy"]}
    assert defs["training_required"]["required"] == ["models", "batch_per_process"]


def test_an_axis_value_twice_is_refused():
    with pytest.raises(ConfigError, match=r"vendor_library: \['on', True\] gives on twice"):
        expand(training_experiment("batch_sweep", vendor_library=["on", True]))


@pytest.mark.parametrize("old, new", [("batch_sizes", "batch_per_process"),
                                      ("layout_batch_sizes", "layout_batch_per_process")])
def test_a_renamed_key_is_refused_in_one_line_naming_the_file(tmp_path, old, new):
    import yaml

    from archbench.plan.campaign import load_campaign_file

    config = {"campaign": "t", "systems": ["s"], "system_definitions": {"s": SYSTEM},
              "experiments": {"e": {"type": "hybrid", "models": ["small_cnn"], old: [8]}}}
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as raised:
        load_campaign_file(path)
    assert str(raised.value) == f"{path}: experiments.e.{old}: renamed {new}"
    config["defaults"] = {old: [8]}
    del config["experiments"]["e"][old]
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=rf"defaults\.{old}: renamed {new} \(in experiment e\)$"):
        load_campaign_file(path)


def test_image_size_and_classes_default_to_the_models():
    """digits_cnn is planned at its own 8 px and 10 classes, an ImageNet model at 224 and
    1000, an Inception at 299, without the campaign restating them."""
    config = {"campaign": "t", "systems": ["s"], "system_definitions": {"s": SYSTEM},
              "defaults": {"repetitions": 1, "steps": 3, "warmup_steps": 1},
              "experiments": {"e": {"type": "batch_sweep", "batch_per_process": [8],
                                    "models": ["digits_cnn", "resnet50", "inception_v3"]}}}
    planned = {m["model"]: (m["image_size"], m["num_classes"])
               for m in load_campaign(config).measurements}
    assert planned == {"digits_cnn": (8, 10), "resnet50": (224, 1000), "inception_v3": (299, 1000)}
