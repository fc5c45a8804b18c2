# archbench: benchmark TensorFlow training and HPC kernels across CPU architectures.
# Wiring only; logic lives in the archbench package, stages in rules/*.smk.
from snakemake.utils import min_version

min_version("9.10")

# The embedded default campaign, unless a campaign is given with --configfile.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/images.smk"
include: "rules/benchmarks.smk"
include: "rules/collect.smk"
include: "rules/analysis.smk"
include: "rules/figures.smk"
include: "rules/report.smk"


localrules:
    all,


rule all:
    input:
        get_final_outputs(),
