"""A system's placement keys reach sbatch as the Slurm executor plugin builds it: its own
get_submit_command and validate_slurm_extra run on a job carrying archbench's resources;
a user's slurm_extra setting what the plugin manages is refused at plan time."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO, snakemake
from snakemake.iocontainers import ResourceList
from snakemake_executor_plugin_slurm.submit_string import get_submit_command
from snakemake_executor_plugin_slurm.utils import set_gres_string
from snakemake_executor_plugin_slurm.validation import (
    get_forbidden_slurm_options,
    validate_slurm_extra,
)

from archbench.core.validate import ConfigError
from archbench.plan.campaign import check_gpu_requests, load_campaign
from archbench.plan.slurm_requests import pinned_nodes
from archbench.plan.submission import job_resources
from archbench.plan.systems import resolve_system

MEASUREMENT = {"nodes": 1, "processes_per_node": 1, "timeout_minutes": 10}
SYSTEM = {"name": "site", "arch": "x86_64", "sockets": 2, "cores_per_socket": 4,
          "runtime_minutes": 30, "memory_per_node_gb": 8, "partition": "cpu"}


def sbatch_words(system: dict, pinned: str | None = None, measurement: dict = MEASUREMENT) -> list[str]:
    """The sbatch command line the plugin writes for ``measurement`` on ``system`` (its
    submit command and its GPU options, as its executor joins them), after its own check
    of slurm_extra, split as the shell does."""
    job = SimpleNamespace(resources=ResourceList(fromdict=job_resources(measurement, system, pinned)),
                          threads=1)
    validate_slurm_extra(job)
    params = {"run_uuid": "u1", "slurm_logfile": "log", "comment_str": "rule_run_measurement",
              "account": "", "partition": "-p cpu", "workdir": None}
    return shlex.split(get_submit_command(job, params) + set_gres_string(job))


def test_every_placement_key_reaches_sbatch_as_the_plugin_accepts_it():
    system = {**SYSTEM, "constraint": "skylake&ib", "qos": "long", "reservation": "maint-1",
              "exclusive": True, "exclude": ["c1", "c[10-12]"], "nodelist": "c2",
              "slurm_extra": "--hint=nomultithread"}
    words = sbatch_words(system)
    assert words[words.index("-C") + 1] == "skylake&ib"
    assert "--qos=long" in words
    assert words[words.index("--mem") + 1] == str(int(8 * 1024 * 0.9))
    assert "--mem-per-cpu" not in words
    tail = words[words.index("--cpus-per-task=8") + 1:]
    assert tail == ["--hint=nomultithread", "--reservation=maint-1", "--exclusive",
                    "--exclude=c1,c[10-12]", "--nodelist=c2"]


def test_a_system_without_placement_keys_asks_for_memory_only():
    words = sbatch_words(SYSTEM)
    assert not {"-C", "--exclusive"} & set(words)
    assert not [w for w in words if w.startswith(("--qos", "--nodelist", "--exclude"))]
    assert words[words.index("--mem") + 1] == str(int(8 * 1024 * 0.9))


def test_a_pinned_repetition_gets_the_nodes_of_repetition_0():
    record = {"slurm_nodes": "n[1-2]", "hosts": ["host"]}
    words = sbatch_words({**SYSTEM, "nodelist": "c9"}, pinned_nodes(record))
    assert [w for w in words if w.startswith("--nodelist")] == ["--nodelist=n[1-2]"]
    assert pinned_nodes({"slurm_nodes": None, "hosts": ["a", "b"]}) == "a,b"
    assert pinned_nodes({"slurm_nodes": None, "hosts": []}) is None


def example(pattern: str) -> str:
    """A slurm_extra word the plugin's pattern matches (its long option)."""
    option = re.match(r"--[a-z-]+", pattern).group(0)
    return option if option == "--parsable" else f"{option}=x"


@pytest.mark.parametrize("pattern", list(get_forbidden_slurm_options()))
def test_slurm_extra_with_a_plugin_managed_option_is_refused_naming_file_and_key(tmp_path, pattern):
    word = example(pattern)
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(
        {**SYSTEM, "slurm_extra": f"--hint=nomultithread {word}"}))
    with pytest.raises(ConfigError) as info:
        resolve_system("site", system_dir=tmp_path)
    message = str(info.value)
    assert message.startswith("config/systems/site.yaml: slurm_extra: ") and "\n" not in message
    assert get_forbidden_slurm_options()[pattern] in message


@pytest.mark.parametrize("word, key", [("--qos=high", "qos"), ("--constraint=gpu", "constraint"),
                                       ("--mem=1000", "memory_per_node_gb"),
                                       ("--exclusive", "exclusive"), ("--nodelist=c1", "nodelist"),
                                       ("--reservation=r", "reservation"), ("--exclude=c1", "exclude")])
def test_the_refusal_names_the_key_to_use_instead(word, key):
    cfg = yaml.safe_load((REPO / "tests" / "campaigns" / "tiny.yaml").read_text())
    cfg["system_definitions"] = {"local": {"arch": "auto", "cores_per_socket": 2, "slurm_extra": word}}
    with pytest.raises(ConfigError, match=rf"^system_definitions\.local\.slurm_extra: .* {key}\b"):
        load_campaign(cfg)


@pytest.mark.workflow
def test_a_dry_run_stops_on_a_managed_slurm_extra_option(workflow_copy):
    system = workflow_copy / "config" / "systems" / "local.yaml"
    system.write_text(system.read_text() + "slurm_extra: --qos=high\n")
    proc = snakemake(workflow_copy, "--profile", "profiles/local", "--configfile", "tiny.yaml",
                     "-n", check=False, timeout=120)
    assert proc.returncode != 0
    assert ("archbench: invalid configuration: config/systems/local.yaml: slurm_extra: "
            "'--qos=high' sets the quality of service option") in proc.stderr


