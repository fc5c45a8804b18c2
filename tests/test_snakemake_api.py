"""archbench/core/snakemake_api.py against the Snakemake it was written for: the installed
Snakemake is the version pyproject.toml pins (and the module names), and each wrapper does
what the workflow relies on, on the real objects of a real Snakemake run of a tiny
Snakefile. When Snakemake is upgraded, this file fails first: check each wrapper against
the new version, then move the pin (pyproject.toml and WRITTEN_FOR together)."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pytest
import snakemake
from conftest import REPO, tool_env
from conftest import snakemake as run_snakemake

from archbench.core import snakemake_api

pytestmark = pytest.mark.workflow


def pinned_snakemake() -> str:
    """The exact Snakemake version pyproject.toml pins (``snakemake==X``)."""
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d for d in dependencies if re.match(r"snakemake\s*==", d)]
    assert len(pins) == 1, f"pyproject.toml pins Snakemake exactly once: {dependencies}"
    return pins[0].split("==", 1)[1].strip()


def test_the_installed_snakemake_is_the_one_the_module_was_written_for():
    assert snakemake_api.WRITTEN_FOR == pinned_snakemake()
    assert snakemake.__version__ == snakemake_api.WRITTEN_FOR, (
        f"Snakemake {snakemake.__version__} installed, archbench/core/snakemake_api.py was "
        f"written for {snakemake_api.WRITTEN_FOR}: check it against the installed version")


# Every wrapper, on the workflow object Snakemake gives a Snakefile: what it reads while
# the Snakefile is parsed (parse.json), once the DAG is built (onstart.json), a per_job
# function Snakemake calls, and group joining (the dry run lists the group jobs).
SNAKEFILE = '''
import json
from archbench.core import snakemake_api as api

if not api.configfiles_given(workflow):
    configfile: "default.yaml"

json.dump({"dry_run": api.is_dry_run(workflow), "main": api.is_main_process(workflow),
           "configfiles": api.configfiles(workflow), "given": api.configfiles_given(workflow),
           "overrides": dict(api.config_overrides(workflow)), "config": dict(config)},
          open("parse.json", "w"))
api.register_pool(workflow, "slots", 1)
@api.per_job
def get_group(wildcards):
    api.join_groups(workflow, ["batch"], 3)
    return "batch"

@api.per_job
def get_value(wildcards, input):
    return f"v{wildcards.i}"

rule all:
    input: expand("out/{i}.txt", i=range(3))

rule make:
    output: "out/{i}.txt"
    params: value=get_value
    group: get_group
    resources: slots=1
    shell: "echo {params.value} > {output}"

onstart:
    json.dump({"keeps_lock": api.keeps_lock(workflow), "targets": sorted(api.targets(workflow)),
               "slots": workflow.global_resources["slots"].value},
              open("onstart.json", "w"))
'''


def run(workdir: Path, *args: str):
    env = tool_env(PYTHONPATH=str(REPO))
    return run_snakemake(workdir, *args, env=env, timeout=300)


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    (tmp_path / "default.yaml").write_text("who: default\n")
    (tmp_path / "given.yaml").write_text("who: given\n")
    return tmp_path


def test_the_wrappers_read_the_workflow_snakemake_gives(tiny):
    run(tiny, "--cores", "1", "--configfile", "given.yaml", "--config", "extra=1", "--nolock",
        "all")
    parsed = json.loads((tiny / "parse.json").read_text())
    assert parsed["dry_run"] is False and parsed["main"] is True and parsed["given"] is True
    assert [Path(p).name for p in parsed["configfiles"]] == ["given.yaml"]
    assert parsed["overrides"] == {"extra": 1} and parsed["config"]["who"] == "given"
    started = json.loads((tiny / "onstart.json").read_text())
    assert started["keeps_lock"] is False and started["targets"] == ["all"]
    assert started["slots"] == 1
    assert [(tiny / f"out/{i}.txt").read_text() for i in range(3)] == [f"v{i}\n" for i in range(3)]


# Snakemake forms group jobs only for a remote executor (the workflow's is Slurm's)
DRY_RUN = ("-n", "--executor", "slurm", "--jobs", "3", "--default-resources", "slurm_partition=debug")


def test_a_dry_run_joins_a_group(tiny):
    proc = run(tiny, *DRY_RUN)
    parsed = json.loads((tiny / "parse.json").read_text())
    assert parsed["dry_run"] is True and parsed["given"] is False
    assert [Path(p).name for p in parsed["configfiles"]] == ["default.yaml"]
    assert parsed["config"]["who"] == "default" and parsed["overrides"] == {}
    # three independent jobs of group "batch": one group job, as join_groups asked
    assert len(re.findall(r"Group job batch", proc.stdout + proc.stderr)) == 1, proc.stdout
    assert not (tiny / "onstart.json").exists()  # a dry run starts nothing


def test_without_joining_each_job_is_a_group_of_its_own(tiny):
    (tiny / "Snakefile").write_text(SNAKEFILE.replace('api.join_groups(workflow, ["batch"], 3)', "pass"))
    proc = run(tiny, *DRY_RUN)
    assert len(re.findall(r"Group job batch", proc.stdout + proc.stderr)) == 3, proc.stdout


def test_per_job_tells_snakemake_the_parameters_once():
    from snakemake.common import get_function_params

    def func(wildcards, input):
        return None

    assert snakemake_api.per_job(func) is func
    assert list(get_function_params(func)) == ["wildcards", "input"]


def test_the_command_line_is_read_with_snakemakes_own_parser():
    assert snakemake_api.invoked_as_snakemake(["/venv/bin/snakemake", "-n"])
    assert snakemake_api.invoked_as_snakemake([f"{Path(snakemake.__file__).parent}/__main__.py"])
    assert not snakemake_api.invoked_as_snakemake([sys.executable, "-m", "pytest"])
    args = snakemake_api.parsed_arguments(["-n", "paper", "--configfile", "a.yaml", "--nolock"])
    assert args.targets == ["paper"] and [str(p) for p in args.configfile] == ["a.yaml"]
    assert args.nolock and not args.unlock
    assert snakemake_api.parsed_arguments(["--rerun-triggers", "bogus"]) is None


def test_a_workflow_error_is_snakemakes():
    from snakemake.exceptions import WorkflowError

    error = snakemake_api.workflow_error("archbench: no")
    assert isinstance(error, WorkflowError) and "archbench: no" in str(error)
