# Before and after (docs/compare.md): when the campaign names a baseline (`compare_with:`),
# this campaign's collected measurements against the baseline's records, configuration by
# configuration, written to results/compare/. Runs inside Snakemake's own process (see
# ARTIFACT_STEP in archbench/workflow/rule_bodies.py). A baseline without records, or a table that
# is not a measurements table, stops the run here in one line, before any job; a comparison
# that cannot be made (no configuration in common) fails this rule with one line, never a
# traceback, and the campaign's records stay.

startup.refuse_baseline(workflow, BASELINE)


rule compare_results:
    localrule: True
    input:
        measurements="results/tables/measurements.csv",
        baseline=ARTIFACTS.baseline_records(),
    output:
        comparison_csv=report("results/compare/comparison.csv", category="Comparison",
                              caption="../report/captions/compare.rst"),
        comparison_md="results/compare/comparison.md",
        comparison_tex="results/compare/comparison.tex",
        changes_csv="results/compare/changes.csv",
        changes_md="results/compare/changes.md",
        changes_tex="results/compare/changes.tex",
        png=report("results/compare/comparison.png", category="Comparison",
                   caption="../report/captions/compare.rst"),
        pdf="results/compare/comparison.pdf",
        svg="results/compare/comparison.svg",
        report="results/compare/report.md",
    log:
        "logs/compare_results/compare.log",
    params:
        baseline=BASELINE.results if BASELINE else None,
        threshold=BASELINE.threshold if BASELINE else None,
        across=list(BASELINE.across) if BASELINE else [],
        statistic=config.get("statistic", "mean"),
        caption=ARTIFACTS.compare_caption(),
    run:
        rule_bodies.compare(CAMPAIGN_DAG, input, output, params=params, log=log)
