# Load, validate and derive: the campaign's measurements and the helpers rules use.
import inspect
import json
import os
import sys
import threading
from functools import lru_cache
from pathlib import Path

from snakemake.common import overwrite_function_params

from archbench.core import storage as archbench_storage
from archbench.core.files import atomic_write_text
from archbench.core.record import raw_path
from archbench.core.validate import ConfigError
from archbench.execute.runlock import invocation_refusal, name_holder, refusal as lock_refusal
from archbench.execute.specfiles import digest, spec_dir, spec_text, write_specs
from archbench.inputs import check_inputs
from archbench.plan import jobs as archbench_plan
from archbench.plan.batching import group_names
from archbench.plan.configfiles import snakemake_targets
from archbench.plan.containers import build_command, image_file, pull_commands, shell_join, uri_scheme
from archbench.plan.experiment_types.node_scaling import best_sources
from archbench.plan.plan_match import plans_of
from archbench.plan.slurm_requests import pinned_nodes
from archbench.plan.systems import run_settings
from archbench.results import artifacts
from archbench.results.claims import is_claims_file
from archbench.results.collect import collect as collect_records
from archbench.results.collect import excluded_html, outcome_line, unplanned
from archbench.results.collect import write_table as write_collected
from archbench.results.compare import FILES as COMPARE_FILES
from archbench.results.compare import compare_sources, write_files as write_comparison
from archbench.results.comparison import caption
from archbench.results.figures import FIGURES
from archbench.results.imports import mapping_files
from archbench.results.integrity import another_run_holds_locks, quarantine_invalid
from archbench.results.record_sets import baseline, record_paths
from archbench.results.tables import TABLES
from archbench.results.tables.best import choose_layouts
from archbench.workloads.training.models import spec as model_spec

# mapping sidecars sit beside their CSV (data/published/<study>/); extra folders go here
IMPORT_MAPPING_DIRS = []

# --config regenerate_only=True (`archbench paper`, `make paper`) rebuilds tables, figures
# and the report from the records already on disk and runs no benchmark. Target `paper`
# without it stops here in one line, before anything is read or written: Snakemake tells
# the workflow its targets only once this file is parsed (rule paper's input function runs
# later, and whatever it raises Snakemake prints with a traceback), so they are read from
# its command line.
REGENERATE_ONLY = bool(config.get("regenerate_only", False))
if "paper" in snakemake_targets() and not REGENERATE_ONLY:
    sys.exit("archbench: `paper` rebuilds from the records on disk only: run `archbench "
             "paper` (or `make paper`), or add --config regenerate_only=True")

# Another run holding Snakemake's lock (named with its host, pid and whether it lives),
# --nolock, and --unlock while that run lives: one line, before anything is read or
# written (archbench/execute/runlock.py). Once this run holds the lock, onstart names it.
if workflow.is_main_process and (_refused := invocation_refusal(dry_run=workflow.output_settings.dryrun)):
    sys.exit(_refused)

# The campaign files read again strictly (Snakemake's reading lets a repeated key win),
# validated and expanded, and every input they name checked, all before any job. One line
# naming the file and key on error.
CAMPAIGN_FILES = [str(p) for p in workflow.configfiles]
try:
    CAMPAIGN = check_inputs(config, CAMPAIGN_FILES, overrides=workflow.config_settings.config,
                            system_dir=Path(workflow.basedir) / "config" / "systems",
                            mapping_dirs=IMPORT_MAPPING_DIRS, match_claims=workflow.is_main_process)
except ConfigError as exc:
    sys.exit(f"archbench: invalid configuration: {exc}")

# Storage faults: a full or read-only results/, logs/ or .snakemake/ stops the run here,
# in one line, before anything is built; temporary files of killed writers are removed.
if workflow.is_main_process:
    try:
        for _message in archbench_storage.prepare_workdir(dry_run=workflow.output_settings.dryrun):
            print(f"archbench: {_message}", file=sys.stderr)
    except archbench_storage.Unwritable as fault:
        sys.exit(str(fault))

