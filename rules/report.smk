# The HTML report: `snakemake --report results/report.html` (or `make report`).
# Figures and tables register themselves with report(...) in their rules; this file
# sets the report's front page.


report: "../report/workflow.rst"


# `snakemake paper --config regenerate_only=True`: every table and figure rebuilt from
# results/raw and imports; runs no benchmark (collection reads the records on disk).
rule paper:
    localrule: True
    input:
        get_paper_inputs,
    default_target: False
