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
    return {"type": "inter_intra", "models": ["small_cnn"], "batch_sizes": [8],
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
    return {"type": "node_scaling", "models": ["small_cnn"], "batch_sizes": [8],
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
