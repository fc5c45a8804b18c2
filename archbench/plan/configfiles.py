"""The campaign files given to Snakemake with --configfile, read strictly before Snakemake
reads them.

Snakemake parses its --configfile files itself, before the workflow starts: one that is
not UTF-8 stops it with a traceback, one that is not YAML, is empty or whose top level
is not a mapping (a list) with a message that does not name it. It loads the workflow profile (profiles/default/config.yaml) earlier still, for
every run in the workflow's directory, and evaluates a profile written as a YTE template:
that profile calls :func:`check_configfiles`, which reads each file as the workflow will
(:func:`archbench.core.yamlio.load_yaml_file`) and stops on the first bad one with one line
naming it. The workflow checks everything else (rules/common.smk), and reads the targets
of the same command line (:func:`snakemake_targets`) while its Snakefile is parsed, before
Snakemake knows them.
"""

from __future__ import annotations

import sys
from typing import Sequence

from archbench.core.snakemake_api import invoked_as_snakemake, parsed_arguments
from archbench.core.validate import ConfigError
from archbench.core.yamlio import load_yaml_file


def configfile_arguments(argv: Sequence[str]) -> list[str]:
    """The --configfile files of Snakemake command line ``argv`` (without the program), as
    Snakemake's own parser reads them."""
    args = parsed_arguments(argv)
    return [str(path) for path in args.configfile or []] if args else []


def snakemake_targets(argv: Sequence[str] | None = None) -> list[str]:
    """The targets (rules or files) Snakemake's command line (default ``sys.argv``) names;
    none when this process is not Snakemake started from its command line (a program
    calling Snakemake's API, or a job Snakemake started, which names its job with
    --target-jobs). While the Snakefile is parsed Snakemake has not told the workflow its
    targets yet (``workflow.dag_settings`` is None then)."""
    argv = list(sys.argv if argv is None else argv)
    if not invoked_as_snakemake(argv):
        return []
    args = parsed_arguments(argv[1:])
    return [str(target) for target in args.targets or []] if args else []


def check_configfiles(argv: Sequence[str] | None = None) -> None:
    """Exit with one line (``archbench: invalid configuration: FILE: reason``) when a
    --configfile of Snakemake's command line (default ``sys.argv``) cannot be read as a
    campaign file: missing, a directory, not UTF-8, not YAML, a key given twice, empty or
    not a mapping at its top level (a list, a single value), ..."""
    argv = list(sys.argv if argv is None else argv)
    if not invoked_as_snakemake(argv):
        return
    for path in configfile_arguments(argv[1:]):
        try:
            campaign = load_yaml_file(path)
        except ConfigError as exc:
            raise SystemExit(f"archbench: invalid configuration: {exc}") from None
        if not isinstance(campaign, dict):  # Snakemake's own message names no file
            raise SystemExit(f"archbench: invalid configuration: {path}: (top level): a "
                             f"campaign must be a mapping ({_what(campaign)})")


def _what(document: object) -> str:
    """What a YAML document that is not a mapping is, for the refusal."""
    if document is None:
        return "the file is empty"
    return f"the file holds a {'list' if isinstance(document, list) else type(document).__name__}"
