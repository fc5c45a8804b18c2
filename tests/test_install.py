"""archbench installed like a Python tool: a non-editable install in a fresh virtual
environment validates campaigns from any directory (its schemas and shipped systems are
package data), prints the schema and plans a campaign in a checkout; every command line
answers --help; `snakemake paper` without regenerate_only stops in one line.

The fresh environment gets archbench's dependencies from this interpreter's site-packages
through a .pth file (nothing is downloaded, and the .pth files there, such as an editable
install's, are not run), and archbench itself from `pip install` of a copy of the
package: the installed copy is the one imported, never the checkout."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake, tool_env

from archbench import cli
from archbench.plan import systems
from archbench.plan.configfiles import snakemake_targets
from archbench.plan.systems import resolve_system

PACKAGE_FILES = ("pyproject.toml", "README.md", "archbench")
FACES = ("archbench.train", "archbench.run", "archbench.kernels", "archbench.importer", "archbench",
         "archbench.data")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtual environment holding a non-editable install of archbench."""
    root = tmp_path_factory.mktemp("install")
    venv, source = root / "venv", root / "source"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, env=bare_env()).stdout.strip()
    ours = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    (Path(site) / "archbench_test_dependencies.pth").write_text("".join(f"{p}\n" for p in ours))
    source.mkdir()
    for name in PACKAGE_FILES:  # a copy: pip builds in the source tree (build/, egg-info)
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, source / name)
    proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                           "--no-build-isolation", "--ignore-installed", "--no-index", str(source)],
                          capture_output=True, text=True, env=bare_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shutil.rmtree(source)  # nothing of the package is left outside the environment
    return venv


def bare_env(venv: Path | None = None) -> dict:
    """This environment without PYTHONPATH (which may name a checkout), with ``venv``'s bin
    first on PATH."""
    env = {k: v for k, v in tool_env().items() if k != "PYTHONPATH"}
    if venv is not None:
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    return env