MEASUREMENTS = {f"results/{raw_path(m)}": m for m in CAMPAIGN.measurements}
SYSTEMS = CAMPAIGN.systems
# The records of each sweep (system, experiment), for `best` measurements to depend on.
SWEEP_RECORDS = {}
for _path, _m in MEASUREMENTS.items():
    SWEEP_RECORDS.setdefault((_m["system"], _m["experiment"]), []).append(_path)
DRY_RUN = workflow.output_settings.dryrun
# from the registries (vs_published only when the campaign lists published values, `imports:`)
TABLE_NAMES = artifacts.table_names(config)
FIGURE_NAMES = artifacts.figure_names()
# The baseline the campaign is compared with (`compare_with:`, checked above), or None.
BASELINE = baseline(config["compare_with"]) if "compare_with" in config else None
# The small JPEG TFRecord set rule make_tfrecords writes (a system's data_dir may name it).
GENERATED_TFRECORDS = "results/data/tfrecords"

# Batching (campaign key measurements_per_job; archbench/plan/batching.py): each chunk of measurements is
# one job group, i.e. one Slurm job. measurement_slots is counted per submission with a
# pool of 1, so a group runs its members one after another and asks for one member's
# cores and memory with the sum of their runtimes (not the sums Snakemake's layering
# would give members side by side).
MEASUREMENTS_PER_JOB = int(config.get("measurements_per_job", 1))
BATCH_MAX_MINUTES = config.get("batch_max_minutes")
BATCH_GROUPS = group_names(
    CAMPAIGN.measurements, lambda m: archbench_plan.job_resources(m, SYSTEMS[m["system"]]),
    lambda m: f"results/{raw_path(m)}", size=MEASUREMENTS_PER_JOB, max_minutes=BATCH_MAX_MINUTES,
    systems=SYSTEMS)


resource_scopes:
    measurement_slots="local",


if BATCH_GROUPS:
    workflow.register_resource("measurement_slots", 1)

# Before it holds Snakemake's lock a run writes nothing another, live run could read: with
# the locks held elsewhere (a live run, or a killed one: either way this run is refused)
# it only reports what it would quarantine.
LOCKED_ELSEWHERE = workflow.is_main_process and another_run_holds_locks()


def planned_records(paths):
    """What the campaign planned for each record path of ``paths`` (a `best` measurement:
    the layout chosen for it, archbench/plan/plan_match.py)."""
    return plans_of("results", ((p, MEASUREMENTS[p]) for p in paths))


# A corrupt, truncated or nonsensical record, or one that is not what its plan says, is
# never aggregated: it is moved aside and rerun.
if workflow.is_main_process and not REGENERATE_ONLY:
    for message in quarantine_invalid(MEASUREMENTS, "results", dry_run=DRY_RUN or LOCKED_ELSEWHERE,
                                      plans=planned_records(MEASUREMENTS)):
        print(f"archbench: {message}", file=sys.stderr)


wildcard_constraints:
    system=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    experiment=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    config_id=r"[^/]+",
    rep=r"\d+",


# Per-job functions run for every job of a 10,000-job DAG (some several times): each is
# computed once per record path and cached, and declares its parameters once (Snakemake
# otherwise inspects a function's signature at every call).


def per_job(func):
    """``func`` with its parameters told to Snakemake once (its own hook for that)."""
    overwrite_function_params(func, inspect.signature(func).parameters)
    return func


# run_measurement's output: the record path (archbench.core.record.raw_path) as a pattern
RECORD_PATTERN = os.path.join("results", raw_path(
    {"system": "{system}", "experiment": "{experiment}", "config_id": "{config_id}", "repetition": "{rep}"}))


def record_path(wildcards):
    """The record path of a run_measurement job."""
    return os.path.join("results", raw_path({"system": wildcards.system, "experiment": wildcards.experiment,
                                             "config_id": wildcards.config_id, "repetition": wildcards.rep}))


def get_measurement(wildcards):
    """The measurement a record path stands for."""
    return MEASUREMENTS[record_path(wildcards)]


@per_job
def get_batch_group(wildcards):
    """The job group (one Slurm job) a measurement runs in, or None for a job of its own
    (run_measurement has this function only when the campaign batches)."""
    join_batch_members()
    return BATCH_GROUPS.get(record_path(wildcards))


