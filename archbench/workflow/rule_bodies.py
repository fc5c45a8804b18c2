"""The bodies of the workflow's jobs that run inside Snakemake's own process (``run:``), and
of its ``onstart``/``onsuccess`` hooks. Each takes what its rule gives it (input, output,
params, log) and the campaign's :class:`~archbench.workflow.dag.CampaignDag`.

Collecting, merging, tables and figures run as ``run:`` jobs: Snakemake's process has
pandas and matplotlib loaded already, and a Python process per table or figure cost more
than building it. Snakemake runs such jobs in threads; matplotlib's settings are
process-wide, so one artifact step runs at a time (:data:`ARTIFACT_STEP`).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

from archbench.core import snakemake_api
from archbench.core.files import atomic_write_text
from archbench.execute.runlock import name_holder
from archbench.execute.runlock import refusal as lock_refusal
from archbench.execute.specfiles import write_specs
from archbench.execute.tune_rounds import StudyError, choose_round, finish
from archbench.plan import submission
from archbench.results import artifacts
from archbench.results.collect import collect as collect_records
from archbench.results.collect import excluded_html, outcome_line
from archbench.results.collect import write_table as write_collected
from archbench.results.compare_cli import compare_sources
from archbench.results.compare_cli import write_files as write_comparison
from archbench.results.record_sets import CompareError
from archbench.results.tables.best import choose_layouts
from archbench.workflow.dag import CampaignDag

ARTIFACT_STEP = threading.Lock()
COLLECT_LOG = "logs/collect_measurements/collect.log"


def write_log(path: str, *lines: str) -> None:
    """Write a job's log (its lines, one each)."""
    atomic_write_text(path, "".join(f"{line}\n" for line in lines))


# ---------------------------------------------------------------- onstart, onsuccess

def name_lock_holder(workflow: Any) -> None:
    """onstart: name this run beside Snakemake's lock files (its host, pid, since when); a
    run without the lock (``nolock`` set by a profile) stops here, before any job."""
    if not snakemake_api.keeps_lock(workflow):
        sys.exit(lock_refusal(nolock=True))
    name_holder()


def write_planned_specs(dag: CampaignDag, *, regenerate_only: bool) -> None:
    """onstart: write the spec file of every measurement (those present are left as they
    are), once this run holds Snakemake's lock: a dry run or a refused run writes none."""
    if not regenerate_only:
        write_specs((dag.spec(p) for p in dag.measurements), dag.spec_dir)


def report_collection(workflow: Any) -> None:
    """onsuccess, at the end of a run that builds the tables (`run`, `paper`): print the
    collection's last line, how many records were counted and excluded and where they are
    listed."""
    targets = snakemake_api.targets(workflow)
    if targets and not targets & {"all", "paper"}:
        return
    try:
        line = Path(COLLECT_LOG).read_text().splitlines()[-1]
    except (OSError, IndexError):
        return
    if line.startswith("archbench: "):
        print(line, flush=True)


# ---------------------------------------------------------------- run: jobs

def write_plan(dag: CampaignDag, output: Any, params: Any) -> None:
    """plan_campaign: the campaign's plan (results/plan/<campaign>.{md,csv})."""
    submission.write_plan(dag.name, dag.campaign.measurements, dag.systems, csv=output.csv,
                         markdown=output.markdown, measurements_per_job=params.measurements_per_job,
                         batch_max_minutes=params.batch_max_minutes)


def collect(dag: CampaignDag, input: Any, output: Any, *, log: Any) -> None:
    """collect_measurements: the records that count into the tidy table (CSV, Parquet);
    every other record file under results/raw (invalid, not what its plan says, not
    planned by the campaign) named with its reason in one list (output.invalid), which the
    report shows (output.html). The log ends with the line a run prints at its end
    (:func:`report_collection`)."""
    with ARTIFACT_STEP:
        records = list(input.records)
        frame, errors = collect_records(records, dag.planned_records(records))
        errors += dag.unplanned_records()
        write_collected(frame, output.csv, output.parquet)
        atomic_write_text(output.invalid, "".join(f"{line}\n" for line in errors))
        atomic_write_text(output.html, excluded_html(errors))
    write_log(log[0], *(f"excluded record: {line}" for line in errors),
              outcome_line(len(frame), len(errors), output.invalid))


def merge(input: Any, output: Any, *, params: Any, log: Any) -> None:
    """merge_measurements: collected measurements + imported published results."""
    with ARTIFACT_STEP:
        merged = artifacts.merge_measurements(input.measurements, list(input.imports),
                                              output=output.merged, mapping_dirs=params.mapping_dirs)
    write_log(log[0], f"{len(merged)} rows ({len(input.imports)} imported files)")


