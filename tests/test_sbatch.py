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
from snakemake_executor_plugin_slurm.validation import (
    get_forbidden_slurm_options,
    validate_slurm_extra,
)

from archbench.campaign import load_campaign
from archbench.plan import job_resources
from archbench.sbatch import pinned_nodes
from archbench.systems import resolve_system
from archbench.validate import ConfigError

MEASUREMENT = {"nodes": 1, "processes_per_node": 1, "timeout_minutes": 10}
SYSTEM = {"name": "site", "arch": "x86_64", "sockets": 2, "cores_per_socket": 4,
          "runtime_minutes": 30, "memory_per_node_gb": 8, "partition": "cpu"}


def sbatch_words(system: dict, pinned: str | None = None) -> list[str]:
    """The sbatch command line the plugin writes for a measurement on ``system``, after
    its own check of slurm_extra, split as the shell does."""
    job = SimpleNamespace(resources=ResourceList(fromdict=job_resources(MEASUREMENT, system, pinned)),
                          threads=1)
    validate_slurm_extra(job)
    params = {"run_uuid": "u1", "slurm_logfile": "log", "comment_str": "rule_run_measurement",
              "account": "", "partition": "-p cpu", "workdir": None}
    return shlex.split(get_submit_command(job, params))


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
    cfg["system_definitions"] = {"local": {"arch": "auto", "slurm_extra": word}}
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
            "import archbench.run, archbench.strategies.base, archbench.kernels, archbench.plan")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
