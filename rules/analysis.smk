# Derived tables (CSV, Markdown, LaTeX) from the collected measurements plus imported
# published results. One rule per table, named make_<table>_table.
from archbench.importer import mapping_files
from archbench.tables import TABLES

TABLE_NAMES = sorted(TABLES)
IMPORT_MAPPING_DIRS = ["config/imports"]


def get_imports():
    """Import CSVs listed in the campaign (`imports:`)."""
    return config.get("imports", [])


def get_import_mappings():
    """The mapping sidecars those imports use: editing one rebuilds the merged table."""
    return mapping_files(get_imports(), IMPORT_MAPPING_DIRS)


rule merge_measurements:
    localrule: True
    input:
        measurements="results/tables/measurements.csv",
        imports=get_imports(),
        mappings=get_import_mappings(),
    output:
        merged="results/tables/measurements_all.csv",
    log:
        "logs/merge_measurements/merge.log",
    params:
        mapping_dirs=IMPORT_MAPPING_DIRS,
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
            caption=TABLES[_table].caption,
            peak=config.get("peak", {}),
        script:
            "../scripts/make_table.py"


def analysis_targets():
    """Every table and figure the workflow produces."""
    tables = [f"results/tables/{t}.{ext}" for t in TABLE_NAMES for ext in ("csv", "md", "tex")]
    return tables + figure_targets()