def join_batch_members():
    """Have Snakemake join every member of a batch into one group job: independent jobs
    of one group name form one group job only as far as --group-components allows. Set
    here, while the DAG is built (Snakemake only calls this for a cluster run or a dry
    run), because the group settings it runs with replace those the Snakefile was read
    with."""
    settings = workflow.group_settings
    first = next(iter(BATCH_GROUPS.values()), None)
    if first is not None and settings.group_components.get(first) != MEASUREMENTS_PER_JOB:
        settings.group_components = {**settings.group_components,
                                     **{name: MEASUREMENTS_PER_JOB for name in set(BATCH_GROUPS.values())}}


def get_record_paths(wildcards=None):
    """The records collected: every record of the campaign, or, when regenerating, those
    on disk (no rule makes records then, so no benchmark is ever scheduled). With every
    record on disk the two lists are the same, so a run after `paper` plans nothing new."""
    return [p for p in sorted(MEASUREMENTS) if Path(p).exists()] if REGENERATE_ONLY else sorted(MEASUREMENTS)


def get_unplanned_records(wildcards=None):
    """The record files under results/raw the campaign does not plan, each with its reason
    (another campaign's, or left from an edited one): listed and excluded by collection,
    never moved. A change to them collects again."""
    return unplanned("results/raw", MEASUREMENTS, CAMPAIGN.name)


@per_job
def get_measurement_inputs(wildcards):
    """The named inputs of a run_measurement job: its image, best listing, data and
    same-node anchor (one input function, not four: each costs Snakemake a signature
    inspection per job), those it has."""
    return {k: list(v) if isinstance(v, list) else v for k, v in inputs_of(record_path(wildcards)) if v}


@lru_cache(maxsize=None)
def inputs_of(path):
    m = MEASUREMENTS[path]
    return (("image", image_input(m)), ("best", best_input(m)), ("data", data_input(m)),
            ("anchor", anchor_input(m)))


def best_input(m):
    """For a `best` node-scaling measurement, the layouts rule choose_best_layouts chose
    from the hybrid sweep's records (one file per system and experiment, so the DAG has one
    edge per record, not one per record and best measurement)."""
    return [best_layouts(m)] if m.get("best_of") else []


def best_layouts(measurement):
    """Where rule choose_best_layouts writes the layout of a `best` measurement."""
    return f"results/best/{measurement['system']}/{measurement['experiment']}.json"


# layouts file -> the records of every sweep its experiment's `best` names, on its system,
# and the `best` measurements it resolves
BEST_SOURCES, BEST_MEASUREMENTS = {}, {}
for _path, _m in MEASUREMENTS.items():
    for _source in best_sources(_m.get("best_of")):
        BEST_SOURCES.setdefault(best_layouts(_m), set()).update(
            SWEEP_RECORDS.get((_m["system"], _source), ()))
    if _m.get("best_of"):
        BEST_MEASUREMENTS.setdefault(best_layouts(_m), []).append(_m)


def get_sweep_records(wildcards):
    """The records rule choose_best_layouts chooses from."""
    return sorted(BEST_SOURCES[f"results/best/{wildcards.system}/{wildcards.experiment}.json"])


def data_input(m):
    """The generated TFRecord set, for real-data runs of a model that reads the system's
    data_dir when that is the workflow's own TFRecord set."""
    data_dir = SYSTEMS[m["system"]].get("data_dir", "")
    reads_data_dir = m["kind"] == "train" and model_spec(m["model"]).dataset == "imagenet"
    if m.get("data") == "real" and reads_data_dir and data_dir == GENERATED_TFRECORDS:
        return [data_dir]
    return []


@per_job
def get_spec(wildcards):
    """The digest of the supervisor's spec (the name of its file in SPEC_DIR): a changed
    spec reruns the measurement."""
    return digest(spec_of(record_path(wildcards)))


