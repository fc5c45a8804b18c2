# archbench: benchmark TensorFlow training and HPC kernels across CPU architectures.
# Wiring only; logic lives in the archbench package, stages in rules/*.smk.
import gc

from snakemake.utils import min_version

from archbench.core.snakemake_api import configfiles_given

min_version("9.10")

# The embedded default campaign, unless a campaign is given with --configfile.
if not configfiles_given(workflow):

    configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/images.smk"
include: "rules/benchmarks.smk"
include: "rules/collect.smk"
include: "rules/analysis.smk"
include: "rules/figures.smk"
include: "rules/compare.smk"
include: "rules/report.smk"


# The campaign (every measurement, spec and resource) lives as long as Snakemake does:
# frozen, Python's garbage collector stops rescanning it at every collection while the
# DAG is built (a quarter of a 10,000-job dry run; scripts/bench_workflow.py).
gc.collect()
gc.freeze()


localrules:
    all,


# Once this run holds Snakemake's lock, before its first job.
onstart:
    rule_bodies.name_lock_holder(workflow)
    rule_bodies.write_planned_specs(CAMPAIGN_DAG, regenerate_only=REGENERATE_ONLY)


# The last word of a run or `paper`: records counted, excluded, and where they are listed.
onsuccess:
    rule_bodies.report_collection(workflow)


rule all:
    input:
        get_final_outputs(),
