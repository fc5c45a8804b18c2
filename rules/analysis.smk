# Derived tables (CSV, Markdown, LaTeX) from the collected measurements plus imported
# published results. One rule per table, named make_<table>_table. Like every artifact
# step they run inside Snakemake's own process (see archbench/workflow/rule_bodies.py).


rule merge_measurements:
    localrule: True
    input:
        measurements="results/tables/measurements.csv",
        imports=ARTIFACTS.imports(),
        mappings=ARTIFACTS.import_mappings(),
    output:
        merged="results/tables/measurements_all.csv",
    log:
        "logs/merge_measurements/merge.log",
    params:
        mapping_dirs=IMPORT_MAPPING_DIRS,
    run:
        rule_bodies.merge(input, output, params=params, log=log)


for _table in TABLE_NAMES:

    rule:
        name:
            f"make_{_table}_table"
        localrule: True
        input:
            measurements="results/tables/measurements_all.csv",
            # the published values vs_published compares with (none for other tables)
            published=ARTIFACTS.published(_table),
            mappings=ARTIFACTS.published_mappings(_table),
        output:
            csv=report(f"results/tables/{_table}.csv", category="Tables",
                       caption="../report/captions/table.rst"),
            md=f"results/tables/{_table}.md",
            tex=f"results/tables/{_table}.tex",
        log:
            f"logs/make_{_table}_table/{_table}.log",
        params:
            name=_table,
            caption=ARTIFACTS.table(_table).caption,
            peak=config.get("peak", {}),
            statistic=config.get("statistic", "mean"),
            # each experiment's base framework, for the framework comparison
            framework_bases=ARTIFACTS.framework_bases if ARTIFACTS.table(_table).uses_bases else {},
            # the campaign's resolved systems, for the tables that describe them (their free
            # text escaped where the report shows the parameters)
            systems=report_safe(SYSTEMS) if ARTIFACTS.table(_table).uses_systems else {},
            mapping_dirs=IMPORT_MAPPING_DIRS,
        run:
            rule_bodies.table(input, output, params=params, log=log)
