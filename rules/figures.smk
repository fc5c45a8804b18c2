# Publication figures (PNG, PDF, SVG), one rule per figure type, named plot_<figure>,
# run inside Snakemake's own process (see archbench/workflow/rule_bodies.py).


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
            caption=ARTIFACTS.figure(_figure).caption,
            statistic=config.get("statistic", "mean"),
            # each experiment's base framework, for the framework comparison
            framework_bases=ARTIFACTS.framework_bases if ARTIFACTS.figure(_figure).uses_bases else {},
        run:
            rule_bodies.figure(input, output, params=params, log=log)
