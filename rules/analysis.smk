# Derived tables (CSV, Markdown, LaTeX) from the collected measurements plus imported
# published results. One rule per table, named make_<table>_table.
from archbench.tables import TABLES

TABLE_NAMES = sorted(TABLES)


def get_imports():
    """Import CSVs listed in the campaign (`imports:`), checked to exist."""
    return config.get("imports", [])


rule merge_measurements:
    localrule: True
    input:
        measurements="results/tables/measurements.csv",
        imports=get_imports(),
    output:
        merged="results/tables/measurements_all.csv",
    log:
        "logs/merge_measurements/merge.log",
    params:
        mapping_dirs=["config/imports"],
    script:
        "../scripts/merge_measurements.py"


for _table in TABLE_NAMES:

    rule:
        name:
            f"make_{_table}_table"
        localrule: True
        input:
            measurements="results/tables/measurements_all.csv",
        output:
            csv=report(f"results/tables/{_table}.csv", category="Tables",
                       caption="../report/captions/table.rst"),
            md=f"results/tables/{_table}.md",
            tex=f"results/tables/{_table}.tex",
        log:
            f"logs/make_{_table}_table/{_table}.log",
        params:
            name=_table,
            peak=config.get("peak", {}),
        script:
            "../scripts/make_table.py"


def analysis_targets():
    """Every table and figure the workflow produces."""
    tables = [f"results/tables/{t}.{ext}" for t in TABLE_NAMES for ext in ("csv", "md", "tex")]
    return tables + figure_targets()
