"""The malformed inputs an independent test found accepted, crashing or hanging: each is
now refused with one line naming the file and key, before any job."""

from __future__ import annotations

import copy
import re
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, count_input, snakemake

from archbench.cli import main as campaign_main
from archbench.core.validate import declared_keys
from archbench.inputs import check_inputs
from archbench.plan import systems
from archbench.plan.campaign import ConfigError, experiment_schema, load_campaign, load_campaign_file
from archbench.plan.configfiles import check_configfiles, configfile_arguments
from archbench.plan.experiment_types import EXPERIMENT_TYPES

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
    ({"batch_per_process": [8.0]}, ("experiments.threads.batch_per_process.0", "not of type 'integer'")),
    ({"threads": [1000000]}, ("experiments.threads: 1000000 intra-op threads per process > the 2 hardware threads",)),
    ({"threads": [3]}, ("experiments.threads: 3 intra-op threads per process > the 2 hardware threads",)),
    ({"batch_per_process": [10**20]}, ("experiments.threads.batch_per_process.0", "maximum")),
    ({"batch_per_process": [1e20]}, ("experiments.threads.batch_per_process.0",)),
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
    hybrid = {"type": "hybrid", "models": ["small_cnn"], "batch_per_process": [4], "processes": [3]}
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
    rejected(config, "c.yaml: experiments: ", "is too long")


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
    (workflow_copy / "folder").mkdir()
    cases = {
        "dup.yaml": (tiny + "campaign: other\n", ("dup.yaml: not valid YAML", "appears twice")),
        "bomb.yaml": (tiny + BOMB, ("bomb.yaml: holds",)),
        "zero.yaml": (tiny + "  layouts: {type: hybrid, models: [small_cnn], batch_per_process: [4], "
                      "processes: [64]}\n", ("experiments.layouts: plans no measurement",)),
        "axis.yaml": (tiny.replace("threads: [1, 2]", "threads: [1, 1]"),
                      ("axis.yaml: experiments.threads.threads: 1 is given twice",)),
        "defaults.yaml": (tiny.replace("defaults:\n", "defaults:\n  kernels: [matmul]\n"),
                          ("defaults.yaml: defaults.kernels: not a key of thread_scaling",)),
        "folder.yaml": (tiny + "imports: [folder]\n",
                        ("folder.yaml: imports.0: folder: is a directory",)),
    }
    for name, (text, expected) in cases.items():
        (workflow_copy / name).write_text(text)
        proc, lines = run_dry(workflow_copy, name)
        assert_one_line(proc, lines, *expected)


@pytest.mark.workflow
def test_campaign_files_snakemake_cannot_read_are_named_in_one_line(workflow_copy):
    """Snakemake reads a --configfile before the workflow starts (a traceback for a file it
    cannot decode or find, a message without the file's name for one it cannot parse): the
    workflow profile reads them first, with or without --profile."""
    tiny = (workflow_copy / "tiny.yaml").read_text()
    (workflow_copy / "latin1.yaml").write_bytes(tiny.encode() + b"# caf\xe9\n")
    (workflow_copy / "open.yaml").write_text(tiny.replace("threads: [1, 2]", "threads: [1, 2"))
    (workflow_copy / "folder.yaml").mkdir()
    cases = {"latin1.yaml": "latin1.yaml: not UTF-8 text (byte 0xe9 at offset",
             "open.yaml": "open.yaml: not valid YAML (line 17: while parsing a flow sequence",
             "gone.yaml": "gone.yaml: cannot read (No such file or directory)",
             "folder.yaml": "folder.yaml: is a directory"}
    for name, expected in cases.items():
        assert_one_line(*run_dry(workflow_copy, name), f"archbench: invalid configuration: {expected}")
    proc = snakemake(workflow_copy, "-n", "--cores", "1", "--configfile", "tiny.yaml", "open.yaml",
                     check=False, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("archbench:")]
    assert_one_line(proc, lines, "open.yaml: not valid YAML")
    # without the workflow profile, Snakemake's own error stands: still before any job
    proc = snakemake(workflow_copy, "-n", "--cores", "1", "--workflow-profile", "none",
                     "--configfile", "latin1.yaml", check=False, timeout=120)
    assert proc.returncode != 0 and "run_measurement" not in proc.stdout, proc.stderr[-3000:]


