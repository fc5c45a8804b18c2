# The two commands of the README: `make run` (default campaign) and `make test`.
# Both create the pinned environment first (scripts/setup_env.sh; idempotent).
VENV ?= .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export TF_USE_LEGACY_KERAS := 1
export TF_CPP_MIN_LOG_LEVEL := 2
SNAKEMAKE := snakemake --profile profiles/local
PAPER := $(SNAKEMAKE) paper --config regenerate_only=True

.PHONY: setup run test lint dryrun paper report clean

setup:
	@bash scripts/setup_env.sh

run: setup  ## run the embedded default campaign on this machine
	$(SNAKEMAKE)
	@echo "Tables:  $(CURDIR)/results/tables/"
	@echo "Figures: $(CURDIR)/results/figures/"
	@echo "Plan:    $(CURDIR)/results/plan/"
	@echo "Report:  make report  ->  $(CURDIR)/results/report.html"

test: setup lint  ## lint, then the whole test suite (starts a local Slurm cluster when root)
	python -m pytest -ra --durations=40 $(PYTEST_ARGS)

lint: setup  ## ruff on the package, scripts and tests; snakemake --lint on the workflow
	ruff check archbench scripts tests
	bash scripts/lint_workflow.sh

dryrun: setup  ## plan the default campaign without running it
	$(SNAKEMAKE) -n

paper: setup  ## rebuild every table, figure and the report from results/raw (runs no benchmark)
	$(PAPER) --forcerun collect_measurements --report results/report.html --report-after-run

report: setup
	$(SNAKEMAKE) --report results/report.html

clean:
	rm -rf results logs .snakemake
