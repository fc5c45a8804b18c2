"""The workflow's side of the package: what rules/*.smk call. :mod:`.startup` checks an
invocation and its campaign while the Snakefile is parsed, :mod:`.dag` derives what each
job needs from the campaign, :mod:`.targets` names the tables, figures and comparison the
workflow builds and what their rules read, :mod:`.jobs` holds the bodies of the jobs that
run inside Snakemake's process and of its ``onstart``/``onsuccess`` hooks. What leans on
Snakemake's internals sits in :mod:`archbench.core.snakemake_api`, pinned to one Snakemake
version."""
