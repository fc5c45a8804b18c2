# Publication figures (PNG, PDF, SVG), one rule per figure type, named plot_<figure>,
# run inside Snakemake's own process (see ARTIFACT_STEP in common.smk).


for _figure in FIGURE_NAMES:

    rule:
        name:
            f"plot_{_figure}"
        localrule: True
        input:
            measurements="results/tables/measurements_all.csv",
        output:
            png=report(f"results/figures/{_figure}.png", category="Figures",
                       caption="../report/captions/figure.rst"),
            pdf=f"results/figures/{_figure}.pdf",
            svg=f"results/figures/{_figure}.svg",
        log:
            f"logs/plot_{_figure}/{_figure}.log",
        params:
            name=_figure,
            caption=FIGURES[_figure].caption,
            statistic=config.get("statistic", "mean"),
            # each experiment's base framework, for the framework comparison
            framework_bases=artifacts.framework_bases(config) if FIGURES[_figure].uses_bases else {},
        run:
            figure_job(input, output, params, log)
