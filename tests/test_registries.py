"""docs/extending.md stays true: a model, kernel, strategy (with its variable update),
framework, experiment type, table and figure registered in one line each (here monkeypatched into
their registry dicts) reach every place that names them: the campaign schema and
expansion, the command lines, the importer, the record checks and the report."""

from __future__ import annotations

import dataclasses
import sys
import types

import pandas as pd
import pytest

from archbench.core.csvfile import ImportFormatError
from archbench.core.record import DEFAULTS, make_record
from archbench.plan import campaign
from archbench.plan.experiment_types import EXPERIMENT_TYPES, feeding
from archbench.plan.experiment_types.base import (
    ExperimentType,
    product,
    schema_fragment,
    training_configuration,
)
from archbench.results import artifacts
from archbench.results.collect import records_to_frame
from archbench.results.figures import FIGURES, FigureSpec, build_figure, labels
from archbench.results.imports import read_import
from archbench.results.tables import TABLES, TableSpec, build_table
from archbench.results.tables.common import of_type
from archbench.workloads import names, sense
from archbench.workloads.kernels import KERNELS
from archbench.workloads.kernels import cli as kernel_cli
from archbench.workloads.kernels.common import KernelResult
from archbench.workloads.kernels.spec import BANDWIDTH, KERNEL_STRATEGY, KernelSpec
from archbench.workloads.training import benchmark, frameworks, matrix
from archbench.workloads.training.frameworks import FRAMEWORKS
from archbench.workloads.training.models import LANGUAGE_MODELS, MODELS
from archbench.workloads.training.strategies import STRATEGIES, Strategy, single
from archbench.workloads.training.tensorflow import models as tf_models

MODEL, KERNEL, STRATEGY, UPDATE = "toy_model", "toy_kernel", "toy_strategy", "toy_update"
FRAMEWORK = "toy_framework"
TYPE, TABLE, FIGURE = "toy_type", "toy_table", "toy_figure"
FIGURE_MODULE = "archbench.results.figures.toy_figures"
SYSTEM = {"arch": "x86_64", "sockets": 1, "cores_per_socket": 4, "nodes": 2,
          "launcher": "srun", "vendor_library": "onednn"}


def expand_toy(experiment: dict, system: dict) -> list[dict]:
    """Every model x batch size, one process of the throwaway strategy."""
    return [training_configuration(experiment, system, model=a["model"], strategy=STRATEGY,
                                   batch_per_process=a["batch"], intra_threads=1,
                                   variable_update=UPDATE)
            for a in product(model=experiment["models"], batch=experiment["batch_per_process"])]


def toy_table(df: pd.DataFrame) -> pd.DataFrame:
    """The throwaway experiment type's rows: value = the campaign's statistic of img/s."""
    rows = of_type(df, TABLE)
    return rows[["experiment", "model", "strategy", "value", "status"]].reset_index(drop=True)


def toy_figure(summary: pd.DataFrame):
    """One bar per row of the throwaway table, labelled by its strategy."""
    from matplotlib.figure import Figure
    table = toy_table(summary)
    figure = Figure()
    axes = figure.add_subplot()
    axes.bar(range(len(table)), table["value"])
    axes.set_xticks(range(len(table)), labels=list(labels.label(table, ["strategy"])))
    return figure


@pytest.fixture
def registered(monkeypatch):
    """One throwaway entry of each kind, in each registry, for this test only."""
    monkeypatch.setitem(MODELS, MODEL, dataclasses.replace(MODELS["small_cnn"]))
    monkeypatch.setitem(tf_models.BUILDERS, MODEL, tf_models.BUILDERS["small_cnn"])  # TensorFlow builds it
    monkeypatch.setitem(KERNELS, KERNEL, KernelSpec(
        name=KERNEL, help="a throwaway kernel (GB/s)", unit="GB/s", measures=BANDWIDTH,
        size_help="elements", run=lambda cluster, job: KernelResult(1.0, "GB/s", [1.0], 0),
        work=lambda record: 8 * record["problem_size"] / 1e9))
    monkeypatch.setitem(STRATEGIES, STRATEGY, Strategy(
        launch=single.launch, help="a throwaway strategy", variable_updates=(UPDATE,),
        label="Toy strategy"))
    tensorflow = FRAMEWORKS["tensorflow"]  # which trains it with its single-process backend
    monkeypatch.setitem(FRAMEWORKS, "tensorflow", dataclasses.replace(
        tensorflow, backends={**tensorflow.backends, STRATEGY: tensorflow.backends["single"]}))
    monkeypatch.setitem(FRAMEWORKS, FRAMEWORK, dataclasses.replace(
        tensorflow, label="Toy framework", short_label="TOY", help="a throwaway framework",
        backends={"single": tensorflow.backends["single"]}))
    schema = schema_fragment("""
description: A throwaway experiment type.
allOf: [{$ref: "#/$defs/common"}, {$ref: "#/$defs/training"}]
required: [models, batch_per_process]
unevaluatedProperties: false
""")
    monkeypatch.setitem(EXPERIMENT_TYPES, TYPE, ExperimentType(
        TYPE, expand_toy, schema, tables=("summary", TABLE), figures=(FIGURE,)))
    monkeypatch.setitem(TABLES, TABLE, TableSpec(toy_table))
    module = types.ModuleType(FIGURE_MODULE)
    module.toy_figure = toy_figure
    monkeypatch.setitem(sys.modules, FIGURE_MODULE, module)
    monkeypatch.setitem(FIGURES, FIGURE, FigureSpec("toy_figures.toy_figure", "A throwaway figure.", TABLE))
    campaign.experiment_schema.cache_clear()  # the schema is built once from the registries
    yield
    campaign.experiment_schema.cache_clear()