def test_the_workflow_profile_finds_the_configfiles_as_snakemake_does(tmp_path):
    """archbench.plan.configfiles reads Snakemake's own command line with Snakemake's parser, and
    only Snakemake's (a program calling Snakemake's API has a command line of its own)."""
    assert configfile_arguments(["-n", "--configfile", "a.yaml", "b.yaml", "--cores", "1"]) == [
        "a.yaml", "b.yaml"]
    assert configfile_arguments(["--configfiles=a.yaml", "-n"]) == ["a.yaml"]
    assert configfile_arguments(["-n", "all"]) == []
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1\n")
    with pytest.raises(SystemExit, match=rf"^archbench: invalid configuration: {re.escape(str(bad))}: "
                       r"not valid YAML \(line 2"):
        check_configfiles(["/venv/bin/snakemake", "-n", "--configfile", str(bad)])
    with pytest.raises(SystemExit, match="not valid YAML"):
        check_configfiles(["/lib/site-packages/snakemake/__main__.py", "--configfile", str(bad)])
    check_configfiles(["/venv/bin/pytest", "--configfile", str(bad)])  # not Snakemake's: no check
    check_configfiles(["/venv/bin/snakemake", "--configfile", "tests/campaigns/tiny.yaml"])


# ------------------------------------------------ one line naming the file and the key
# Every malformed campaign below goes through `archbench check`, which
# runs the checks the workflow runs before any job (check_inputs): exit 1, nothing on stdout,
# one stderr line that starts with the file and the key path.

# One valid experiment of every type (on a 2-core local system); the cases vary one key.
TYPES = {
    "thread_scaling": {"models": ["small_cnn"], "batch_per_process": [4], "threads": [1, 2]},
    "hybrid": {"models": ["small_cnn"], "batch_per_process": [4], "processes": [1, 2]},
    "inter_intra": {"models": ["small_cnn"], "batch_per_process": [4], "cores": [1, 2]},
    "batch_sweep": {"models": ["small_cnn"], "batch_per_process": [4, 8]},
    "ppn_sweep": {"models": ["small_cnn"], "batch_per_process": [4], "processes_per_node": [1, 2]},
    "node_scaling": {"models": ["small_cnn"], "batch_per_process": [4], "nodes": [1]},
    "horovod_tuning": {"models": ["small_cnn"], "batch_per_process": [4], "cycle_time_ms": [1, 5],
                       "fusion_threshold_mb": [0, 64]},
    "kernel": {"kernels": ["matmul"], "sizes": [64, 128]},
    "quality": {"framework": ["tensorflow", "pytorch"], "precision": ["fp32", "bf16"]},
    "tune": {"models": ["small_cnn"], "batch_per_process": [4, 8], "budget_measurements": 3},
}
GOOD_CSV = "system,model,throughput,unit\nlocal,resnet50,12,img/s\n"


def with_experiment(kind: str, **keys) -> dict:
    """A campaign of one experiment ``e`` of type ``kind`` with ``keys`` set (None: removed)."""
    experiment = {"type": kind, **TYPES[kind], **keys}
    return {"campaign": "bad", "systems": ["local"], "defaults": {"repetitions": 1},
            "experiments": {"e": {k: v for k, v in experiment.items() if v is not None}}}


def tiny_with(**top) -> dict:
    """tests/campaigns/tiny.yaml with top-level keys replaced (None: removed)."""
    config = {**copy.deepcopy(TINY), **top}
    return {k: v for k, v in config.items() if v is not None}


def defaults(**keys) -> dict:
    return tiny_with(defaults={**TINY["defaults"], **keys})


