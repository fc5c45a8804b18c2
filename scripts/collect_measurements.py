"""Adapter: collect the records given as input into the tidy measurements table."""
import logging

from archbench.collect import collect, write_table

snakemake = globals()["snakemake"]
logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(message)s")
frame, errors = collect(list(snakemake.input.records) or snakemake.params.existing)
write_table(frame, snakemake.output.csv, snakemake.output.parquet)
for line in errors:
    logging.warning("excluded invalid record: %s", line)
with open(snakemake.output.invalid, "w") as handle:
    handle.writelines(f"{line}\n" for line in errors)
logging.info("collected %d records, excluded %d invalid", len(frame), len(errors))
