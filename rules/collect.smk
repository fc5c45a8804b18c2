# Collect every record into one tidy table, and plan the campaign before it runs.
# Both are quick and run on the submitting host, never as cluster jobs.


localrules:
    collect_measurements,
    plan_campaign,
    plan,


# A dry run (-n) prints the plan too (on stderr, before Snakemake lists the jobs).
startup.print_plan(workflow, CAMPAIGN_DAG, regenerate_only=REGENERATE_ONLY)


# Every record file under results/raw that does not count is listed in invalid_records.txt
# with its reason (records the campaign does not plan included: a change to those collects
# again), and shown in the report.
rule collect_measurements:
    input:
        records=get_record_paths,
    output:
        csv="results/tables/measurements.csv",
        parquet="results/tables/measurements.parquet",
        invalid="results/tables/invalid_records.txt",
        html=report("results/tables/invalid_records.html", category="Excluded records",
                    caption="../report/captions/excluded.rst"),
    log:
        rule_bodies.COLLECT_LOG,
    params:
        unplanned=get_unplanned_records,
    run:
        rule_bodies.collect(CAMPAIGN_DAG, input, output, log=log)


rule plan_campaign:
    output:
        markdown=f"results/plan/{CAMPAIGN.name}.md",
        csv=f"results/plan/{CAMPAIGN.name}.csv",
    log:
        f"logs/plan_campaign/{CAMPAIGN.name}.log",
    params:
        measurements_per_job=CAMPAIGN_DAG.measurements_per_job,  # a changed count rewrites the plan
        batch_max_minutes=CAMPAIGN_DAG.batch_max_minutes,
    run:
        rule_bodies.write_plan(CAMPAIGN_DAG, output, params)


# `snakemake plan`: write the plan (results/plan/<campaign>.{md,csv}); runs no benchmark.
rule plan:
    input:
        rules.plan_campaign.output,
    default_target: False
