"""The malformed inputs an independent test found accepted, crashing or hanging: each is
now refused with one line naming the file and key, before any job."""

from __future__ import annotations

import copy
import re
import time

import pytest
import yaml
from conftest import REPO, count_input, snakemake

from archbench import systems
from archbench.campaign import ConfigError, load_campaign, load_campaign_file

TINY = yaml.safe_load((REPO / "tests" / "campaigns" / "tiny.yaml").read_text())
LOCAL = yaml.safe_load((REPO / "config" / "systems" / "local.yaml").read_text())
BOMB = "\n".join(["b0: &b0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"] + [
    f"b{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 10) + "]" for i in range(1, 9)]) + "\n"


def campaign(experiment: dict | None = None, system: dict | None = None, **top) -> dict:
    config = copy.deepcopy(TINY)
    if experiment is not None:
        config["experiments"]["threads"].update(experiment)
    config["system_definitions"] = {"local": {**LOCAL, "cores_per_socket": 2, **(system or {})}}
    config.update(top)
    return config


def rejected(config: dict, *expected: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_campaign(config, source="c.yaml")
    message = str(info.value)
    count_input("campaign (listed cases)", "rejected")
    assert "\n" not in message and message.startswith("c.yaml: "), message
    for part in expected:
        assert part in message, message
    return message


@pytest.mark.parametrize("experiment, expected", [
    ({"batch_sizes": [8.0]}, ("experiments.threads.batch_sizes.0", "not of type 'integer'")),
    ({"threads": [1000000]}, ("experiments.threads: 1000000 intra-op threads per process > the 2 hardware threads",)),
    ({"threads": [3]}, ("experiments.threads: 3 intra-op threads per process > the 2 hardware threads",)),
    ({"batch_sizes": [10**20]}, ("experiments.threads.batch_sizes.0", "maximum")),
    ({"batch_sizes": [1e20]}, ("experiments.threads.batch_sizes.0",)),
    ({"steps": 10**30}, ("experiments.threads.steps", "maximum of 1000000")),
    ({"steps": 1e30}, ("experiments.threads.steps",)),
    ({"timeout_minutes": float("inf")}, ("timeout_minutes", "inf")),
    ({"timeout_minutes": float("nan")}, ("timeout_minutes",)),
    ({"memory_limit_mb": 64}, ("experiments.threads.memory_limit_mb", "minimum of 2048")),
    ({"inter_threads": [5]}, ("experiments.threads: 5 inter-op threads per process > the 2 hardware threads",)),
])
def test_bad_experiment_values_are_refused(experiment, expected):
    rejected(campaign(experiment), *expected)


@pytest.mark.parametrize("system, expected", [
    ({"sockets": 2.0}, ("system_definitions.local.sockets", "not of type 'integer'")),
    ({"memory_per_node_gb": float("inf")}, ("memory_per_node_gb", "inf")),
    ({"memory_per_node_gb": float("nan")}, ("memory_per_node_gb",)),
    ({"threads_per_core": 1.5}, ("system_definitions.local.threads_per_core",)),
    ({"nodes": 10**9}, ("system_definitions.local.nodes", "maximum")),
    ({"name": "other"}, ("system_definitions.local.name: 'other' is not the system's name 'local'",)),
    ({"exclusive": "yes"}, ("system_definitions.local.exclusive", "not of type 'boolean'")),
    ({"nodelist": []}, ("system_definitions.local.nodelist",)),
    ({"exclude": ["n1 n2"]}, ("system_definitions.local.exclude",)),
    ({"qos": "high prio"}, ("system_definitions.local.qos", "not allowed here")),
    ({"slurm_extra": "--time=10"}, ("system_definitions.local.slurm_extra: '--time=10' sets the "
                                    "runtime/time limit option", "use the system key runtime_minutes")),
])
def test_bad_system_values_are_refused(system, expected):
    rejected(campaign(system=system), *expected)


def test_threads_up_to_the_hardware_threads_are_accepted():
    config = campaign({"threads": [4]}, system={"threads_per_core": 2})
    assert {m["intra_threads"] for m in load_campaign(config).measurements} == {4}


def test_an_experiment_planning_nothing_is_refused_with_the_reason():
    hybrid = {"type": "hybrid", "models": ["small_cnn"], "batch_sizes": [4], "processes": [3]}
    config = campaign()
    config["experiments"]["layouts"] = hybrid
    rejected(config, "experiments.layouts: plans no measurement on system 'local'",
             "processes 3 > the node's 2 cores")
    config["defaults"] = {"repetitions": 1}
    config["experiments"]["layouts"] = {"type": "kernel", "kernels": ["matmul"], "sizes": [256],
                                        "nodes": [4]}
    rejected(config, "experiments.layouts: plans no measurement", "nodes 4 > the system's 1")


def test_best_must_name_a_hybrid_sweep_of_the_campaign():
    config = campaign()
    config["experiments"]["scaling"] = {"type": "node_scaling", "models": ["small_cnn"],
                                        "best": "nowhere"}
    rejected(config, "experiments.scaling.best: 'nowhere' is not a hybrid experiment")
    config["experiments"]["scaling"]["best"] = "threads"
    rejected(config, "experiments.scaling.best: 'threads' is not a hybrid experiment")


def test_kernel_errors_name_the_experiment():
    config = campaign()
    config["defaults"] = {"repetitions": 1}
    config["experiments"]["k"] = {"type": "kernel", "kernels": ["fft"], "sizes": [1000]}
    rejected(config, "experiments.k.sizes: fft needs powers of two")


def test_a_long_experiment_name_is_refused():
    config = campaign()
    config["experiments"]["x" * 300] = config["experiments"].pop("threads")
    rejected(config, "config.experiments", "is too long")


@pytest.mark.parametrize("text, expected", [
    ("campaign: a\ncampaign: b\n", "line 2: key 'campaign' appears twice (first on line 1)"),
    (BOMB, "once its aliases are expanded"),
    ("a: &x [*x]\n", "an alias contains itself"),
    ("campaign: tiny\ntimeout: .nan\n", "timeout: nan is not a finite number"),
])
def test_campaign_files_are_read_strictly(tmp_path, text, expected):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=re.escape(expected)) as info:
        load_campaign_file(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)
    assert time.monotonic() - started < 5  # an alias bomb is refused, not expanded
    count_input("campaign (listed cases)", "rejected")


def test_non_utf8_files_and_directories_are_named(tmp_path, monkeypatch):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"campaign: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"c.yaml: not UTF-8 text \(byte 0xe9 at offset 13\)"):
        load_campaign_file(path)
    monkeypatch.setattr(systems, "SYSTEM_DIR", tmp_path)
    (tmp_path / "local.yaml").mkdir()
    with pytest.raises(ConfigError, match="config/systems/local.yaml: is a directory"):
        load_campaign(copy.deepcopy(TINY))
    (tmp_path / "local.yaml").rmdir()
    (tmp_path / "local.yaml").write_bytes(b"name: local\narch: \xff\n")
    with pytest.raises(ConfigError, match="config/systems/local.yaml: not UTF-8"):
        load_campaign(copy.deepcopy(TINY))
    (tmp_path / "local.yaml").write_text("arch: auto\narch: x86_64\n")
    with pytest.raises(ConfigError, match="config/systems/local.yaml: not valid YAML .line 2: key 'arch' appears twice"):
        load_campaign(copy.deepcopy(TINY))
    (tmp_path / "local.yaml").write_text("arch: auto\n" + BOMB)
    with pytest.raises(ConfigError, match="config/systems/local.yaml: holds .* values"):
        load_campaign(copy.deepcopy(TINY))
    count_input("system (listed cases)", "rejected")


# ---------------------------------------------------------------- through snakemake -n

def run_dry(workdir, campaign_file: str = "tiny.yaml"):
    proc = snakemake(workdir, "--profile", "profiles/local", "--configfile", campaign_file, "-n",
                     check=False, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("archbench:")]
    return proc, lines


def assert_one_line(proc, lines, *expected: str) -> None:
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr, proc.stderr[-3000:]
    assert len(lines) == 1, proc.stderr[-3000:]
    for part in expected:
        assert part in lines[0], lines[0]
    assert "run_measurement" not in proc.stdout  # refused before any job was planned


@pytest.mark.workflow
def test_dry_runs_refuse_bad_files_in_one_line(workflow_copy):
    tiny = (workflow_copy / "tiny.yaml").read_text()
    cases = {
        "dup.yaml": (tiny + "campaign: other\n", ("dup.yaml: not valid YAML", "appears twice")),
        "bomb.yaml": (tiny + BOMB, ("bomb.yaml: holds",)),
        "zero.yaml": (tiny + "  layouts: {type: hybrid, models: [small_cnn], batch_sizes: [4], "
                      "processes: [64]}\n", ("experiments.layouts: plans no measurement",)),
    }
    for name, (text, expected) in cases.items():
        (workflow_copy / name).write_text(text)
        proc, lines = run_dry(workflow_copy, name)
        assert_one_line(proc, lines, *expected)
    (workflow_copy / "latin1.yaml").write_bytes(tiny.encode() + b"# caf\xe9\n")
    proc, lines = run_dry(workflow_copy, "latin1.yaml")
    # Snakemake reads the campaign file before archbench does: its own one-line error stands
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.workflow
def test_dry_runs_refuse_bad_system_files_imports_and_images(workflow_copy):
    systems_dir = workflow_copy / "config" / "systems"
    (systems_dir / "local.yaml").rename(systems_dir / "local.yaml.orig")
    (systems_dir / "local.yaml").mkdir()
    assert_one_line(*run_dry(workflow_copy), "config/systems/local.yaml: is a directory")
    (systems_dir / "local.yaml").rmdir()
    (systems_dir / "local.yaml.orig").rename(systems_dir / "local.yaml")

    tiny = (workflow_copy / "tiny.yaml").read_text()
    (workflow_copy / "imports.yaml").write_text(tiny + "imports: [missing.csv]\n")
    assert_one_line(*run_dry(workflow_copy, "imports.yaml"), "missing.csv")
    (workflow_copy / "bad.csv").write_text("system,model,throughput,unit\nlocal,resnet50,12,parsecs\n")
    (workflow_copy / "imports.yaml").write_text(tiny + "imports: [bad.csv]\n")
    assert_one_line(*run_dry(workflow_copy, "imports.yaml"), "bad.csv", "row 1", "unit")

    container = (systems_dir / "local.yaml").read_text().replace(
        "container_runtime: none", "container_runtime: apptainer\nimage: no-such-image")
    (systems_dir / "local.yaml").write_text(container)
    assert_one_line(*run_dry(workflow_copy), "systems.local.image: no container definition "
                    "containers/no-such-image.def")


def test_a_size_no_parameter_server_count_fits_is_refused():
    """A parameter-server list whose counts all exceed one size's workers would silently
    drop that size (and move the scaling baseline): refused, naming the key."""
    config = campaign(system={"nodes": 4})
    config["experiments"]["ps"] = {"type": "node_scaling", "models": ["small_cnn"],
                                   "batch_sizes": [4], "strategies": ["parameter_server"],
                                   "parameter_servers": [2], "nodes": [1, 2]}
    rejected(config, "experiments.ps.parameter_servers: none of [2] fits the 1 workers")
    config["experiments"]["ps"]["parameter_servers"] = [1, 2]
    assert {(m["nodes"], m["parameter_servers"]) for m in load_campaign(config).measurements
            if m["experiment"] == "ps"} == {(1, 1), (2, 1), (2, 2)}


def test_parameter_server_keys_the_system_cannot_run_are_refused():
    """PS counts above every size's workers, an unknown variable update, PS nodes of their
    own where the system has none (or no srun): one line naming the key."""
    def ps(**keys) -> dict:
        config = campaign(system={"nodes": 4})
        config["experiments"]["ps"] = {"type": "node_scaling", "models": ["small_cnn"],
                                       "batch_sizes": [4], "nodes": [1, 2],
                                       "variable_update": ["parameter_server"], **keys}
        return config
    rejected(ps(parameter_servers=[1, 3]), "experiments.ps.parameter_servers: 3 above the 2 "
             "workers of the largest size")
    rejected(ps(parameter_servers=[0]), "experiments.ps.parameter_servers")
    rejected(ps(variable_update=["sync"]), "experiments.ps.variable_update.0")
    rejected(ps(strategies=["horovod"]), "experiments.ps.variable_update: give it or strategies")
    rejected(ps(variable_update=["horovod"], parameter_servers=[1]),
             "experiments.ps.parameter_servers: only the parameter-server updates")
    rejected(ps(ps_placement="separate"), "experiments.ps.ps_placement: separate needs nodes "
             "of their own", "launcher local (needs srun)")
    srun = ps(ps_placement="separate", nodes=[2, 4])
    srun["system_definitions"]["local"]["launcher"] = "srun"
    # 4 worker nodes + the PS node do not fit 4 nodes: that size is skipped, 2 + 1 runs
    assert {(m["nodes"], m["parameter_servers"]) for m in load_campaign(srun).measurements
            if m["experiment"] == "ps"} == {(2, 1)}
    srun["experiments"]["ps"]["nodes"] = [4]
    rejected(srun, "experiments.ps", "nodes 4 + 1 parameter-server nodes > the system's 4")


def test_control_characters_oversized_axes_and_repeated_systems_are_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(campaign()).replace("campaign: tiny", 'description: "a\\x00b"\ncampaign: tiny'))
    with pytest.raises(ConfigError, match=r"c.yaml: description: 'a\\x00b' holds a control character"):
        load_campaign_file(path)
    rejected(campaign(system={"description": "bell\a"}), "system_definitions.local.description",
             "control character")
    rejected(campaign({"batch_sizes": list(range(1, 5001)), "threads": [1, 2],
                       "inter_threads": list(range(0, 3)), "models": ["small_cnn", "alexnet"],
                       "vendor_library": ["on", "off"], "data": ["synthetic", "real"]},
                      system={"cores_per_socket": 2}),
             "experiments.threads.axes: 5000 batch x 2 threads x 3 inter", "(at most 100000)")
    rejected(campaign(systems=["local", "local"]), "config.systems", "non-unique")
    rejected(campaign({"systems": []}), "experiments.threads.systems")
