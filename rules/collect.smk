# Collect every record into one tidy table, and plan the campaign before it runs.
# Both are quick and run on the submitting host, never as cluster jobs.


localrules:
    collect_measurements,
    plan_campaign,


rule collect_measurements:
    input:
        records=get_record_paths,
    output:
        csv="results/tables/measurements.csv",
        parquet="results/tables/measurements.parquet",
        invalid="results/tables/invalid_records.txt",
    log:
        "logs/collect_measurements/collect.log",
    params:
        existing=get_existing_records,
    script:
        "../scripts/collect_measurements.py"


rule plan_campaign:
    output:
        markdown=f"results/plan/{CAMPAIGN.name}.md",
        csv=f"results/plan/{CAMPAIGN.name}.csv",
    log:
        f"logs/plan_campaign/{CAMPAIGN.name}.log",
    params:
        batch_size=BATCH_SIZE,  # a changed batch size rewrites the plan
        batch_max_minutes=BATCH_MAX_MINUTES,
    run:
        archbench_plan.write_plan(CAMPAIGN.name, CAMPAIGN.measurements, SYSTEMS,
                                  csv=output.csv, markdown=output.markdown,
                                  batch_size=params.batch_size,
                                  batch_max_minutes=params.batch_max_minutes)
