# Derived tables (CSV, Markdown, LaTeX) from the collected measurements plus imported
# published results. One rule per table, named make_<table>_table. Like every artifact
# step they run inside Snakemake's own process (see ARTIFACT_STEP in common.smk).


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
    run:
        merge_job(input, output, params, log)


for _table in TABLE_NAMES:

    rule:
        name:
            f"make_{_table}_table"
        localrule: True
        input:
            measurements="results/tables/measurements_all.csv",
            # the published values vs_published compares with (none for other tables)
            published=get_published(_table),
            mappings=get_published_mappings(_table),
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
            statistic=config.get("statistic", "mean"),
            # each experiment's base framework, for the framework comparison
            framework_bases=artifacts.framework_bases(config) if TABLES[_table].uses_bases else {},
            # the campaign's resolved systems, for the tables that describe them
            systems=SYSTEMS if TABLES[_table].uses_systems else {},
            mapping_dirs=IMPORT_MAPPING_DIRS,
        run:
            table_job(input, output, params, log)