DUPLICATE_AXES = [
    ("thread_scaling", "threads", [1, 1]),
    ("thread_scaling", "batch_per_process", [4, 4]),
    ("thread_scaling", "models", ["small_cnn", "small_cnn"]),
    ("thread_scaling", "inter_threads", [1, 1]),
    ("thread_scaling", "vendor_library", ["on", "on"]),
    ("thread_scaling", "vendor_library", ["off", False]),
    ("thread_scaling", "data", ["synthetic", "synthetic"]),
    ("thread_scaling", "systems", ["local", "local"]),
    ("hybrid", "processes", [2, 2]),
    ("hybrid", "horovod_controller", ["mpi", "mpi"]),
    ("inter_intra", "cores", [1, 1]),
    ("inter_intra", "intra_threads", ["cores", "cores"]),
    ("inter_intra", "thread_pairs", [[1, 0], [1, 0]]),
    ("inter_intra", "mkl_settings", ["on", True]),
    ("batch_sweep", "device", ["cpu", "cpu"]),
    ("ppn_sweep", "processes_per_node", [1, 1]),
    ("ppn_sweep", "intra_threads", ["cores_minus_one", "cores_minus_one"]),
    ("ppn_sweep", "nodes", [1, 1]),
    ("node_scaling", "nodes", [1, 1]),
    ("node_scaling", "strategies", ["horovod", "horovod"]),
    ("node_scaling", "variable_update", ["horovod", "horovod"]),
    ("node_scaling", "parameter_servers", [1, 1]),
    ("node_scaling", "gpus_per_node", [1, 1]),
    ("node_scaling", "gpus", [1, 1]),
    ("horovod_tuning", "cycle_time_ms", [5, 5.0]),
    ("horovod_tuning", "fusion_threshold_mb", [0, 0]),
    ("horovod_tuning", "nodes", [1, 1]),
    ("thread_scaling", "framework", ["pytorch", "pytorch"]),
    ("kernel", "kernels", ["matmul", "matmul"]),
    ("kernel", "sizes", [64, 64]),
    ("kernel", "tile_sizes", [8, 8]),
    ("kernel", "workers", [1, 1]),
    ("kernel", "nodes", [1, 1]),
]