@lru_cache(maxsize=None)
def spec_of(path):
    """The text of a measurement's spec: the measurement, the settings of its system that
    affect it (``x-no-rerun`` of the system schema left out: editing a system's
    description reruns nothing), and where a `best` one finds its layout (chosen by the
    statistic the tables report)."""
    m = MEASUREMENTS[path]
    spec = {"measurement": m, "system": run_settings(SYSTEMS[m["system"]])}
    if m.get("best_of"):
        spec["best_layouts"] = best_layouts(m)
        spec["statistic"] = config.get("statistic", "mean")
    return spec_text(spec)


# The supervisor reads its spec from SPEC_DIR/<digest>.json, a file nobody rewrites
# (archbench/execute/specfiles.py), written once this run holds Snakemake's lock and before any
# job starts (onstart, in the Snakefile): a dry run or a run the lock refuses writes none.
SPEC_DIR = spec_dir(CAMPAIGN.name)


def name_lock_holder():
    """onstart: name this run beside Snakemake's lock files (its host, pid, since when); a
    run without the lock (``nolock`` set by a profile) stops here, before any job."""
    if not workflow.execution_settings.lock:
        sys.exit(lock_refusal(nolock=True))
    name_holder()


def write_planned_specs():
    """Write the spec file of every measurement (those present are left as they are)."""
    if not REGENERATE_ONLY:
        write_specs((spec_of(p) for p in MEASUREMENTS), SPEC_DIR)


@per_job
def get_threads(wildcards):
    """Cores a measurement occupies on one node."""
    m = get_measurement(wildcards)
    per_process = max(m.get("intra_threads") or 0, 1)
    return m.get("processes_per_node", 1) * per_process


def get_resources(wildcards, input=None):
    """Portable resources of a measurement (the Slurm executor maps them to sbatch); with
    ``input``, pinned to the nodes its repetition-0 record (input.anchor) names."""
    path = record_path(wildcards)
    if input is not None and input.get("anchor"):
        with open(input.anchor) as f:  # missing in a dry run: Snakemake defers the value
            pinned = pinned_nodes(json.load(f))
        m = MEASUREMENTS[path]
        return archbench_plan.job_resources(m, SYSTEMS[m["system"]], pinned)
    return resources_of(path)


@lru_cache(maxsize=None)
def resources_of(path):
    m = MEASUREMENTS[path]
    return archbench_plan.job_resources(m, SYSTEMS[m["system"]])


def measurement_resources():
    """run_measurement's resources: every key archbench.plan.jobs.job_resources gives, as a
    constant when all the campaign's measurements have the same value, else as a function
    of the job (Snakemake calls each function of each job: constants spare a 10,000-job
    dry run most of those calls). slurm_extra is pinned to repetition 0's nodes, read
    from the anchor input, when the campaign keeps repetitions on the same nodes."""
    jobs = [{**archbench_plan.RESOURCE_DEFAULTS, **resources_of(path)} for path in MEASUREMENTS]
    pinned = any(anchor_input(m) for m in MEASUREMENTS.values())
    resources = {}
    for key in sorted(set().union(*jobs)):
        first = jobs[0].get(key)
        if key == "slurm_extra" and pinned:
            resources[key] = per_job(lambda wildcards, input: get_resources(wildcards, input).get("slurm_extra", ""))
        elif any(job.get(key) != first for job in jobs):
            resources[key] = job_resource(key)
        elif first is not None:
            resources[key] = first
    return resources


def job_resource(key):
    """The function giving resource ``key`` of a run_measurement job (None: not set)."""
    default = archbench_plan.RESOURCE_DEFAULTS.get(key)
    return per_job(lambda wildcards: resources_of(record_path(wildcards)).get(key, default))


def anchor_input(m):
    """Repetition 0's record, for a later repetition on a system keeping a configuration's
    repetitions on the same nodes (``same_nodes``); else none."""
    if m["repetition"] == 0 or not SYSTEMS[m["system"]].get("same_nodes"):
        return []
    return f"results/{raw_path({**m, 'repetition': 0})}"


def get_final_outputs():
    """Everything `snakemake` (its target "all") builds. A record missing while the table
    collected from it exists (deleted or quarantined) is listed too, so it is rerun:
    Snakemake leaves a missing intermediate file alone while the files made from it are up
    to date. Only those: every record listed would cost a plan an edge per measurement."""
    collected = os.path.exists("results/tables/measurements.csv")
    missing = [p for p in get_record_paths() if not os.path.exists(p)] if collected else []
    return (missing + ["results/tables/measurements.csv", f"results/plan/{CAMPAIGN.name}.md"]
            + analysis_targets())


