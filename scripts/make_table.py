"""Adapter: build one derived table and write it as CSV, Markdown and LaTeX."""
import logging

from archbench.artifacts import make_table_files

snakemake = globals()["snakemake"]
logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(message)s")
table = make_table_files(snakemake.params.name, snakemake.input.measurements,
                         outputs={k: snakemake.output[k] for k in ("csv", "md", "tex")},
                         peak=snakemake.params.peak,
                         statistic=snakemake.params.statistic,
                         systems=snakemake.params.systems,
                         published=list(snakemake.input.published),
                         mapping_dirs=snakemake.params.mapping_dirs)
logging.info("%s: %d rows", snakemake.params.name, len(table))
