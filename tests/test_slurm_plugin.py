"""The Slurm executor plugin as pyproject pins it, a dependency like any other (it declares
numpy>=2.4.5, which TensorFlow 2.21 accepts): the installed plugin is the pinned one, every
module of it and of its jobstep imports, its efficiency report computes with this numpy and
pandas, the profiles set only options it has, and `pip check` reports nothing."""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import re
import subprocess
import sys
import tomllib
from dataclasses import fields

import pytest
import yaml
from conftest import REPO
from packaging.requirements import Requirement

PLUGIN = "snakemake-executor-plugin-slurm"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def normalised(name: str) -> str:
    """A distribution name as pip compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(name: str) -> str:
    """The version pyproject's dependencies pin for ``name``."""
    (requirement,) = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]
                      if normalised(Requirement(r).name) == normalised(name)]
    (clause,) = list(requirement.specifier)
    assert clause.operator == "==", requirement
    return clause.version


def test_the_installed_plugin_and_tf_keras_are_the_pinned_ones_installed_as_dependencies():
    assert importlib.metadata.version(PLUGIN) == pinned(PLUGIN)
    assert importlib.metadata.version("tf_keras") == pinned("tf_keras")
    assert "install-without-deps" not in PYPROJECT.get("tool", {}).get("archbench", {})


def test_pip_check_reports_nothing():
    out = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "No broken requirements found."


def test_every_module_of_the_plugin_and_its_jobstep_imports():
    names = []
    for package in ("snakemake_executor_plugin_slurm", "snakemake_executor_plugin_slurm_jobstep"):
        root = importlib.import_module(package)
        names += [package] + [m.name for m in pkgutil.walk_packages(root.__path__, f"{package}.")]
    for name in names:
        importlib.import_module(name)
    assert "snakemake_executor_plugin_slurm.efficiency_report" in names


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


def test_without_the_plugin_a_slurm_extra_cannot_be_checked_and_says_so_in_one_line(tmp_path):
    """An environment without the plugin (an image installs archbench without the
    workflow's packages): `archbench check` of a system with slurm_extra names what to
    install."""
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
        "(pip install snakemake-executor-plugin-slurm, at the version pyproject.toml pins)"]


@pytest.mark.parametrize("profile", ["slurm", "slurm-test"])
def test_the_profiles_let_the_plugin_submit_faster_than_snakemakes_default_pace(profile):
    """Snakemake's default of 100 submissions a second would pace a campaign of thousands
    of measurements; the profiles leave the pace to the plugin and Slurm (docs/testing.md,
    "Slurm submission")."""
    from snakemake.settings.types import MaxJobsPerTimespan
    config = yaml.safe_load((REPO / "profiles" / profile / "config.yaml").read_text())
    limit = MaxJobsPerTimespan.parse_choice(config["max-jobs-per-timespan"])
    assert limit.max_jobs / limit.timespan >= 1000
