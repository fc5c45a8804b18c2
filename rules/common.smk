# Load, validate and derive: the campaign's measurements and the input functions rules use.
# The work is the package's: checks while parsing in archbench/workflow/startup.py, what
# each job needs in archbench/workflow/dag.py, job bodies in archbench/workflow/rule_bodies.py, and
# every use of Snakemake's internals in archbench/core/snakemake_api.py.
from archbench.core.escape import report_safe
from archbench.core.snakemake_api import join_groups, per_job
from archbench.workflow import rule_bodies, startup
from archbench.workflow.dag import GENERATED_TFRECORDS, RECORD_PATTERN, CampaignDag, record_path
from archbench.workflow.targets import Artifacts, final_outputs

# mapping sidecars sit beside their CSV (data/published/<study>/); extra folders go here
IMPORT_MAPPING_DIRS = []

# --config regenerate_only=True (`archbench paper`, `make paper`) rebuilds tables, figures
# and the report from the records already on disk and runs no benchmark.
REGENERATE_ONLY = bool(config.get("regenerate_only", False))
startup.refuse_invocation(workflow, regenerate_only=REGENERATE_ONLY)
CAMPAIGN = startup.checked_campaign(workflow, config, mapping_dirs=IMPORT_MAPPING_DIRS)
startup.prepare_storage(workflow)

# (not DAG: Snakemake runs the Snakefile in its own module, where that name is its class)
CAMPAIGN_DAG = CampaignDag(CAMPAIGN, config)
SYSTEMS = CAMPAIGN.systems
SPEC_DIR = CAMPAIGN_DAG.spec_dir
# Batching (campaign key measurements_per_job; archbench/plan/batching.py): each chunk of measurements is one job group,
# i.e. one Slurm job.
MEASUREMENTS_PER_JOB, BATCH_GROUPS = CAMPAIGN_DAG.measurements_per_job, CAMPAIGN_DAG.batch_groups
# Tables, figures and the comparison with the baseline (`compare_with:`, checked above).
ARTIFACTS = Artifacts(config, mapping_dirs=IMPORT_MAPPING_DIRS)
TABLE_NAMES, FIGURE_NAMES, BASELINE = ARTIFACTS.table_names, ARTIFACTS.figure_names, ARTIFACTS.baseline


resource_scopes:
    measurement_slots="local",


startup.use_batches(workflow, CAMPAIGN_DAG)
startup.quarantine(workflow, CAMPAIGN_DAG, regenerate_only=REGENERATE_ONLY)


wildcard_constraints:
    system=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    experiment=r"[A-Za-z0-9][A-Za-z0-9_-]*",
    config_id=r"[^/]+",
    rep=r"\d+",
    study=r"[^/]+",
    round=r"\d+",


# ---------------------------------------------------------------- run_measurement
# per_job: Snakemake is told each function's parameters once, not at every call.


@per_job
def get_batch_group(wildcards):
    """The job group (one Slurm job) a measurement runs in (used only when the campaign
    batches); every member of a batch joins one group job, set while the DAG is built."""
    join_groups(workflow, CAMPAIGN_DAG.group_names, MEASUREMENTS_PER_JOB)
    return BATCH_GROUPS.get(record_path(wildcards))


@per_job
def get_measurement_inputs(wildcards):
    """The named inputs of a run_measurement job: image, best, data, anchor (those it has)."""
    return CAMPAIGN_DAG.inputs(record_path(wildcards))


@per_job
def get_spec(wildcards):
    """The digest of the supervisor's spec: a changed spec reruns the measurement."""
    return CAMPAIGN_DAG.spec_digest(record_path(wildcards))


@per_job
def get_threads(wildcards):
    """Cores a measurement occupies on one node."""
    return CAMPAIGN_DAG.threads(record_path(wildcards))


def measurement_resources():
    """run_measurement's resources (constants where every job has the same value)."""
    return CAMPAIGN_DAG.measurement_resources(record_path)


def get_tune_round_inputs(wildcards):
    """The records and the file of the round before a tuner's round (none for round 1)."""
    return CAMPAIGN_DAG.round_inputs(
        f"results/tune/{wildcards.system}/{wildcards.experiment}/{wildcards.study}/round{wildcards.round}.json")


def get_tune_best_inputs(wildcards):
    """The last round's file and records of a tuner's study."""
    return CAMPAIGN_DAG.best_inputs(
        f"results/tune/{wildcards.system}/{wildcards.experiment}/{wildcards.study}/best.json")


def get_sweep_records(wildcards):
    """The records rule choose_best_layouts chooses from."""
    return CAMPAIGN_DAG.sweep_records(wildcards.system, wildcards.experiment)


# ---------------------------------------------------------------- images


def get_build_command(wildcards, output):
    return CAMPAIGN_DAG.build_command(wildcards.image, output.image)


def get_pull_command(wildcards, output):
    return CAMPAIGN_DAG.pull_command(output.image)


def get_image_partition(image):
    """The partition of the system an image is built or pulled for (its architecture)."""
    return CAMPAIGN_DAG.image_partition(image)


# ---------------------------------------------------------------- collect, tables, figures


def get_record_paths(wildcards=None):
    """The records collected: every record of the campaign, or, when regenerating, those
    on disk (no rule makes records then). With every record on disk the two lists are the
    same, so a run after `paper` plans nothing new."""
    return CAMPAIGN_DAG.record_paths(on_disk=REGENERATE_ONLY)


def get_unplanned_records(wildcards=None):
    """The record files under results/raw the campaign does not plan (a change to them
    collects again); their names are another site's text, escaped in the report."""
    return report_safe(CAMPAIGN_DAG.unplanned_records())


def get_final_outputs():
    """Everything target "all" builds (records missing under a collected table too)."""
    studies = [] if REGENERATE_ONLY else CAMPAIGN_DAG.tune_best_files()  # what each tuner found
    return final_outputs(get_record_paths(), CAMPAIGN.name, [*ARTIFACTS.targets(), *studies])


def get_paper_inputs(wildcards):
    """Every table and figure, when collection is restricted to the records on disk (a
    program calling Snakemake's API gets here without the check at the top)."""
    if not REGENERATE_ONLY:
        raise WorkflowError("archbench: `paper` rebuilds from the records on disk only: "
                            "run it with --config regenerate_only=True (or `archbench paper`)")
    return ARTIFACTS.targets()