def run(venv: Path, *argv: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """A program of ``venv`` (``archbench``, ``python``) run in ``cwd``."""
    return subprocess.run([str(venv / "bin" / argv[0]), *argv[1:]], cwd=cwd, env=bare_env(venv),
                          capture_output=True, text=True, timeout=timeout)


def test_the_installed_copy_is_imported_with_its_package_data(installed, tmp_path):
    code = ("import archbench\nfrom importlib import resources\n"
            "files = resources.files('archbench')\nprint(archbench.__file__)\n"
            "print(all(files.joinpath(f'schemas/{n}').is_file() for n in "
            "('config.schema.yaml', 'system.schema.yaml', 'experiment.schema.yaml', 'record.schema.json')))\n"
            "print(sorted(p.name for p in files.joinpath('systems').iterdir()))\n")
    proc = run(installed, "python", "-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    where, schemas, shipped = proc.stdout.splitlines()
    assert Path(where).is_relative_to(installed), where
    assert schemas == "True"
    assert eval(shipped) == sorted(p.name for p in (REPO / "archbench" / "systems").glob("*.yaml"))


def test_check_validates_a_checkouts_campaign_from_another_directory(installed, tmp_path):
    campaign = REPO / "config" / "campaigns" / "bsc-2019.yaml"
    proc = run(installed, "archbench", "check", str(campaign), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # the checkout holding the campaign: its systems, container definitions and imports
    assert re.fullmatch(rf"{re.escape(str(campaign))}: \d+ measurements \(workflow {re.escape(str(REPO))}\)\n",
                        proc.stdout), proc.stdout


def test_check_needs_no_checkout(installed, tmp_path):
    """A campaign on the shipped systems, alone in a directory: checked with the package's
    schemas and system files (also as ``python -m archbench check``)."""
    shutil.copy2(REPO / "tests" / "campaigns" / "tiny.yaml", tmp_path / "tiny.yaml")
    proc = run(installed, "archbench", "check", "tiny.yaml", cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "tiny.yaml: 4 measurements\n", "")
    proc = run(installed, "python", "-m", "archbench", "check", "tiny.yaml", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "tiny.yaml: 4 measurements\n", proc.stderr
    (tmp_path / "bad.yaml").write_text((tmp_path / "tiny.yaml").read_text().replace("[local]", "[atlantis]"))
    proc = run(installed, "archbench", "check", "bad.yaml", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr == (
        "archbench: invalid configuration: bad.yaml: systems: no system file "
        "config/systems/atlantis.yaml for 'atlantis'\n")


def test_schema_prints_every_key_a_campaign_may_use(installed, tmp_path):
    proc = run(installed, "archbench", "schema", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    schemas = yaml.safe_load(proc.stdout)
    assert list(schemas) == ["campaign", "experiment", "system"]
    assert "thread_scaling" in schemas["experiment"]["$defs"]
    assert {"experiments", "systems"} <= set(schemas["campaign"]["properties"])
    assert "cores_per_socket" in schemas["system"]["properties"]


@pytest.mark.workflow
def test_plan_is_the_dry_run_of_a_checkout(installed, tmp_path):
    workflow = copy_workflow(tmp_path / "workflow")
    proc = run(installed, "archbench", "plan", "--configfile", "tiny.yaml", "--quiet", cwd=workflow)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.startswith(f"archbench: in {workflow}: snakemake --profile profiles/local "
                                  "-n --quiet --configfile tiny.yaml\n")
    assert "# Plan for campaign `tiny`" in proc.stderr
    assert not (workflow / "results").exists()  # a dry run writes nothing
    # from another directory, naming the workflow
    proc = run(installed, "archbench", "paper", "--workflow", str(workflow), "--configfile",
               str(workflow / "tiny.yaml"), "-n", "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "regenerate_only=True" in proc.stderr.splitlines()[0]


@pytest.mark.parametrize("argv", [("archbench",), *(("archbench", c) for c in ("check", "schema", "plan", "run", "paper")),
                                  *(("python", "-m", face) for face in FACES)],
                         ids=lambda argv: " ".join(argv))
def test_every_help_exits_0(installed, tmp_path, argv):
    proc = run(installed, *argv, "--help", cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: "), proc.stdout + proc.stderr


@pytest.mark.parametrize("command", cli.WRAPPING)
def test_a_wrapping_command_without_a_workflow_says_so_in_one_line(command, tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main([command]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"archbench: no Snakefile in {tmp_path}")
    assert cli.main([command, "--workflow", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == (f"archbench: --workflow {tmp_path}: no Snakefile there "
                                 "(the workflow's directory is a checkout of archbench)\n")


@pytest.mark.workflow
def test_snakemake_paper_without_regenerate_only_stops_in_one_line(workflow_copy):
    proc = snakemake(workflow_copy, "paper", "--profile", "profiles/local", "--configfile",
                     "tiny.yaml", check=False, timeout=120)
    assert proc.returncode == 1
    ours = [line for line in proc.stderr.splitlines() if not line.startswith("Using profile")]
    assert ours == ["archbench: `paper` rebuilds from the records on disk only: run `archbench "
                    "paper` (or `make paper`), or add --config regenerate_only=True"], proc.stderr
    assert proc.stdout == "" and not (workflow_copy / "results").exists()


def test_the_targets_are_read_from_snakemakes_command_line():
    assert snakemake_targets(["/venv/bin/snakemake", "paper", "--configfile", "a.yaml"]) == ["paper"]
    assert snakemake_targets(["/lib/snakemake/__main__.py", "-n", "plan", "all"]) == ["plan", "all"]
    # --configfile takes every word after it, for Snakemake as here
    assert snakemake_targets(["/venv/bin/snakemake", "--configfile", "a.yaml", "paper"]) == []
    assert snakemake_targets(["/venv/bin/pytest", "paper"]) == []  # not Snakemake's command line


def test_archbench_paper_runs_what_make_paper_runs():
    makefile = (REPO / "Makefile").read_text()
    paper = re.search(r"^PAPER := \$\(SNAKEMAKE\) (.*)$", makefile, re.MULTILINE).group(1).split()
    recipe = re.search(r"^\t\$\(PAPER\) (.*)$", makefile, re.MULTILINE).group(1).split()
    assert cli.PAPER == paper + recipe
    assert cli.DEFAULT_PROFILE in re.search(r"^SNAKEMAKE := (.*)$", makefile, re.MULTILINE).group(1)


def test_snakemake_arguments(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("")
    args, extra = cli.parser().parse_known_args(
        ["run", "--configfile", "mine.yaml", "--configfile", "config/campaigns/x.yaml",
         "--profile", "profiles/slurm", "--cores", "4", "results/tables/summary.csv"])
    # run elsewhere: a file here is passed by its absolute path, others as given (the workflow's)
    assert cli.snakemake_arguments(args, extra, REPO) == [
        "--profile", "profiles/slurm", "--cores", "4", "results/tables/summary.csv",
        "--configfile", str(tmp_path / "mine.yaml"), "config/campaigns/x.yaml"]
    assert cli.snakemake_arguments(args, extra, tmp_path)[-2:] == ["mine.yaml", "config/campaigns/x.yaml"]
    # paper keeps regenerate_only=True beside another --config, and a dry run builds no report
    assert cli.paper_arguments(["--config", "statistic=median", "-n"]) == [
        "paper", "--forcerun", "collect_measurements", "--config", "regenerate_only=True",
        "statistic=median", "-n"]
    assert cli.paper_arguments([]) == cli.PAPER


def test_a_workflows_own_systems_win_and_the_shipped_ones_remain(tmp_path):
    (tmp_path / "local.yaml").write_text("arch: x86_64\ncores_per_socket: 3\n")
    (tmp_path / "mine.yaml").write_text("arch: aarch64\ncores_per_socket: 5\n")
    assert resolve_system("local", system_dir=tmp_path)["cores_per_socket"] == 3
    assert resolve_system("mine", system_dir=tmp_path)["arch"] == "aarch64"
    assert resolve_system("marenostrum4", system_dir=tmp_path)["cores_per_socket"] == 24
    assert systems.system_file("marenostrum4") == systems.SYSTEM_DIR / "marenostrum4.yaml"
    assert systems.system_file("mine") is None


def test_config_systems_is_the_shipped_systems_in_a_checkout():
    link = REPO / "config" / "systems"
    assert link.is_symlink() and link.resolve() == (REPO / "archbench" / "systems").resolve()