# ---------------------------------------------------------------- images

def built_images():
    """image file -> the first system that runs it, for images built from containers/*.def."""
    return {image_file(s): s for s in reversed(list(SYSTEMS.values()))
            if image_file(s) and not s.get("image_uri")}


def pulled_images():
    """image file -> the first system that pulls it from its image_uri (a URI, not a path)."""
    return {image_file(s): s for s in reversed(list(SYSTEMS.values()))
            if s["container_runtime"] != "none" and uri_scheme(s.get("image_uri") or "")}


def image_input(m):
    """The image a measurement runs in ([] for runtime none): built, pulled or prebuilt."""
    return image_file(SYSTEMS[m["system"]]) or []


def get_build_command(wildcards, output):
    system = built_images()[output.image]
    return shell_join(build_command(system["container_runtime"],
                                    f"containers/{wildcards.image}.def", output.image))


def get_pull_command(wildcards, output):
    system = pulled_images()[output.image]
    return " && ".join(shell_join(argv) for argv in
                       pull_commands(system["container_runtime"], system["image_uri"], output.image))


def get_image_partition(image):
    """The partition of the system an image is built or pulled for (its architecture)."""
    system = {**built_images(), **pulled_images()}.get(image, {})
    return system.get("partition", "")


# ---------------------------------------------------------------- tables, figures, paper

# Collecting, merging, tables and figures run as `run:` jobs, inside Snakemake's own
# process (which has pandas and matplotlib loaded already): a Python process per table
# or figure cost more than building it. Snakemake runs such jobs in threads; matplotlib's
# settings are process-wide, so one artifact step runs at a time.
ARTIFACT_STEP = threading.Lock()


def write_log(path, *lines):
    """Write a job's log (its lines, one each)."""
    atomic_write_text(path, "".join(f"{line}\n" for line in lines))


def collect_job(input, output, log):
    """collect_measurements: the records that count into the tidy table (CSV, Parquet);
    every other record file under results/raw (invalid, not what its plan says, not
    planned by the campaign) named with its reason in one list (output.invalid), which
    the report shows (output.html). The log
    ends with the line a run prints at its end (report_collection)."""
    with ARTIFACT_STEP:
        records = list(input.records)
        frame, errors = collect_records(records, planned_records(records))
        errors += get_unplanned_records()
        write_collected(frame, output.csv, output.parquet)
        atomic_write_text(output.invalid, "".join(f"{line}\n" for line in errors))
        atomic_write_text(output.html, excluded_html(errors))
    write_log(log[0], *(f"excluded record: {line}" for line in errors),
              outcome_line(len(frame), len(errors), output.invalid))


COLLECT_LOG = "logs/collect_measurements/collect.log"


def report_collection():
    """At the end of a run that builds the tables (`run`, `paper`): print the collection's
    last line, how many records were counted and excluded and where they are listed."""
    targets = set(workflow.dag_settings.targets or ())
    if targets and not targets & {"all", "paper"}:
        return
    try:
        line = Path(COLLECT_LOG).read_text().splitlines()[-1]
    except (OSError, IndexError):
        return
    if line.startswith("archbench: "):
        print(line, flush=True)


def merge_job(input, output, params, log):
    """merge_measurements: collected measurements + imported published results."""
    with ARTIFACT_STEP:
        merged = artifacts.merge_measurements(input.measurements, list(input.imports),
                                              output=output.merged,
                                              mapping_dirs=params.mapping_dirs)
    write_log(log[0], f"{len(merged)} rows ({len(input.imports)} imported files)")


def table_job(input, output, params, log):
    """make_<table>_table: one derived table as CSV, Markdown and LaTeX."""
    with ARTIFACT_STEP:
        table = artifacts.make_table_files(
            params.name, input.measurements, outputs={k: output[k] for k in ("csv", "md", "tex")},
            peak=params.peak, statistic=params.statistic, systems=params.systems,
            published=list(input.published), mapping_dirs=params.mapping_dirs,
            framework_bases=params.framework_bases)
    write_log(log[0], f"{params.name}: {len(table)} rows")