# (id, campaign c.yaml: a dict, text, bytes or None for a directory; other files, by
# path: text, bytes, a dict written as YAML, or None for a directory; what the line starts
# with after "archbench: invalid configuration: ")
CASES = [
    *[(f"duplicate-{kind}-{key}-{i}", with_experiment(kind, **{key: value}), {},
       f"c.yaml: experiments.e.{key}: ") for i, (kind, key, value) in enumerate(DUPLICATE_AXES)],
    ("duplicate-sizes-of-a-kernel", with_experiment("kernel", sizes={"matmul": [64, 64]}), {},
     "c.yaml: experiments.e.sizes.matmul: 64 is given twice"),
    ("duplicate-layout", with_experiment("hybrid", layout_batch_per_process=[
        {"processes": 1, "batch_per_process": [4]}, {"processes": 1, "batch_per_process": [8]}]), {},
     "c.yaml: experiments.e.layout_batch_per_process.1.processes: 1 is given twice"),
    ("duplicate-import", tiny_with(imports=["ok.csv", "ok.csv"]), {"ok.csv": GOOD_CSV},
     "c.yaml: imports: 'ok.csv' is given twice"),
    ("duplicate-system", tiny_with(systems=["local", "local"]), {}, "c.yaml: systems: "),
    # defaults: a key or value an experiment takes from there is named there
    ("defaults-key-of-another-type", defaults(kernels=["matmul"]), {},
     "c.yaml: defaults.kernels: not a key of thread_scaling experiments (in experiment threads)"),
    ("defaults-type", defaults(type="kernel"), {}, "c.yaml: defaults.type: "),
    ("defaults-bad-value", defaults(steps=2.5), {}, "c.yaml: defaults.steps: 2.5 is not of type"),
    ("defaults-duplicate", defaults(inter_threads=[1, 1]), {}, "c.yaml: defaults.inter_threads: "),
    ("defaults-unknown-system", defaults(systems=["other"]), {}, "c.yaml: defaults.systems: "),
    ("defaults-expansion", {**with_experiment("kernel", sizes=None, kernels=["fft"]),
                            "defaults": {"sizes": [1000]}}, {},
     "c.yaml: defaults.sizes: fft needs powers of two"),
    # the campaign's own keys
    ("unknown-top-level-key", tiny_with(bogus=1), {}, "c.yaml: bogus: not a key allowed here"),
    ("missing-campaign", tiny_with(campaign=None), {}, "c.yaml: campaign: missing (required)"),
    ("missing-type", with_experiment("kernel", type=None), {}, "c.yaml: experiments.e.type: "),
    ("unknown-type", with_experiment("kernel", type="warp"), {}, "c.yaml: experiments.e.type: "),
    ("missing-models", with_experiment("hybrid", models=None), {},
     "c.yaml: experiments.e.models: missing (required)"),
    ("unknown-experiment-key", with_experiment("kernel", threads=[1]), {},
     "c.yaml: experiments.e.threads: not a key of kernel experiments"),
    ("experiments-a-list", tiny_with(experiments=["threads"]), {}, "c.yaml: experiments: "),
    ("a-list-campaign", "- campaign\n", {}, "c.yaml: (top level): a campaign must be a mapping"),
    ("experiment-system-not-in-campaign", with_experiment("kernel", systems=["other"]), {},
     "c.yaml: experiments.e.systems: 'other' is not in the campaign's systems"),
    ("best-not-hybrid", with_experiment("node_scaling", batch_per_process=None, best="e"), {},
     "c.yaml: experiments.e.best: 'e' is not a hybrid experiment"),
    # a framework without what the experiment asks for, and the keys of one framework
    ("framework-unknown", with_experiment("thread_scaling", framework=["mxnet"]), {},
     "c.yaml: experiments.e.framework.0: 'mxnet' is not one of ['tensorflow', 'pytorch']"),
    ("framework-of-a-kernel", with_experiment("kernel", framework=["pytorch"]), {},
     "c.yaml: experiments.e.framework: not a key of kernel experiments"),
    ("framework-lacks-a-strategy", with_experiment("node_scaling", framework=["tensorflow", "pytorch"],
                                                   strategies=["parameter_server"]), {},
     "c.yaml: experiments.e.framework: framework pytorch has no strategy 'parameter_server' "
     "(it has: single, horovod, ddp, fsdp2)"),
    ("framework-lacks-a-variable-update", with_experiment("node_scaling", framework=["pytorch"],
                                                          variable_update=["distributed_replicated"]),
     {}, "c.yaml: experiments.e.framework: framework pytorch has no strategy 'parameter_server'"),
    ("framework-default-lacks-ddp", with_experiment("node_scaling", strategies=["ddp"]), {},
     "c.yaml: experiments.e.framework: framework tensorflow has no strategy 'ddp' (it has: "
     "single, horovod, mirrored, parameter_server)"),
    ("framework-from-defaults", {**with_experiment("node_scaling", strategies=["mirrored"]),
                                 "defaults": {"repetitions": 1, "framework": ["pytorch"]}}, {},
     "c.yaml: defaults.framework: framework pytorch has no strategy 'mirrored' (it has: single, "
     "horovod, ddp, fsdp2) (in experiment e)"),
    ("loader-workers-without-pytorch", with_experiment("thread_scaling", loader_workers=2,
                                                       data=["real"]), {},
     "c.yaml: experiments.e.loader_workers: only pytorch configurations take it (add pytorch to "
     "framework)"),
    ("loader-workers-without-real-data", with_experiment("thread_scaling", loader_workers=2,
                                                         framework=["pytorch"]), {},
     "c.yaml: experiments.e.loader_workers: the loader feeds real data only (add real to data)"),
    ("loader-workers-negative", with_experiment("thread_scaling", loader_workers=-1), {},
     "c.yaml: experiments.e.loader_workers: -1 is less than the minimum of 0"),
    ("loader-workers-of-a-kernel", with_experiment("kernel", loader_workers=1), {},
     "c.yaml: experiments.e.loader_workers: not a key of kernel experiments"),
    ("too-many-threads", with_experiment("thread_scaling", threads=[3]), {},
     "c.yaml: experiments.e: 3 intra-op threads per process > the 2 hardware threads"),
    # the campaign file itself
    ("repeated-key", "campaign: a\ncampaign: b\n", {}, "c.yaml: not valid YAML (line 2: key 'campaign'"),
    ("unclosed-bracket", (REPO / "tests" / "campaigns" / "tiny.yaml").read_text().replace(
        "threads: [1, 2]", "threads: [1, 2"), {}, "c.yaml: not valid YAML (line 17: "),
    ("not-utf8", b"campaign: caf\xe9\n", {}, "c.yaml: not UTF-8 text (byte 0xe9 at offset 13)"),
    ("a-directory", None, {}, "c.yaml: is a directory"),
    # system files and inline systems
    ("system-unknown-key", tiny_with(), {"config/systems/local.yaml": {"arch": "auto", "bogus": 1}},
     "config/systems/local.yaml: bogus: not a key allowed here"),
    ("system-missing-arch", tiny_with(), {"config/systems/local.yaml": {"sockets": 1}},
     "config/systems/local.yaml: arch: missing (required)"),
    ("system-bad-value", tiny_with(), {"config/systems/local.yaml": {"arch": "auto", "sockets": 2.0,
                                                           "cores_per_socket": 2}},
     "config/systems/local.yaml: sockets: 2.0 is not of type 'integer'"),
    ("system-other-name", tiny_with(), {"config/systems/local.yaml": {"arch": "auto", "name": "x",
                                                            "cores_per_socket": 2}},
     "config/systems/local.yaml: name: 'x' is not the system's name 'local'"),
    ("system-repeated-key", tiny_with(), {"config/systems/local.yaml": "arch: auto\narch: x86_64\n"},
     "config/systems/local.yaml: not valid YAML (line 2: key 'arch' appears twice"),
    ("system-not-utf8", tiny_with(), {"config/systems/local.yaml": b"arch: \xff\n"},
     "config/systems/local.yaml: not UTF-8 text"),
    ("system-a-directory", tiny_with(), {"config/systems/local.yaml": None},
     "config/systems/local.yaml: is a directory"),
    ("system-no-container-definition", tiny_with(), {"config/systems/local.yaml": {
        "arch": "auto", "cores_per_socket": 2, "container_runtime": "apptainer", "image": "nope"}},
     "config/systems/local.yaml: image: no container definition containers/nope.def"),
    # what the image can run, from its definition's labels, before any job
    ("image-without-the-framework", tiny_with(), {
        "config/systems/local.yaml": {"arch": "auto", "cores_per_socket": 2, "container_runtime": "apptainer",
                                      "image": "ppc64le-debian"},
        "containers/ppc64le-debian.def": (REPO / "containers/ppc64le-debian.def").read_text()},
     "config/systems/local.yaml: image: system local's image ppc64le-debian has no TensorFlow "
     "(it has: PyTorch 1.13.1): experiment threads cannot run there"),
    ("framework-image-without-the-graph", defaults(framework=["pytorch"], graph=["compiled"]), {
        "config/systems/local.yaml": {"arch": "auto", "cores_per_socket": 2, "container_runtime": "apptainer",
                                      "image": "x86_64-onednn",
                                      "framework_images": {"pytorch": "ppc64le-debian"}},
        "containers/x86_64-onednn.def": (REPO / "containers/x86_64-onednn.def").read_text(),
        "containers/ppc64le-debian.def": (REPO / "containers/ppc64le-debian.def").read_text()},
     "config/systems/local.yaml: framework_images: system local's image ppc64le-debian runs no graph "
     "'compiled' with its PyTorch 1.13.1 (it runs: eager): experiment threads cannot run there"),
    ("framework-images-unknown-framework", tiny_with(), {"config/systems/local.yaml": {
        "arch": "auto", "cores_per_socket": 2, "framework_images": {"pytroch": "ppc64le-debian"}}},
     "config/systems/local.yaml: framework_images: 'pytroch' is not one of ['tensorflow', 'pytorch']"),
    ("system-missing", tiny_with(systems=["nope"]), {},
     "c.yaml: systems: no system file config/systems/nope.yaml"),
    ("inline-system-unknown-key", tiny_with(system_definitions={"local": {"arch": "auto", "x": 1}}),
     {}, "c.yaml: system_definitions.local.x: not a key allowed here"),
    ("inline-system-no-container-definition", tiny_with(system_definitions={"local": {
        "arch": "auto", "cores_per_socket": 2, "container_runtime": "apptainer", "image": "nope"}}), {},
     "c.yaml: system_definitions.local.image: no container definition containers/nope.def"),
    # imports: the key, then the file's own error
    ("import-a-directory", tiny_with(imports=["folder"]), {"folder": None},
     "c.yaml: imports.0: folder: is a directory, not a file"),
    ("import-missing", tiny_with(imports=["ok.csv", "gone.csv"]), {"ok.csv": GOOD_CSV},
     "c.yaml: imports.1: gone.csv: no such import file"),
    ("import-bad-row", tiny_with(imports=["bad.csv"]), {"bad.csv": GOOD_CSV.replace("img/s", "parsecs")},
     "c.yaml: imports.0: bad.csv: row 1 (line 2): column 'unit'"),
    ("import-bad-sidecar", tiny_with(imports=["ok.csv"]), {"ok.csv": GOOD_CSV, "ok.yaml": "columns: 1\n"},
     "c.yaml: imports.0: ok.yaml: columns: expected a mapping"),
    ("claims-bad-row", tiny_with(imports=["x-claims.csv"]),
     {"x-claims.csv": "metric,value,unit,source\nspeedup,nan,x,p\n"},
     "c.yaml: imports.0: x-claims.csv: row 1 (line 2): column 'value'"),
]


