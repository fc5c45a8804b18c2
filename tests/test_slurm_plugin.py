"""The Slurm executor plugin as scripts/setup_env.sh installs it: without its dependencies
(pyproject's [tool.archbench] install-without-deps), since it declares numpy>=2.4.5 and
TensorFlow 2.18 needs numpy<2.1. What makes that sound is checked here: the installed
plugin is the pinned one, every module of it imports with this numpy and pandas, its only
use of numpy is what this numpy has, its efficiency report computes with them, the profiles
set only options it has, and `pip check` complains of nothing but the two requirements
left out on purpose."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import pkgutil
import re
import subprocess
import sys
import tomllib
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO
from packaging.requirements import Requirement
from packaging.version import Version


def normalised(name: str) -> str:
    """A distribution name as pip compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


PLUGIN = "snakemake-executor-plugin-slurm"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
WITHOUT_DEPS = {normalised(Requirement(r).name): r
                for r in PYPROJECT["tool"]["archbench"]["install-without-deps"]}
# Requirements the packages installed without dependencies declare and this environment
# does not meet, by design (docs/pinned-versions.md#the-slurm-executor-plugin).
ACCEPTED = {PLUGIN: {"numpy"}, "tf-keras": {"tensorflow"}}
# numpy attributes the plugin may use: what it used when its pin was chosen.
NUMPY_USES = {"inf"}


def pinned(name: str) -> str:
    """The version pyproject's install-without-deps pins for ``name``."""
    requirement = WITHOUT_DEPS[normalised(name)]
    (clause,) = list(Requirement(requirement).specifier)
    assert clause.operator == "==", requirement
    return clause.version


def test_the_installed_plugin_and_tf_keras_are_the_pinned_ones():
    assert importlib.metadata.version(PLUGIN) == pinned(PLUGIN)
    assert importlib.metadata.version("tf_keras") == pinned("tf_keras")


def test_numpy_is_what_tensorflow_needs_not_what_the_plugin_declares():
    """The conflict this install resolves: if it were gone, the plugin could be a plain
    dependency again."""
    numpy_req = next(Requirement(r) for r in importlib.metadata.requires(PLUGIN)
                     if Requirement(r).name == "numpy")
    assert Version(np.__version__) < Version("2.1")
    assert np.__version__ not in numpy_req.specifier


def test_every_module_of_the_plugin_and_its_jobstep_imports():
    names = []
    for package in ("snakemake_executor_plugin_slurm", "snakemake_executor_plugin_slurm_jobstep"):
        root = importlib.import_module(package)
        names += [package] + [m.name for m in pkgutil.walk_packages(root.__path__, f"{package}.")]
    for name in names:
        importlib.import_module(name)
    assert "snakemake_executor_plugin_slurm.efficiency_report" in names


def numpy_attributes(source: str) -> set[str]:
    """Attributes read from numpy (imported as np or numpy) in one module's source."""
    tree = ast.parse(source)
    aliases = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for a in node.names if a.name == "numpy"}
    found = {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and node.module == "numpy" for a in node.names}
    found |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
              and isinstance(node.value, ast.Name) and node.value.id in aliases}
    return found


def test_the_plugin_uses_of_numpy_only_what_this_numpy_has():
    """np.inf (the efficiency report) and nothing else: a new pin that uses more must be
    checked against numpy<2.1 before NUMPY_USES grows."""
    root = Path(importlib.util.find_spec("snakemake_executor_plugin_slurm").origin).parent
    used = set().union(*(numpy_attributes(p.read_text()) for p in root.rglob("*.py")))
    assert used == NUMPY_USES, used
    assert all(hasattr(np, name) for name in used)