def table(input: Any, output: Any, *, params: Any, log: Any) -> None:
    """make_<table>_table: one derived table as CSV, Markdown and LaTeX."""
    with ARTIFACT_STEP:
        made = artifacts.make_table_files(
            params.name, input.measurements, outputs={k: output[k] for k in ("csv", "md", "tex")},
            peak=params.peak, statistic=params.statistic, systems=params.systems,
            published=list(input.published), mapping_dirs=params.mapping_dirs,
            framework_bases=params.framework_bases)
    write_log(log[0], f"{params.name}: {len(made)} rows")


def figure(input: Any, output: Any, *, params: Any, log: Any) -> None:
    """plot_<figure>: one figure as PNG, PDF and SVG."""
    with ARTIFACT_STEP:
        artifacts.make_figure_files(params.name, input.measurements, list(output),
                                    statistic=params.statistic,
                                    framework_bases=params.framework_bases)
    write_log(log[0], f"{params.name} written")


def choose_best_layouts(dag: CampaignDag, input: Any, output: Any, *, params: Any, log: Any) -> None:
    """choose_best_layouts: for each `best` measurement of a system's experiment, the
    measurement its best layout makes of it, or why there is none (JSON by record path)."""
    with ARTIFACT_STEP:
        frame, _ = collect_records(list(input.records))
        chosen = choose_layouts(dag.best_measurements[output.layouts], frame, statistic=params.statistic)
    atomic_write_text(output.layouts, json.dumps(chosen, indent=1, sort_keys=True) + "\n")
    write_log(log[0], f"{len(input.records)} sweep records, {len(chosen)} layouts chosen")


def tune_round(dag: CampaignDag, input: Any, output: Any, *, log: Any) -> None:
    """tune_round: tell the study the previous round's records, ask this round's trials,
    write what each of the round's measurements runs (JSON by record path); a damaged
    or foreign study file fails the job with one line naming it (also its log)."""
    experiment, system = dag.tune_experiment(output.trials)
    placeholders = dag.tune_rounds[output.trials]
    previous = dag.tune_rounds.get(input.get("previous", ""), [])
    with study_step(log):
        chosen = choose_round(placeholders, previous, experiment=experiment, system=system,
                              statistic=dag.statistic)
    atomic_write_text(output.trials, json.dumps(chosen, indent=1, sort_keys=True) + "\n")
    trials = sorted({entry["trial"]["number"] for entry in chosen.values() if "trial" in entry})
    write_log(log[0], f"round {placeholders[0]['tune_round'] + 1}: trials {trials}, "
                      f"{sum('error' in e for e in chosen.values())} measurements without a trial")


def tune_best(dag: CampaignDag, input: Any, output: Any, *, log: Any) -> None:
    """tune_best: tell the study every round's records again; write what it found."""
    experiment, system = dag.tune_experiment(input.previous)
    folder = Path(input.previous).parent
    rounds = sorted((ms for f, ms in dag.tune_rounds.items() if Path(f).parent == folder),
                    key=lambda ms: ms[0]["tune_round"])
    with study_step(log):
        found = finish(rounds, experiment=experiment, system=system, statistic=dag.statistic)
    atomic_write_text(output.best, json.dumps(found, indent=1, sort_keys=True) + "\n")
    write_log(log[0], f"best: {found['best']}; trials: {found['trials']}")


@contextlib.contextmanager
def study_step(log: Any) -> Iterator[None]:
    """A tuner's step: a StudyError fails the job with its one line (also its log)."""
    try:
        yield
    except StudyError as fault:
        write_log(log[0], f"archbench: {fault}")
        raise snakemake_api.workflow_error(f"archbench: {fault}") from None


def compare(dag: CampaignDag, input: Any, output: Any, *, params: Any, log: Any) -> None:
    """compare_results: this campaign's measurements against the baseline's records; a
    comparison that cannot be made fails the job with one line (also its log)."""
    if params.baseline is None:
        raise snakemake_api.workflow_error(
            "archbench: compare_results needs a baseline (compare_with: in the campaign)")
    try:
        _compare(dag, input, output, params=params, log=log)
    except CompareError as fault:
        write_log(log[0], f"archbench: compare_with: {fault}")
        raise snakemake_api.workflow_error(f"archbench: compare_with: {fault}") from None


def _compare(dag: CampaignDag, input: Any, output: Any, *, params: Any, log: Any) -> None:
    with ARTIFACT_STEP:
        comparison, sides = compare_sources(params.baseline, input.measurements,
                                            across=params.across, statistic=params.statistic,
                                            threshold=params.threshold)
        write_comparison(comparison, Path(output.report).parent,
                         f"{params.baseline} -> campaign {dag.name}")
    counts = ", ".join(f"{n} {verdict}" for verdict, n in comparison.counts().items())
    write_log(log[0], *(f"baseline: excluded invalid record: {line}" for line in sides["base"][1]),
              f"{len(comparison.table)} configurations: {counts}")
