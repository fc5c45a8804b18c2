"""Campaign validation (one clear line per bad input) and expansion."""

import copy

import pytest
import yaml
from conftest import REPO

from archbench.plan.campaign import ConfigError, load_campaign, load_campaign_file, raw_path


@pytest.fixture
def default():
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def test_default_campaign_expands_to_the_full_matrix(default):
    campaign = load_campaign(default)
    threads = campaign.systems["local"]["cores_per_socket"] * campaign.systems["local"]["sockets"]
    training = [m for m in campaign.measurements if m["experiment"] == "threads"]
    assert len(training) == 2 * threads * 2 * 2 * 3  # models x threads x batches x vendor x reps
    assert {m["intra_threads"] for m in training} == set(range(1, threads + 1))
    assert {m["vendor_library_enabled"] for m in training} == {True, False}
    paths = [raw_path(m) for m in campaign.measurements]
    assert len(paths) == len(set(paths))


def test_default_campaign_has_data_for_every_table(default):
    """Every experiment type behind a table or figure runs in the default campaign."""
    types = {m["experiment_type"] for m in load_campaign(default).measurements}
    assert types == {"thread_scaling", "hybrid", "inter_intra", "ppn_sweep", "horovod_tuning",
                     "kernel", "batch_sweep", "quality", "tune"}
    data = {m.get("data") for m in load_campaign(default).measurements}
    assert {"synthetic", "real"} <= data  # the I/O overhead pair


def test_default_campaign_compares_the_frameworks(default):
    """Configurations run in both frameworks (the framework_comparison table) and a PyTorch
    synthetic/real pair (a PyTorch row of the I/O overhead table)."""
    ms = load_campaign(default).measurements
    digits = [m for m in ms if m["experiment"] == "digits"]
    tensorflow = {m["config_id"] for m in digits if m["framework"] == "tensorflow"}
    pytorch = {m["config_id"] for m in digits if m["framework"] == "pytorch"}
    assert tensorflow and pytorch == {c + "_pytorch" for c in tensorflow}
    pairs = {(m["framework"], m["data"]) for m in ms if m["experiment"] == "io_pytorch"}
    assert pairs == {("pytorch", "synthetic"), ("pytorch", "real")}
    assert {m["framework"] for m in ms if m["kind"] == "kernel"} == {"tensorflow"}


def test_default_campaign_compares_precision_and_graph(default):
    """fp32 / bf16 x eager / compiled in both frameworks, each beside its fp32 eager twin
    (the precision_speedup table), on the digits' real data (a loss that means something)."""
    ms = [m for m in load_campaign(default).measurements if m["experiment"] == "numerics"]
    modes = {(m["framework"], m.get("precision") or "fp32", m.get("graph") or "eager") for m in ms}
    assert modes == {(f, p, g) for f in ("tensorflow", "pytorch") for p in ("fp32", "bf16")
                     for g in ("eager", "compiled")}
    assert {(m["model"], m["data"], m.get("math_mode")) for m in ms} == {("digits_cnn", "real", None)}
    assert len(ms) == len(modes)  # one run each: the compiles dominate its time


def test_repetitions_share_config_id_and_differ_in_path(default):
    ms = [m for m in load_campaign(default).measurements if m["experiment"] == "threads"]
    first = [m for m in ms if m["config_id"] == ms[0]["config_id"]]
    assert [m["repetition"] for m in first] == [0, 1, 2]


def edit(config, path, value):
    """Set config[path...] = value (path as dotted keys)."""
    keys = path.split(".")
    node = config
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    return config


@pytest.mark.parametrize("path, value, expected", [
    ("experiments.threads.bogus_key", 1, "experiments.threads.bogus_key: not a key of thread_scaling experiments"),
    ("experiments.threads.batch_per_process", "big", "experiments.threads.batch_per_process: 'big' is not of type 'array'"),
    ("experiments.threads.threads", [-1], "experiments.threads.threads"),
    ("experiments.threads.models", ["lenet9"], "experiments.threads.models.0: 'lenet9' is not one of"),
    ("experiments.threads.type", "warp_drive", "experiments.threads.type: unknown experiment type 'warp_drive'"),
    ("defaults.repetitions", 0, "defaults.repetitions: 0 is less than the minimum of 1 (in experiment "),
    ("systems", ["atlantis"], "systems: no system file config/systems/atlantis.yaml"),
    ("campaign", "bad name; rm -rf ~", "campaign: 'bad name; rm -rf ~' is not allowed here"),
    ("surprise", True, "surprise: not a key allowed here"),
])
def test_invalid_config_gives_one_line_naming_the_key(default, path, value, expected):
    bad = edit(copy.deepcopy(default), path, value)
    with pytest.raises(ConfigError) as info:
        load_campaign(bad)
    message = str(info.value)
    assert "\n" not in message
    assert expected in message


def test_inline_system_definition_is_validated(default):
    cfg = copy.deepcopy(default)
    cfg["system_definitions"] = {"local": {"arch": "sparc", "cores_per_socket": 2}}
    with pytest.raises(ConfigError, match=r"system_definitions.local.arch: 'sparc' is not one of"):
        load_campaign(cfg)


def test_yaml_syntax_error_is_one_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("campaign: x\nexperiments: [\n")
    with pytest.raises(ConfigError) as info:
        load_campaign_file(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