def test_the_efficiency_report_computes_with_this_numpy_and_pandas():
    """sacct rows of one job and its step, as the plugin's report reads them: the step
    inherits the job's rule and memory; CPU efficiency and memory use follow."""
    from snakemake_executor_plugin_slurm.efficiency_report import parse_sacct_data

    class Logger:
        def __init__(self):
            self.warnings = []

        def warning(self, message):
            self.warnings.append(message)

    rows = ["7|uuid|rule_run_measurement|00:00:10|00:00:05|1|1||2000M",
            "7.0|python||00:00:10|00:00:05|1|1|500M|",
            "7.batch|batch||00:00:10|00:00:00|1|1|10M|"]
    logger = Logger()
    df = parse_sacct_data(rows, 80, "uuid", logger)
    assert list(df["JobID"]) == ["7.0"]
    row = df.iloc[0]
    assert row["RuleName"] == "rule_run_measurement"
    assert row["CPU Efficiency (%)"] == pytest.approx(50.0)
    assert row["Memory Usage (%)"] == pytest.approx(25.0)
    assert len(logger.warnings) == 1 and "low CPU efficiency" in logger.warnings[0]


def profile_options(profile: str) -> set[str]:
    config = yaml.safe_load((REPO / "profiles" / profile / "config.yaml").read_text())
    return {key.removeprefix("slurm-").replace("-", "_") for key in config if key.startswith("slurm-")}


@pytest.mark.parametrize("profile", ["slurm", "slurm-test"])
def test_every_slurm_option_of_the_profiles_is_an_option_of_the_plugin(profile):
    from snakemake_executor_plugin_slurm import ExecutorSettings
    options = profile_options(profile)
    assert {"logdir", "status_command", "init_seconds_before_status_checks"} <= options
    assert options <= {f.name for f in fields(ExecutorSettings)}


def test_pip_check_complains_only_of_the_requirements_left_out_on_purpose():
    """Each complaint names a package installed without its dependencies and a requirement
    ACCEPTED for it; the plugin's is its numpy floor."""
    out = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True,
                         timeout=300)
    lines = [line for line in out.stdout.splitlines() if line.strip()] if out.returncode else []
    pattern = re.compile(r"^(\S+) (\S+) (?:requires (\S+?),|has requirement (\S+?)[<>=!~; ,])")
    complaints = set()
    for line in lines:
        match = pattern.match(line)
        assert match, f"pip check: {line}"
        package, version, missing, wrong = match.groups()
        requirement = normalised(missing or wrong)
        assert requirement in ACCEPTED.get(normalised(package), set()), f"pip check: {line}"
        assert version == importlib.metadata.version(package), line
        complaints.add((normalised(package), requirement))
    assert (normalised(PLUGIN), "numpy") in complaints, lines


def test_without_the_plugin_a_slurm_extra_cannot_be_checked_and_says_so_in_one_line(tmp_path):
    """`pip install .` leaves the plugin out (it is installed without its dependencies):
    `archbench check` of a system with slurm_extra then names what to install."""
    campaign = tmp_path / "extra.yaml"
    campaign.write_text(yaml.safe_dump({
        "campaign": "extra", "systems": ["site"],
        "system_definitions": {"site": {"arch": "auto", "cores_per_socket": 2,
                                        "slurm_extra": "--hint=nomultithread"}},
        "experiments": {"t": {"type": "thread_scaling", "models": ["small_cnn"], "threads": [1],
                              "batch_per_process": [4]}}}))
    code = ("import sys; sys.modules['snakemake_executor_plugin_slurm'] = None; "
            "from archbench.cli import main; sys.exit(main(['check', sys.argv[1]]))")
    proc = subprocess.run([sys.executable, "-c", code, str(campaign)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"archbench: invalid configuration: {campaign}: system_definitions.site.slurm_extra: "
        "'--hint=nomultithread' cannot be checked: the Slurm executor plugin is not installed "
        "(pip install --no-deps snakemake-executor-plugin-slurm, at the version pyproject.toml "
        "pins; scripts/setup_env.sh does)"]


@pytest.mark.parametrize("profile", ["slurm", "slurm-test"])
def test_the_profiles_let_the_plugin_submit_faster_than_snakemakes_default_pace(profile):
    """Snakemake's default of 100 submissions a second would pace a campaign of thousands
    of measurements; the profiles leave the pace to the plugin and Slurm (docs/testing.md,
    "Slurm submission")."""
    from snakemake.settings.types import MaxJobsPerTimespan
    config = yaml.safe_load((REPO / "profiles" / profile / "config.yaml").read_text())
    limit = MaxJobsPerTimespan.parse_choice(config["max-jobs-per-timespan"])
    assert limit.max_jobs / limit.timespan >= 1000
