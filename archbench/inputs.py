"""Everything a campaign names, checked before any job runs: its files read strictly, the
campaign validated and expanded with its systems (:mod:`archbench.plan`), its container
definitions and image files, and the published values it imports (:mod:`archbench.results`).
The workflow (rules/common.smk) and ``archbench check`` run the same check."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Sequence

from archbench.core.csvfile import ImportFormatError
from archbench.core.validate import ConfigError
from archbench.core.yamlio import load_yaml_file
from archbench.plan.campaign import Campaign, check_inputs_exist, load_campaign
from archbench.results.claims import check_imports, is_claims_file
from archbench.results.claims_vs_plan import check_claims, planned_summary


def check_inputs(config: dict, files: Sequence[str | os.PathLike], *,
                 overrides: Mapping | None = None, system_dir: str | os.PathLike | None = None,
                 root: str | os.PathLike = ".",
                 mapping_dirs: Sequence[str | os.PathLike] = (), match_claims: bool = True) -> Campaign:
    """The campaign ``config`` once everything it names is checked, as the workflow does
    before any job: the campaign ``files`` it was parsed from read strictly, the campaign
    validated and expanded with its system files (in ``system_dir``, the workflow's
    config/systems, else those the package ships), its container definitions (under ``root``) and image
    files, its ``imports:`` (each claim naming a configuration the campaign runs,
    :mod:`archbench.results.claims_vs_plan`) and the baseline it is compared with (``compare_with:``, a
    path relative to the working directory). ``overrides``: the values of Snakemake's --config, merged
    over the files (Snakemake merges several files and those values into ``config``).
    ``match_claims``: hold the claims against the plan too (about a second for the largest
    study; the workflow does it once, in its main process, not again in every job).

    Errors are one ConfigError line naming the campaign files (``a.yaml + b.yaml`` when
    several were merged), a system file, or ``--config`` for a key set there, then the key:
    an import's ``imports.<i>`` precedes its file's own error."""
    names = [shown(f) for f in files]
    source = " + ".join(names) or None
    for path, name in zip(files, names):  # Snakemake's reading lets a repeated key win
        load_yaml_file(path, name)
    if "allow_env" in config and "allow_env" not in (overrides or {}):
        raise ConfigError("allow_env: a run allows environment variables on its command line "
                          "only (archbench run --allow-env NAME, or --config allow_env=NAME), "
                          "never in a campaign file", source=source)
    try:
        campaign = load_campaign(config, system_dir)
        check_inputs_exist(campaign, root)
    except ConfigError as exc:
        if exc.source is not None:
            raise
        key = str(exc).split(":", 1)[0].split(".", 1)[0]  # the top-level key it is under
        raise ConfigError(str(exc), source="--config" if key in (overrides or {}) else source) from exc
    imports = config.get("imports", [])
    matched = match_claims and any(map(is_claims_file, imports))
    summary = planned_summary(campaign.measurements) if matched else None
    for i, path in enumerate(imports):
        try:
            check_imports([path], mapping_dirs)
            if matched:
                check_claims([path], summary)  # each claim names a configuration the campaign runs
        except ImportFormatError as exc:
            raise ConfigError(f"imports.{i}: {exc}", source=source) from None
    if "compare_with" in config:
        from archbench.results.compare_cli import check_baseline
        from archbench.results.record_sets import CompareError, baseline, is_table
        try:
            found = baseline(config["compare_with"], Path(root) / "results")
            if is_table(found.results):  # its rows, as the workflow checks them at start
                check_baseline(found.results)
        except CompareError as exc:
            raise ConfigError(f"compare_with: {exc}", source=source) from None
    return campaign


def shown(path: str | os.PathLike) -> str:
    """``path`` for a message: relative to the working directory when it lies below it
    (Snakemake hands the workflow its --configfile paths made absolute)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
