"""What the workflow builds from the collected measurements (tables, figures, the comparison
with a baseline) and the files each of those rules reads beyond them (imports, their
mapping sidecars, the baseline's records), for a campaign ``config``."""

from __future__ import annotations

import os
from typing import Mapping, Sequence

from archbench.core.metrics import DEFAULT_STATISTIC
from archbench.results import artifacts
from archbench.results.claims import is_claims_file
from archbench.results.compare_cli import FILES as COMPARE_FILES
from archbench.results.comparison import caption
from archbench.results.figures import FIGURES
from archbench.results.imports import mapping_files
from archbench.results.record_sets import baseline, record_paths
from archbench.results.tables import TABLES

TABLE_FORMATS = ("csv", "md", "tex")
FIGURE_FORMATS = ("png", "pdf", "svg")


class Artifacts:
    """The tables, figures and comparison of campaign ``config``; ``mapping_dirs``: folders
    of import mapping sidecars beside those next to each CSV."""

    def __init__(self, config: Mapping, *, mapping_dirs: Sequence[str] = ()):
        self.config, self.mapping_dirs = config, mapping_dirs
        self.statistic = config.get("statistic", DEFAULT_STATISTIC)
        # from the registries (vs_published only when the campaign lists published values)
        self.table_names = artifacts.table_names(config)
        self.figure_names = artifacts.figure_names()
        # each experiment's base framework, for the framework comparison
        self.framework_bases = artifacts.framework_bases(config)
        # the baseline the campaign is compared with (`compare_with:`), or None
        self.baseline = baseline(config["compare_with"]) if "compare_with" in config else None

    def targets(self) -> list[str]:
        """Every table and figure the workflow produces (the comparison's too, with a baseline)."""
        tables = [f"results/tables/{t}.{ext}" for t in self.table_names for ext in TABLE_FORMATS]
        figures = [f"results/figures/{f}.{ext}" for f in self.figure_names for ext in FIGURE_FORMATS]
        compared = [f"results/compare/{name}" for name in COMPARE_FILES] if self.baseline else []
        return tables + figures + compared

    def imports(self) -> list[str]:
        """Import CSVs listed in the campaign (`imports:`), claims files apart."""
        return [p for p in self.config.get("imports", []) if not is_claims_file(p)]

    def import_mappings(self) -> list[str]:
        """The mapping sidecars those imports use: editing one rebuilds the merged table."""
        return mapping_files(self.imports(), self.mapping_dirs)

    def published(self, table: str) -> list[str]:
        """Every file under `imports:` (import and claims files) for a table that compares
        with published values, else none."""
        return list(self.config.get("imports", [])) if TABLES[table].uses_published else []

    def published_mappings(self, table: str) -> list[str]:
        """The mapping sidecars of those files (editing one rebuilds the table)."""
        return self.import_mappings() if TABLES[table].uses_published else []

    @staticmethod
    def table(name: str):
        """The registered table ``name`` (its caption, what it uses)."""
        return TABLES[name]

    @staticmethod
    def figure(name: str):
        """The registered figure ``name`` (its caption)."""
        return FIGURES[name]

    def baseline_records(self) -> list[str]:
        """The baseline's record files (or its collected table): a changed one reruns the
        comparison."""
        return [str(p) for p in record_paths(self.baseline.results)] if self.baseline else []

    def compare_caption(self) -> str:
        """The comparison's report caption: how its numbers are made."""
        if not self.baseline:
            return ""
        return caption(self.statistic, self.baseline.threshold, self.baseline.across)


def final_outputs(records: Sequence[str], campaign: str, artifact_targets: Sequence[str]) -> list[str]:
    """Everything target "all" builds. A record of ``records`` missing while the table
    collected from it exists (deleted or quarantined) is listed too, so it is rerun:
    Snakemake leaves a missing intermediate file alone while the files made from it are up
    to date. Only those: every record listed would cost a plan an edge per measurement."""
    collected = os.path.exists("results/tables/measurements.csv")
    missing = [p for p in records if not os.path.exists(p)] if collected else []
    return missing + ["results/tables/measurements.csv", f"results/plan/{campaign}.md", *artifact_targets]
