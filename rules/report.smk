# The HTML report: `snakemake --report results/report.html` (or `make report`).
# Figures and tables register themselves with report(...) in their rules; this file
# sets the report's front page.


report: "../report/workflow.rst"


# `snakemake paper`: every table and figure rebuilt from results/raw and imports; runs no
# benchmark (common.smk restricts collection to the records already on disk).
rule paper:
    localrule: True
    input:
        analysis_targets(),
    default_target: False