def plan(experiments: dict) -> list[dict]:
    config = {"campaign": "t", "systems": ["s"], "system_definitions": {"s": SYSTEM},
              "defaults": {"repetitions": 1, "steps": 3, "warmup_steps": 1},
              "experiments": experiments}
    return campaign.load_campaign(config).measurements


# ---------------------------------------------------------------- the campaign schema

def test_the_experiment_schema_names_every_registered_entry(registered):
    defs = campaign.experiment_schema()["$defs"]
    assert MODEL in defs["model_name"]["enum"] and KERNEL in defs["kernel_name"]["enum"]
    assert STRATEGY in defs["multi_process_strategy"]["enum"]
    assert UPDATE in defs["variable_update_name"]["enum"]
    assert TYPE in defs["common"]["properties"]["type"]["enum"] and TYPE in defs
    assert FRAMEWORK in defs["framework_name"]["enum"]


def test_a_campaign_plans_every_registered_entry(registered):
    ms = plan({
        "train": {"type": "thread_scaling", "models": [MODEL], "batch_per_process": [8], "threads": [1]},
        "kernels": {"type": "kernel", "kernels": [KERNEL], "sizes": [64]},
        "by_strategy": {"type": "node_scaling", "models": [MODEL], "batch_per_process": [8],
                        "strategies": [STRATEGY], "nodes": [1, 2]},
        "by_update": {"type": "node_scaling", "models": [MODEL], "batch_per_process": [8],
                      "variable_update": [UPDATE], "nodes": [2]},
        "toy": {"type": TYPE, "models": [MODEL], "batch_per_process": [4, 8]},
    })
    by = {name: [m for m in ms if m["experiment"] == name]
          for name in ("train", "kernels", "by_strategy", "by_update", "toy")}
    assert {m["model"] for m in by["train"]} == {MODEL}
    assert {(m["kernel"], m["strategy"], m["throughput_unit"]) for m in by["kernels"]} == {
        (KERNEL, KERNEL_STRATEGY, "GB/s")}
    assert {(m["strategy"], m["variable_update"], m["nodes"]) for m in by["by_strategy"]} == {
        (STRATEGY, UPDATE, 1), (STRATEGY, UPDATE, 2)}  # a strategy runs its first update
    assert {(m["strategy"], m["variable_update"]) for m in by["by_update"]} == {(STRATEGY, UPDATE)}
    assert {(m["experiment_type"], m["batch_per_process"]) for m in by["toy"]} == {(TYPE, 4), (TYPE, 8)}


def test_without_the_registry_line_the_campaign_refuses_the_name():
    campaign.experiment_schema.cache_clear()
    with pytest.raises(campaign.ConfigError, match=rf"models.0: '{MODEL}' is not one of"):
        plan({"e": {"type": "thread_scaling", "models": [MODEL], "batch_per_process": [8]}})
    with pytest.raises(campaign.ConfigError, match=rf"unknown experiment type '{TYPE}'"):
        plan({"e": {"type": TYPE, "models": ["small_cnn"], "batch_per_process": [8]}})


# ---------------------------------------------------------------- the command lines

def test_the_training_command_line_offers_the_model_and_strategy(registered, capsys):
    with pytest.raises(SystemExit) as done:
        benchmark.parse_args(["--help"])
    assert done.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())  # the help wraps its lines
    assert MODEL in shown and STRATEGY in shown and "a throwaway strategy" in shown
    run = benchmark.parse_args(["--model", MODEL, "--batch-per-process", "4", "--strategy", STRATEGY,
                                "--variable-update", UPDATE, "--output", "r.json"])
    assert (run.model, run.strategy, run.variable_update) == (MODEL, STRATEGY, UPDATE)
    assert FRAMEWORK in shown and "a throwaway framework" in shown
    run = benchmark.parse_args(["--framework", FRAMEWORK, "--model", MODEL, "--batch-per-process", "4",
                                "--output", "r.json"])
    assert (run.framework, run.strategy) == (FRAMEWORK, "single")


def test_a_framework_runs_exactly_the_strategies_it_has_backends_for(registered, capsys):
    assert frameworks.strategies_of(FRAMEWORK) == ["single"]
    assert matrix.lacks(FRAMEWORK, strategy="horovod") == (
        f"framework {FRAMEWORK} has no strategy 'horovod' (it has: single)")
    assert FRAMEWORK in frameworks.frameworks_of("single")
    with pytest.raises(campaign.ConfigError, match=f"framework {FRAMEWORK} has no strategy 'horovod'"):
        plan({"e": {"type": "node_scaling", "models": [MODEL], "batch_per_process": [8],
                    "framework": [FRAMEWORK], "strategies": ["horovod"], "nodes": [1]}})