def figure_job(input, output, params, log):
    """plot_<figure>: one figure as PNG, PDF and SVG."""
    with ARTIFACT_STEP:
        artifacts.make_figure_files(params.name, input.measurements, list(output),
                                    statistic=params.statistic,
                                    framework_bases=params.framework_bases)
    write_log(log[0], f"{params.name} written")


def choose_layouts_job(input, output, params, log):
    """choose_best_layouts: for each `best` measurement of a system's experiment, the
    measurement its best layout makes of it, or why there is none (JSON by record path)."""
    with ARTIFACT_STEP:
        frame, _ = collect_records(list(input.records))
        chosen = choose_layouts(BEST_MEASUREMENTS[output.layouts], frame, statistic=params.statistic)
    atomic_write_text(output.layouts, json.dumps(chosen, indent=1, sort_keys=True) + "\n")
    write_log(log[0], f"{len(input.records)} sweep records, {len(chosen)} layouts chosen")

def get_imports():
    """Import CSVs listed in the campaign (`imports:`), claims files apart."""
    return [p for p in config.get("imports", []) if not is_claims_file(p)]


def get_import_mappings():
    """The mapping sidecars those imports use: editing one rebuilds the merged table."""
    return mapping_files(get_imports(), IMPORT_MAPPING_DIRS)


def get_published(table):
    """Every file listed under `imports:` (import and claims files) for a table that
    compares with published values, else none."""
    return list(config.get("imports", [])) if TABLES[table].uses_published else []


def get_published_mappings(table):
    """The mapping sidecars of those files (editing one rebuilds the table)."""
    return mapping_files(get_imports(), IMPORT_MAPPING_DIRS) if TABLES[table].uses_published else []


def analysis_targets():
    """Every table and figure the workflow produces (the comparison's too, with a baseline)."""
    tables = [f"results/tables/{t}.{ext}" for t in TABLE_NAMES for ext in ("csv", "md", "tex")]
    return tables + figure_targets() + compare_targets()


def figure_targets():
    return [f"results/figures/{f}.{ext}" for f in FIGURE_NAMES for ext in ("png", "pdf", "svg")]


def compare_targets():
    """What rule compare_results writes, when the campaign names a baseline."""
    return [f"results/compare/{name}" for name in COMPARE_FILES] if BASELINE else []


def get_baseline_records():
    """The baseline's record files (or its collected table): a changed one reruns the comparison."""
    return [str(p) for p in record_paths(BASELINE.results)] if BASELINE else []


def compare_caption():
    """The comparison's report caption: how its numbers are made."""
    if not BASELINE:
        return ""
    return caption(config.get("statistic", "mean"), BASELINE.threshold, BASELINE.across)


def compare_job(input, output, params, log):
    """compare_results: this campaign's measurements against the baseline's records."""
    if params.baseline is None:
        raise WorkflowError("archbench: compare_results needs a baseline (compare_with: in the campaign)")
    with ARTIFACT_STEP:
        comparison, sides = compare_sources(params.baseline, input.measurements,
                                            across=params.across, statistic=params.statistic,
                                            threshold=params.threshold)
        write_comparison(comparison, Path(output.report).parent,
                         f"{params.baseline} -> campaign {CAMPAIGN.name}")
    counts = ", ".join(f"{n} {verdict}" for verdict, n in comparison.counts().items())
    write_log(log[0], *(f"baseline: excluded invalid record: {line}" for line in sides["base"][1]),
              f"{len(comparison.table)} configurations: {counts}")


def get_paper_inputs(wildcards):
    """Every table and figure, when collection is restricted to the records on disk (the
    check at the top of this file stops `snakemake paper` without it; this one, a
    program calling Snakemake's API)."""
    if not REGENERATE_ONLY:
        raise WorkflowError("archbench: `paper` rebuilds from the records on disk only: "
                            "run it with --config regenerate_only=True (or `archbench paper`)")
    return analysis_targets()
