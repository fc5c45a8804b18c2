"""Every use archbench makes of Snakemake beyond its documented workflow language, in one
place: attributes of the ``workflow`` object the Snakefile sees, the hook that tells
Snakemake a function's parameters, the group settings a batched run needs, and Snakemake's
own command-line parser (the workflow reads its targets before Snakemake tells it them).

These lean on Snakemake's internals, which change between releases without notice, so they
are written for one version (:data:`WRITTEN_FOR`, the version pyproject.toml pins) and
``tests/test_snakemake_api.py`` exercises each against the real Snakemake objects of the
installed version, failing first when the pin moves. Snakemake itself is imported inside the
functions: images install archbench without the workflow's packages, and the profile check
and the lock check below run before (or without) a workflow.
"""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

WRITTEN_FOR = "9.27.1"  # = the snakemake pin of pyproject.toml

F = TypeVar("F", bound=Callable[..., Any])


# ---------------------------------------------------------------- the workflow object

def is_dry_run(workflow: Any) -> bool:
    """Whether this Snakemake plans only (``-n``)."""
    return bool(workflow.output_settings.dryrun)


def is_main_process(workflow: Any) -> bool:
    """Whether the Snakefile is parsed by the Snakemake a person started, not again by a
    job (a group's, or a cluster job's) it started."""
    return bool(workflow.is_main_process)


def keeps_lock(workflow: Any) -> bool:
    """Whether this run holds Snakemake's lock on its working directory (no ``--nolock``)."""
    return bool(workflow.execution_settings.lock)


def targets(workflow: Any) -> set[str]:
    """The targets Snakemake was asked for (empty: the default target). Known once the DAG
    is built (``onstart``, ``onsuccess``), not while the Snakefile is parsed."""
    return set(workflow.dag_settings.targets or ())


def config_overrides(workflow: Any) -> Mapping[str, Any]:
    """The values given with ``--config`` (merged over the campaign files)."""
    return workflow.config_settings.config


def configfiles(workflow: Any) -> list[str]:
    """The campaign files Snakemake read (``--configfile``, else the Snakefile's)."""
    return [str(path) for path in workflow.configfiles]


def configfiles_given(workflow: Any) -> bool:
    """Whether the command line named its campaign files (``--configfile``): the
    Snakefile's ``configfile:`` is then not read."""
    return bool(workflow.overwrite_configfiles)


def register_pool(workflow: Any, name: str, size: int) -> None:
    """Declare resource ``name`` with a pool of ``size`` (as ``--resources name=size``
    would; it replaces a value given there)."""
    workflow.register_resource(name, size)


def join_groups(workflow: Any, groups: Sequence[str], size: int) -> None:
    """Have Snakemake join up to ``size`` independent jobs of each group name of ``groups``
    (distinct names) into one group job (``--group-components``). Call it while the DAG is
    built, where it runs once per job (so it costs one look-up once set): the group settings
    Snakemake runs with replace those the Snakefile was parsed with."""
    settings = workflow.group_settings
    if groups and settings.group_components.get(groups[0]) != size:
        settings.group_components = {**settings.group_components, **dict.fromkeys(groups, size)}


def per_job(func: F) -> F:
    """``func`` (an input, params or resources function) with its parameters told to
    Snakemake once: Snakemake otherwise inspects a function's signature at every call, for
    every job of the DAG."""
    from snakemake.common import overwrite_function_params

    overwrite_function_params(func, inspect.signature(func).parameters)
    return func


# ---------------------------------------------------------------- the command line

def invoked_as_snakemake(argv: Sequence[str]) -> bool:
    """True when ``argv`` is Snakemake's command line (``snakemake ...`` or ``python -m
    snakemake ...``), not that of a program calling Snakemake's API."""
    program = Path(argv[0]) if argv else Path()
    return program.name == "snakemake" or (program.name == "__main__.py"
                                           and program.parent.name == "snakemake")


def parsed_arguments(argv: Sequence[str]) -> argparse.Namespace | None:
    """Snakemake command line ``argv`` (without the program) as Snakemake's own parser reads
    it; None when that parser refuses it."""
    from snakemake.cli import get_argument_parser

    try:  # Snakemake parsed this command line before it loaded its profiles
        args, _ = get_argument_parser().parse_known_args(list(argv))
    except SystemExit:  # then it is not the command line Snakemake runs with
        return None
    return args


def workflow_error(message: str) -> Exception:
    """The exception a job or input function raises to fail with ``message`` alone
    (Snakemake prints a WorkflowError without a traceback)."""
    from snakemake.exceptions import WorkflowError

    return WorkflowError(message)
