"""What the workflow checks and does while its Snakefile is parsed, before any job: each
refusal is one line (``sys.exit``), before anything is read or written that another run
could see. rules/common.smk calls these in order."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from archbench.core import snakemake_api, storage
from archbench.core.validate import ConfigError
from archbench.execute.runlock import invocation_refusal
from archbench.inputs import check_inputs
from archbench.plan import submission
from archbench.plan.campaign import Campaign
from archbench.plan.configfiles import snakemake_targets
from archbench.results.compare_cli import check_baseline
from archbench.results.integrity import another_run_holds_locks, quarantine_invalid
from archbench.results.record_sets import CompareError
from archbench.workflow.dag import CampaignDag


def refuse_invocation(workflow: Any, *, regenerate_only: bool) -> None:
    """Stop in one line: target `paper` without ``regenerate_only`` (Snakemake tells the
    workflow its targets only once the Snakefile is parsed, so they are read from its
    command line), and another run holding Snakemake's lock, ``--nolock``, or ``--unlock``
    while that run lives (archbench/execute/runlock.py)."""
    if "paper" in snakemake_targets() and not regenerate_only:
        sys.exit("archbench: `paper` rebuilds from the records on disk only: run `archbench "
                 "paper` (or `make paper`), or add --config regenerate_only=True")
    if snakemake_api.is_main_process(workflow) and (
            refused := invocation_refusal(dry_run=snakemake_api.is_dry_run(workflow))):
        sys.exit(refused)


def checked_campaign(workflow: Any, config: dict, *, mapping_dirs: Sequence[str]) -> Campaign:
    """The campaign, its files read again strictly (Snakemake's reading lets a repeated key
    win), validated and expanded, and every input it names checked (the claims against the
    plan only in the main process); one line naming the file and key on error."""
    try:
        return check_inputs(config, snakemake_api.configfiles(workflow),
                            overrides=snakemake_api.config_overrides(workflow),
                            system_dir=Path(workflow.basedir) / "config" / "systems",
                            mapping_dirs=mapping_dirs,
                            match_claims=snakemake_api.is_main_process(workflow))
    except ConfigError as exc:
        sys.exit(f"archbench: invalid configuration: {exc}")


def prepare_storage(workflow: Any) -> None:
    """Storage faults: a full or read-only results/, logs/ or .snakemake/ stops the run
    here, in one line, before anything is built; temporary files of killed writers are
    removed."""
    if not snakemake_api.is_main_process(workflow):
        return
    try:
        for message in storage.prepare_workdir(dry_run=snakemake_api.is_dry_run(workflow)):
            print(f"archbench: {message}", file=sys.stderr)
    except storage.Unwritable as fault:
        sys.exit(str(fault))


def use_batches(workflow: Any, dag: CampaignDag) -> None:
    """measurement_slots, counted per submission with a pool of 1 when the campaign batches:
    a group runs its members one after another and asks for one member's cores and memory
    with the sum of their runtimes (not the sums Snakemake's layering would give members
    side by side)."""
    if dag.batch_groups:
        snakemake_api.register_pool(workflow, "measurement_slots", 1)


def quarantine(workflow: Any, dag: CampaignDag, *, regenerate_only: bool) -> None:
    """A corrupt, truncated or nonsensical record, or one that is not what its plan says, is
    never aggregated: it is moved aside and rerun. Before it holds Snakemake's lock a run
    writes nothing another, live run could read: with the locks held elsewhere (a live
    run, or a killed one: either way this run is refused) it only reports what it would
    quarantine."""
    if not snakemake_api.is_main_process(workflow) or regenerate_only:
        return
    locked_elsewhere = another_run_holds_locks()
    for message in quarantine_invalid(dag.measurements, "results",
                                      dry_run=snakemake_api.is_dry_run(workflow) or locked_elsewhere,
                                      plans=dag.planned_records(dag.measurements)):
        print(f"archbench: {message}", file=sys.stderr)


def print_plan(workflow: Any, dag: CampaignDag, *, regenerate_only: bool) -> None:
    """A dry run (-n) prints the plan too (on stderr, before Snakemake lists the jobs)."""
    if snakemake_api.is_dry_run(workflow) and snakemake_api.is_main_process(workflow) and not regenerate_only:
        print(submission.campaign_plan(dag.name, dag.campaign.measurements, dag.systems,
                                      measurements_per_job=dag.measurements_per_job,
                                      batch_max_minutes=dag.batch_max_minutes)[1], file=sys.stderr)


def refuse_baseline(workflow: Any, baseline: Mapping | Any) -> None:
    """A baseline (``compare_with:``) without records, or a table that is not a measurements
    table, stops the run in one line, before any job."""
    if baseline and snakemake_api.is_main_process(workflow):
        try:
            check_baseline(baseline.results)
        except CompareError as fault:
            sys.exit(f"archbench: compare_with: {fault}")