def test_workers_import_without_the_slurm_plugin():
    """Images install archbench without the workflow's packages: the modules a worker
    imports must not need the executor plugin."""
    code = ("import sys; sys.modules['snakemake_executor_plugin_slurm'] = None; "
            "import archbench.run, archbench.workloads.training.strategies.base, archbench.kernels, archbench.plan.submission")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# One rank per GPU: processes_per_node == gpus_per_node.
GPU_SYSTEM = {**SYSTEM, "gpus_per_node": 4, "launcher": "srun"}


def gpu_run(nodes: int, per_node: int, **extra) -> dict:
    return {**MEASUREMENT, "experiment": "gpu", "device": "gpu", "nodes": nodes,
            "gpus_per_node": per_node, "processes_per_node": per_node, "gpus": nodes * per_node,
            **extra}


def options(words: list[str]) -> dict[str, str]:
    """--option=value words as a mapping (flags without a value map to "")."""
    return dict((w.split("=", 1) + [""])[:2] for w in words if w.startswith("--"))


def test_a_multi_node_gpu_run_asks_gres_per_node_and_one_task_per_gpu():
    """2 nodes x 4 GPUs: --gres=gpu:4 (per node), 8 tasks, the node's 8 cores / 4 ranks
    per task, and no --ntasks-per-gpu (the plugin would write the task count there)."""
    words = sbatch_words(GPU_SYSTEM, measurement=gpu_run(2, 4))
    opts = options(words)
    assert (opts["--gres"], opts["--nodes"], opts["--ntasks"], opts["--cpus-per-task"]) == (
        "gpu:4", "2", "8", "2"), words
    assert not {"--ntasks-per-gpu", "--gpus", "--cpus-per-gpu"} & set(opts), words


def test_a_one_gpu_run_names_the_sites_gpu_type_and_asks_no_task_per_gpu():
    """Piz Daint's request: --gres=gpu:p100:1; one task (sbatch's default) with every core."""
    words = sbatch_words({**GPU_SYSTEM, "gpus_per_node": 1, "gpu_type": "p100"},
                         measurement=gpu_run(1, 1))
    opts = options(words)
    assert (opts["--gres"], opts["--cpus-per-task"]) == ("gpu:p100:1", "8"), words
    assert opts.get("--ntasks", "1") == "1" and "--ntasks-per-gpu" not in opts, words


def test_gpu_request_gpus_asks_the_plugins_gpus_option():
    system = {**GPU_SYSTEM, "gpu_request": "gpus", "gpu_type": "v100"}
    opts = options(sbatch_words(system, measurement=gpu_run(1, 2)))
    assert (opts["--gpus"], opts["--ntasks"], opts["--cpus-per-task"]) == ("v100:2", "2", "4")
    assert "--gres" not in opts and "--ntasks-per-gpu" not in opts
    with pytest.raises(ConfigError, match=r"^systems\.site\.gpu_request: gpus .* 2 nodes"):
        job_resources(gpu_run(2, 2), system)


def test_a_gpu_run_launched_by_mpirun_still_asks_its_tasks():
    """The plugin writes --ntasks for a GPU job only in its MPI branch: mpi is the launcher."""
    resources = job_resources(gpu_run(1, 2), {**GPU_SYSTEM, "launcher": "mpirun"})
    assert resources["mpi"] == "mpirun"
    opts = options(sbatch_words({**GPU_SYSTEM, "launcher": "mpirun"}, measurement=gpu_run(1, 2)))
    assert (opts["--gres"], opts["--ntasks"]) == ("gpu:2", "2")


def test_a_cpu_run_on_a_gpu_system_asks_no_gpu():
    opts = options(sbatch_words(GPU_SYSTEM))
    assert not {"--gres", "--gpus", "--ntasks-per-gpu"} & set(opts)
    assert opts["--ntasks"] == "1"


@pytest.mark.parametrize("have", [0, 2])
def test_a_gpu_run_its_system_cannot_hold_is_refused_naming_file_and_key(have):
    system = {**GPU_SYSTEM, "gpus_per_node": have}
    with pytest.raises(ConfigError) as info:
        check_gpu_requests([{**gpu_run(1, 4), "system": "site"}], {"site": system}, inline={})
    message = str(info.value)
    assert message == (f"config/systems/site.yaml: gpus_per_node: {have} GPUs per node, but "
                       "experiment 'gpu' asks for 4 per node (device gpu)")
    with pytest.raises(ConfigError, match=r"^system_definitions\.site\.gpus_per_node: "):
        check_gpu_requests([{**gpu_run(1, 4), "system": "site"}], {"site": system},
                           inline={"site": system})
    with pytest.raises(ConfigError, match=r"^systems\.site\.gpus_per_node: "):
        job_resources(gpu_run(1, 4), system)


def test_a_campaign_asking_gpus_over_nodes_with_gpu_request_gpus_is_one_line():
    cfg = yaml.safe_load((REPO / "tests" / "campaigns" / "gpu_slurm.yaml").read_text())
    cfg["system_definitions"]["gpucluster"]["gpu_request"] = "gpus"
    with pytest.raises(ConfigError) as info:
        load_campaign(cfg)
    assert str(info.value).startswith("system_definitions.gpucluster.gpu_request: gpus asks")
    assert "\n" not in str(info.value)