def test_the_kernel_command_line_has_a_subcommand_for_the_kernel(registered):
    assert KERNEL in kernel_cli.parser().format_help()
    run = kernel_cli.parse_args([KERNEL, "--size", "64"])
    assert (run.kernel, run.size) == (KERNEL, 64)


# ---------------------------------------------------------------- the importer

IMPORT = ("system,model,kernel,strategy,variable_update,throughput,unit\n"
          f"s,{MODEL},,{STRATEGY},{UPDATE},10,img/s\n"
          f"s,,{KERNEL},{KERNEL_STRATEGY},,2,GB/s\n")


def test_the_importer_accepts_a_row_naming_the_strategy(registered, tmp_path):
    path = tmp_path / "toy.csv"
    path.write_text(IMPORT)
    rows = read_import(path)
    assert rows[["model", "strategy", "variable_update"]].iloc[0].tolist() == [MODEL, STRATEGY, UPDATE]
    assert rows[["kernel", "strategy"]].iloc[1].tolist() == [KERNEL, KERNEL_STRATEGY]


def test_the_importer_refuses_an_unregistered_strategy(tmp_path):
    path = tmp_path / "toy.csv"
    path.write_text(IMPORT)
    with pytest.raises(ImportFormatError, match=rf"column 'strategy': '{STRATEGY}' is not one of single, "):
        read_import(path)


# ---------------------------------------------------------------- the record checks

def train_record(**overrides) -> dict:
    """An ok record of the throwaway model and strategy (no step times: nothing to disagree)."""
    return make_record(**{**dict(
        experiment="toy", experiment_type=TYPE, system="s", arch="x86_64", kind="train",
        model=MODEL, strategy=STRATEGY, variable_update=UPDATE, data="synthetic",
        batch_per_process=8, global_batch=8, config_id="c", repetition=0, start_time="t0",
        end_time="t1", throughput=10.0, throughput_unit="img/s"), **overrides})


def test_a_record_naming_registered_entries_makes_sense(registered):
    assert sense.problem(train_record()) == ""
    kernel = make_record(**{**DEFAULTS, **dict(
        experiment="k", system="s", arch="x86_64", kind="kernel", kernel=KERNEL,
        strategy=KERNEL_STRATEGY, problem_size=2**20, config_id="k", repetition=0,
        start_time="t0", end_time="t1", measured_steps=2, step_times_s=[0.5, 0.5],
        throughput=2 * 8 * 2**20 / 1e9, throughput_unit="GB/s")})  # 2 steps in 1 s
    assert sense.problem(kernel) == ""


@pytest.mark.parametrize("field", list(names.FIELDS))
def test_a_record_naming_an_unregistered_entry_makes_no_sense(registered, field):
    bogus = train_record(**{field: "no_such_name"}, kind="kernel" if field == "kernel" else "train")
    assert sense.problem(bogus).startswith(f"{field}: 'no_such_name' is not a registered ")
    assert sense.problem({**bogus, "status": "failed", "throughput": None}).startswith(f"{field}: ")


def test_the_record_names_are_the_registries():
    assert names.registered("model") == [*MODELS, *LANGUAGE_MODELS]
    assert names.registered("kernel") == list(KERNELS)
    assert names.registered("strategy") == [*STRATEGIES, KERNEL_STRATEGY]
    assert names.registered("framework") == list(FRAMEWORKS)
    assert set(names.registered("variable_update")) == {
        u for s in STRATEGIES.values() for u in s.variable_updates}


# ---------------------------------------------------------------- the report

def test_the_report_builds_the_table_and_draws_the_figure(registered):
    assert TABLE in artifacts.table_names({}) and FIGURE in artifacts.figure_names()
    assert feeding(TABLE) == [TYPE] and feeding(FIGURE) == [TYPE]
    frame = records_to_frame([train_record(strategy=STRATEGY, throughput=t, repetition=i,
                                           run_id=f"c/rep{i}")
                              for i, t in enumerate((9.0, 11.0))])
    table = build_table(TABLE, frame)
    assert table[["model", "strategy"]].iloc[0].tolist() == [MODEL, STRATEGY]
    assert table["value"].tolist() == [pytest.approx(10.0)]
    figure = build_figure(FIGURE, frame)
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["Toy strategy"]


def test_figure_labels_come_from_the_framework_registry(registered):
    assert labels.value_text(pd.Series({"framework": FRAMEWORK}), "framework") == "Toy framework"


def test_figure_labels_come_from_the_strategy_registry():
    row = pd.Series({"strategy": "parameter_server"})
    assert labels.value_text(row, "strategy") == STRATEGIES["parameter_server"].label
    assert labels.value_text(pd.Series({"strategy": KERNEL_STRATEGY}), "strategy") == KERNEL_STRATEGY
