"""The ``archbench`` command (also ``python -m archbench``).

    archbench check CAMPAIGN.yaml          # validate a campaign and every input it names
    archbench schema [SECTION]             # every key a campaign may use: campaign, experiment, system
    archbench plan [--configfile FILE]     # the dry run: the plan, then every job; runs nothing
    archbench run [--configfile FILE] [SNAKEMAKE ARGUMENTS]   # run a campaign
    archbench paper [--configfile FILE]    # every table, figure and the report from results/raw
    archbench compare BASE NEW             # which configurations got faster or slower (docs/compare.md)

check and schema need the package alone. plan, run and paper run Snakemake in the
workflow's directory (a checkout): the current directory when it holds a Snakefile, else
--workflow DIR. Their profile is profiles/local unless --profile says otherwise, the
default campaign config/config.yaml unless --configfile names one, and every argument they
do not know goes to Snakemake as given.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Sequence

import yaml

from archbench.core.validate import ConfigError
from archbench.core.yamlio import load_yaml_file

DEFAULT_PROFILE = "profiles/local"
# What `make paper` runs after its target: every table, figure and the report rebuilt
# from the records on disk, no benchmark.
PAPER = ["paper", "--config", "regenerate_only=True", "--forcerun", "collect_measurements",
         "--report", "results/report.html", "--report-after-run"]
WRAPPING = ("plan", "run", "paper")
DRY_RUN = {"-n", "--dry-run", "--dryrun"}


class NoWorkflow(Exception):
    """No Snakefile where the workflow was looked for; the message says where."""


def is_workflow(directory: Path) -> bool:
    """True when ``directory`` holds a Snakefile."""
    return (directory / "Snakefile").is_file()


def find_workflow(given: str | None, start: Path | None = None) -> Path | None:
    """The workflow's directory: ``given`` (NoWorkflow when it holds no Snakefile), else the
    current directory when it holds one, else the nearest directory above ``start`` that
    does (a campaign file inside a checkout); None when there is none."""
    if given is not None:
        if not is_workflow(Path(given)):
            raise NoWorkflow(f"--workflow {given}: no Snakefile there (the workflow's "
                             "directory is a checkout of archbench)")
        return Path(given).absolute()
    if is_workflow(Path.cwd()):
        return Path.cwd()
    for directory in (start.absolute().parents if start is not None else ()):
        if is_workflow(directory):
            return directory
    return None


def check(path: str, workflow: str | None = None, allow_env: Sequence[str] = ()) -> int:
    """Validate a campaign and every input it names, as the workflow does before any job.
    With a workflow (``workflow``, the current directory, or the checkout holding the
    campaign file) the check runs there: its config/systems, container definitions and
    imports; without one, against the systems the package ships. ``allow_env``: the
    environment variables the run allows (``--allow-env``), as its ``--config`` would."""
    from archbench.inputs import check_inputs  # pandas: only when a campaign is checked
    try:
        directory = find_workflow(workflow, Path(path))
        config = load_yaml_file(path)
        overrides = {"allow_env": ",".join(allow_env)} if allow_env else {}
        if isinstance(config, dict):
            config.update(overrides)
        if directory is None:
            campaign = check_inputs(config, [path], overrides=overrides)
        else:
            file = path if directory == Path.cwd() else Path(path).absolute()
            with contextlib.chdir(directory):  # the campaign's paths are the workflow's
                campaign = check_inputs(config, [file], root=directory, overrides=overrides,
                                        system_dir=directory / "config" / "systems")
    except NoWorkflow as exc:
        print(f"archbench: {exc}", file=sys.stderr)
        return 1
    except ConfigError as exc:
        print(f"archbench: invalid configuration: {exc}", file=sys.stderr)
        return 1
    where = "" if directory in (None, Path.cwd()) else f" (workflow {directory})"
    print(f"{path}: {len(campaign.measurements)} measurements{where}")
    return 0


def schema(section: str | None = None) -> int:
    """Print every key a campaign may use (YAML, one JSON Schema per section: campaign,
    experiment, system), or the schema of one ``section``."""
    from archbench.plan.campaign import SCHEMA_SECTIONS, campaign_schemas
    schemas = campaign_schemas()
    if section is not None:
        text = yaml.safe_dump(schemas[section], sort_keys=False, width=100)
    else:
        text = "\n".join(["# Every key a campaign may use, one JSON Schema per section:",
                          *(f"#   {name}: {what}" for name, what in SCHEMA_SECTIONS.items()),
                          yaml.safe_dump(schemas, sort_keys=False, width=100)])
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `archbench schema | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def paper_arguments(extra: Sequence[str]) -> list[str]:
    """:data:`PAPER` with ``extra`` after it. A ``--config`` of ``extra`` keeps
    regenerate_only=True (Snakemake keeps the last --config it is given); a dry run writes
    no report (Snakemake would build it from artifacts the dry run did not make)."""
    extra, paper = list(extra), list(PAPER)
    if DRY_RUN.intersection(extra):
        paper = paper[:paper.index("--report")]
    for i, word in enumerate(extra):
        if word in ("--config", "-C"):
            paper.remove("--config")
            paper.remove("regenerate_only=True")
            extra.insert(i + 1, "regenerate_only=True")
            break
    return paper + extra


def with_config(words: list[str], setting: str) -> list[str]:
    """``words`` with ``setting`` (KEY=VALUE) among its ``--config`` values, or a
    ``--config`` of its own (Snakemake keeps the last --config it is given)."""
    for i, word in reversed(list(enumerate(words))):
        if word in ("--config", "-C"):
            return [*words[:i + 1], setting, *words[i + 1:]]
    return [*words, "--config", setting]


def snakemake_arguments(args: argparse.Namespace, extra: Sequence[str],
                        workflow: Path) -> list[str]:
    """Snakemake's command line (without the program) for ``plan``, ``run`` or ``paper``.
    A --configfile or --profile path that exists from the current directory is made
    absolute when Snakemake runs elsewhere; the campaign files come last (Snakemake's
    --configfile takes every word after it)."""
    def path(value: str) -> str:
        moved = workflow != Path.cwd() and Path(value).exists()
        return str(Path(value).absolute()) if moved else value

    words = ["--profile", path(args.profile)]
    if args.command == "plan":
        words += ["-n", *extra]
    elif args.command == "paper":
        words += paper_arguments(extra)
    else:
        words += extra
    if args.allow_env:
        words = with_config(words, f"allow_env={','.join(args.allow_env)}")
    files = [path(f) for f in args.configfile or []]
    return words + (["--configfile", *files] if files else [])


def snakemake_environment() -> dict[str, str]:
    """This environment with this interpreter's bin first on PATH (the rules' ``python``
    and ``snakemake`` are this installation's) and the registered frameworks' environment
    as `make` sets it, unless already set."""
    from archbench.workloads.training.frameworks import environment
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for name, value in environment().items():
        env.setdefault(name, value)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def executor_of(profile: Path, extra: Sequence[str]) -> tuple[str | None, str]:
    """The executor Snakemake would use and what says so: ``--executor``/``-e`` of
    ``extra``, else the ``executor`` of the profile's config file; (None, ...) when neither
    says (or the profile cannot be read: Snakemake then says why)."""
    for i, word in enumerate(extra):
        if word in ("--executor", "-e") and i + 1 < len(extra):
            return extra[i + 1], f"{word} {extra[i + 1]}"
        if word.startswith("--executor="):
            return word.split("=", 1)[1], word
    for name in ("config.v8+.yaml", "config.yaml"):  # Snakemake's choice of the two
        if (profile / name).is_file():
            try:
                settings = yaml.safe_load((profile / name).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                return None, ""
            executor = settings.get("executor") if isinstance(settings, dict) else None
            return executor, f"--profile {profile.name}"
    return None, ""


def check_sbatch(args: argparse.Namespace, extra: Sequence[str], workflow: Path) -> int | None:
    """With the Slurm executor on a machine without ``sbatch`` on PATH: one line at once
    (Snakemake would say nothing about it until its first submission, after the whole
    plan). A dry run goes on (the plan is what a Slurm machine would run); ``run`` and
    ``paper`` stop with status 1. None: go on."""
    profile = Path(args.profile) if Path(args.profile).is_dir() else workflow / args.profile
    executor, via = executor_of(profile, extra)
    if executor != "slurm" or shutil.which("sbatch"):
        return None
    if via.startswith("--profile"):
        via = f"--profile {args.profile}"
    if args.command == "plan" or DRY_RUN.intersection(extra):
        print(f"archbench: no sbatch on this machine: the plan below is what {via} would "
              "submit to Slurm from a machine that has it", file=sys.stderr)
        return None
    print(f"archbench: {via} submits jobs with sbatch, and this machine has no sbatch on "
          f"PATH: run it where Slurm is installed (a login node), or use --profile "
          f"{DEFAULT_PROFILE}", file=sys.stderr)
    return 1


def lock_refusal(command: str, extra: Sequence[str], workflow: Path) -> str | None:
    """The one line refusing ``command`` before Snakemake starts (archbench.execute.runlock):
    ``run`` and ``paper`` refuse --nolock, an --unlock while the run holding Snakemake's lock
    lives, and (unless a dry run) any run while another one holds it. ``plan`` is a dry run:
    it takes no lock and is never refused."""
    if command == "plan":
        return None
    from archbench.execute import runlock
    if runlock.names(list(extra), runlock.UNLOCK):
        return runlock.refusal(workflow, unlock=True)
    nolock = runlock.names(list(extra), runlock.NOLOCK)
    if not nolock and DRY_RUN.intersection(extra):
        return None
    return runlock.refusal(workflow, nolock=nolock)


def run_snakemake(args: argparse.Namespace, extra: Sequence[str]) -> int:
    """Replace this process with Snakemake in the workflow's directory (Ctrl-C then reaches
    Snakemake alone, which cleans up as it does when run directly; the pid, which names the
    run holding Snakemake's lock, stays the same), unless :func:`lock_refusal` refuses."""
    try:
        workflow = find_workflow(args.workflow)
    except NoWorkflow as exc:
        print(f"archbench: {exc}", file=sys.stderr)
        return 1
    if workflow is None:
        print(f"archbench: no Snakefile in {Path.cwd()}: run `archbench {args.command}` in the "
              "workflow's directory (a checkout) or give --workflow DIR", file=sys.stderr)
        return 1
    refused = lock_refusal(args.command, extra, workflow)
    if refused:
        print(refused, file=sys.stderr)
        return 1
    if (refused := check_sbatch(args, extra, workflow)) is not None:
        return refused
    argv = [sys.executable, "-m", "snakemake", *snakemake_arguments(args, extra, workflow)]
    print(f"archbench: in {workflow}: snakemake {shlex.join(argv[3:])}", file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    os.chdir(workflow)
    os.execve(sys.executable, argv, snakemake_environment())
    return 1  # not reached


def add_compare(commands) -> None:
    """Register ``archbench compare`` (the arguments of :mod:`archbench.results.compare_cli`) for
    ``archbench --help``; :func:`main` hands the command line to
    :func:`archbench.results.compare_cli.main`, whose parser refuses in one line."""
    from archbench.results import compare_cli  # argparse only; pandas when it runs
    compare_cli.add_arguments(commands.add_parser(
        "compare", help="which configurations got faster or slower between two result sets",
        description=compare_cli.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter))


def add_allow_env(command: argparse.ArgumentParser) -> None:
    """``--allow-env NAME``: a variable that loads code or steers archbench, which this run
    lets system and experiment env set (archbench/plan/environment.py)."""
    command.add_argument("--allow-env", action="append", metavar="NAME", default=[],
                         help="let system and experiment env set NAME for this run although it "
                              "loads code or steers archbench (LD_PRELOAD, PYTHONPATH, ...; "
                              "repeat for several; Snakemake: --config allow_env=NAME,NAME)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="archbench", description=__doc__.split("\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = p.add_subparsers(dest="command", required=True)
    checking = commands.add_parser("check", help="validate a campaign and every input it names",
                                   allow_abbrev=False)
    checking.add_argument("campaign", help="a campaign YAML file")
    checking.add_argument("--workflow", metavar="DIR",
                          help="the workflow whose systems, containers and imports the campaign "
                               "uses (default: the current directory when it holds a Snakefile, "
                               "else the checkout holding the campaign file, else none: the "
                               "shipped systems)")
    add_allow_env(checking)
    schemas = commands.add_parser("schema", allow_abbrev=False,
                                  help="print every key a campaign may use (campaign, "
                                       "experiment and system keys)")
    schemas.add_argument("section", nargs="?", choices=("campaign", "experiment", "system"),
                         help="print this section alone")
    helps = {"plan": "the dry run: the plan (measurements, jobs, node-hours), then every job",
             "run": "run a campaign (every further argument goes to Snakemake)",
             "paper": "rebuild every table, figure and the report from results/raw (no benchmark)"}
    for name in WRAPPING:
        wrapping = commands.add_parser(
            name, help=helps[name], description=helps[name], allow_abbrev=False,
            usage=f"archbench {name} [-h] [--configfile FILE] [--profile PROFILE] "
                  "[--workflow DIR] [--allow-env NAME] [SNAKEMAKE ARGUMENTS]",
            epilog="Snakemake runs in the workflow's directory; every argument not listed "
                   "above goes to it as given (-n, --cores 4, a target, ...).")
        wrapping.add_argument("--configfile", action="append", metavar="FILE",
                              help="a campaign (repeat to merge several; default config/config.yaml)")
        wrapping.add_argument("--profile", default=DEFAULT_PROFILE,
                              help=f"a Snakemake profile (default {DEFAULT_PROFILE}; "
                                   "profiles/slurm on a cluster)")
        wrapping.add_argument("--workflow", metavar="DIR",
                              help="the workflow's directory (default: the current directory)")
        add_allow_env(wrapping)
    add_compare(commands)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["compare"]:  # its own parser: a usage error is one line, as its refusals
        from archbench.results import compare_cli
        return compare_cli.main(argv[1:], prog="archbench compare")
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra[:1] == ["--"]:  # `archbench run -- ARGS`: ARGS are Snakemake's
        extra = extra[1:]
    if args.command in WRAPPING:
        return run_snakemake(args, extra)
    if extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "check":
        return check(args.campaign, args.workflow, args.allow_env)
    return schema(args.section)


if __name__ == "__main__":
    sys.exit(main())