def write_file(path: Path, content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:
        path.write_text(yaml.safe_dump(content))


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A working directory whose config/systems/local.yaml is a 2-core local system."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(systems, "SYSTEM_DIR", tmp_path / "config" / "systems")
    write_file(tmp_path / "config" / "systems" / "local.yaml", {**LOCAL, "cores_per_socket": 2})
    return tmp_path


def check_cli(capsys) -> tuple[int, str, str]:
    code = campaign_main(["check", "c.yaml"])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_valid_experiment_of_every_type_is_accepted(scratch, capsys):
    for kind in TYPES:
        write_file(scratch / "c.yaml", with_experiment(kind))
        code, out, err = check_cli(capsys)
        assert code == 0 and err == "", (kind, err)
    assert set(TYPES) == set(EXPERIMENT_TYPES)


@pytest.mark.parametrize("content, files, expected", [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_bad_input_is_one_line_naming_the_file_and_key(scratch, capsys, content, files, expected):
    for path, text in files.items():
        target = scratch / path
        if target.is_file():
            target.unlink()
        write_file(target, text)
    write_file(scratch / "c.yaml", content)
    code, out, err = check_cli(capsys)
    assert code == 1 and out == "", (out, err)
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"archbench: invalid configuration: {expected}"), err
    count_input("campaign (listed cases)", "rejected")


def list_schemas(schema: dict, root: dict) -> list[dict]:
    """The array schemas a key's schema allows: itself, through $ref, oneOf and anyOf, and
    the values of a mapping of lists (a kernel's ``sizes``)."""
    if "$ref" in schema:
        return list_schemas(root["$defs"][schema["$ref"].split("/")[-1]], root)
    found = [schema] if schema.get("type") == "array" else []
    for sub in [*schema.get("oneOf", []), *schema.get("anyOf", [])]:
        found += list_schemas(sub, root)
    if isinstance(schema.get("additionalProperties"), dict):
        found += list_schemas(schema["additionalProperties"], root)
    return found


def test_every_list_an_experiment_takes_refuses_repeats():
    """Every list-valued key of every experiment type (an axis, its systems, ...) has
    uniqueItems: a repeated value would otherwise run once, silently."""
    root = experiment_schema()
    for kind in EXPERIMENT_TYPES:
        schema = {**root, "$ref": f"#/$defs/{kind}"}
        for key in declared_keys(schema, root):
            for array in list_schemas(properties_of(schema, root, key), root):
                assert array.get("uniqueItems") is True, (kind, key)


def properties_of(schema: dict, root: dict, key: str) -> dict:
    """The schema of ``key`` in ``schema``, as declared (through $ref and allOf)."""
    if "$ref" in schema and schema["$ref"].startswith("#/$defs/"):
        found = properties_of(root["$defs"][schema["$ref"].split("/")[-1]], root, key)
        if found:
            return found
    if key in schema.get("properties", {}):
        return schema["properties"][key]
    for sub in schema.get("allOf", []):
        found = properties_of(sub, root, key)
        if found:
            return found
    return {}


def test_a_value_given_with_snakemakes_config_option_is_named_there(scratch):
    """`snakemake --config measurements_per_job=0` merges over the campaign files: its error names
    --config, not the file."""
    write_file(scratch / "c.yaml", tiny_with())
    with pytest.raises(ConfigError, match=r"^--config: measurements_per_job: 0 is less than the minimum of 1$"):
        check_inputs(tiny_with(measurements_per_job=0), ["c.yaml"], overrides={"measurements_per_job": 0})
    with pytest.raises(ConfigError, match=r"^c\.yaml: statistic: 'mode' is not one of"):
        check_inputs(tiny_with(measurements_per_job=2, statistic="mode"), ["c.yaml"], overrides={"measurements_per_job": 2})
    absolute = scratch / "c.yaml"  # as Snakemake hands the workflow its --configfile
    with pytest.raises(ConfigError, match=r"^c\.yaml: statistic: "):
        check_inputs(tiny_with(statistic="mode"), [absolute])


def test_a_long_list_of_mixed_values_is_refused_quickly():
    """A repeat is found in linear time (jsonschema's own uniqueItems compares items of
    mixed types pair by pair: minutes for this list)."""
    values = [i if i % 2 else str(i) for i in range(1, 50_001)]
    started = time.monotonic()
    rejected(campaign({"threads": values}), "c.yaml: experiments.threads.threads")
    rejected(campaign({"inter_threads": [*values, 1]}), "c.yaml: experiments.threads.inter_threads")
    assert time.monotonic() - started < 10
