"""Adapter: draw one figure and save it as PNG, PDF and SVG."""
import logging

import matplotlib

matplotlib.use("Agg")
from archbench.artifacts import make_figure_files  # noqa: E402

snakemake = globals()["snakemake"]
logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(message)s")
make_figure_files(snakemake.params.name, snakemake.input.measurements, list(snakemake.output),
                  statistic=snakemake.params.statistic)
logging.info("%s written", snakemake.params.name)
