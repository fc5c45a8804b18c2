"""Adapter: collected measurements + imported published results -> one tidy CSV."""
import logging

from archbench.artifacts import merge_measurements

snakemake = globals()["snakemake"]
logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(message)s")
merged = merge_measurements(snakemake.input.measurements, list(snakemake.input.imports),
                            output=snakemake.output.merged, mapping_dirs=snakemake.params.mapping_dirs)
logging.info("%d rows (%d imported files)", len(merged), len(snakemake.input.imports))
