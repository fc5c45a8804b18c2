# Collect every record into one tidy table, and plan the campaign before it runs.
# Both are quick and run on the submitting host, never as cluster jobs.


localrules:
    collect_measurements,
    plan_campaign,
    plan,


# A dry run (-n) prints the plan too (on stderr, before Snakemake lists the jobs).
if DRY_RUN and workflow.is_main_process and not REGENERATE_ONLY:
    print(archbench_plan.campaign_plan(
        CAMPAIGN.name, CAMPAIGN.measurements, SYSTEMS, measurements_per_job=MEASUREMENTS_PER_JOB,
        batch_max_minutes=BATCH_MAX_MINUTES)[1], file=sys.stderr)


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
        COLLECT_LOG,
    params:
        unplanned=get_unplanned_records,
    run:
        collect_job(input, output, log)


rule plan_campaign:
    output:
        markdown=f"results/plan/{CAMPAIGN.name}.md",
        csv=f"results/plan/{CAMPAIGN.name}.csv",
    log:
        f"logs/plan_campaign/{CAMPAIGN.name}.log",
    params:
        measurements_per_job=MEASUREMENTS_PER_JOB,  # a changed count rewrites the plan
        batch_max_minutes=BATCH_MAX_MINUTES,
    run:
        archbench_plan.write_plan(CAMPAIGN.name, CAMPAIGN.measurements, SYSTEMS,
                                  csv=output.csv, markdown=output.markdown,
                                  measurements_per_job=params.measurements_per_job,
                                  batch_max_minutes=params.batch_max_minutes)


# `snakemake plan`: write the plan (results/plan/<campaign>.{md,csv}); runs no benchmark.
rule plan:
    input:
        rules.plan_campaign.output,
    default_target: False
