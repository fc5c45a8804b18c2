"""A field is one declaration: a throwaway swept setting (tests/toy_field.py, one ``Field``
with its own ``setting``), registered through ``ARCHBENCH_FIELDS`` alone, reaches every
surface a field reaches with no other edit: the experiment schema and the plan (its own
configuration ids, the unset value's ids those of a campaign without it), the worker's
command line, the record schema and the record, the tidy CSV, the summary's groups, every
table's columns, a figure's legend and the report. No module of archbench names it.

Every check runs in processes started with the plugin in their environment (the test
process imported the registry without it)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import snakemake, tool_env

from archbench.plan import campaign

HERE = Path(__file__).parent
PLUGINS = {"ARCHBENCH_FIELDS": "toy_field:FIELDS", "ARCHBENCH_FRAMEWORKS": "toy_framework:FRAMEWORKS"}
SYSTEM = {"arch": "x86_64", "nodes": 1, "sockets": 1, "cores_per_socket": 2,
          "threads_per_core": 1, "runtime_minutes": 5, "container_runtime": "none",
          "launcher": "local", "vendor_library": "onednn", "env": {}}
EXPERIMENT = {"type": "batch_sweep", "models": ["small_cnn"], "batch_per_process": [4],
              "threads": [1], "repetitions": 1, "image_size": 8, "num_classes": 10,
              "warmup_steps": 1, "steps": 2}


def plugin_env() -> dict:
    """This environment with both throwaway plugins registered for every process."""
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    return tool_env(PYTHONPATH=path, **PLUGINS)


def config(**experiment) -> dict:
    return {"campaign": "t", "systems": ["local"], "system_definitions": {"local": SYSTEM},
            "experiments": {"e": {**EXPERIMENT, **experiment}}}


# what a process with the plugin sees: the plan, each measurement's worker argv, and the
# registries that schema, tables and figures read (as JSON for this process)
PROBE = """
import json, sys
from archbench.core.record import schema
from archbench.plan import campaign
from archbench.plan.experiment_types.base import axes_schema
from archbench.results.figures.labels import IDENTITY
from archbench.results.tables import common, batches, precision
from archbench.workloads.training import settings
try:
    ms = campaign.load_campaign(json.loads(sys.argv[1])).measurements
except campaign.ConfigError as error:
    print(json.dumps({"error": str(error)})); raise SystemExit
print(json.dumps({
    "measurements": [{"toy_knob": m.get("toy_knob"), "config_id": m["config_id"],
                      "argv": settings.planned_argv(m)} for m in ms],
    "record_property": schema()["properties"].get("toy_knob"),
    "experiment_key": axes_schema()["properties"].get("toy_knob"),
    "summary_keys": list(common.KEYS), "batch_scaling": list(batches.BATCH_SCALING_COLUMNS),
    "precision": list(precision.COLUMNS), "legend": list(IDENTITY),
}))
"""


def probe(**experiment) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(config(**experiment))],
                         env=plugin_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_a_field_declared_once_is_planned_passed_to_the_worker_and_read_by_every_registry():
    seen = probe(toy_knob=["low", "high"])
    by_knob = {m["toy_knob"]: m for m in seen["measurements"]}
    assert set(by_knob) == {None, "high"}  # the unset value is left out, as numerics are
    # the value at its read_as keeps the id a campaign without the field plans (this process)
    before = {m["config_id"] for m in campaign.load_campaign(config()).measurements}
    assert {by_knob[None]["config_id"]} == before
    assert by_knob["high"]["config_id"] == f"{by_knob[None]['config_id']}_knobhigh"
    assert by_knob["high"]["argv"][-2:] == ["--toy-knob", "high"]
    assert "--toy-knob" not in by_knob[None]["argv"]
    assert seen["record_property"]["enum"] == ["low", "high", None]
    assert seen["experiment_key"]["items"]["enum"] == ["low", "high"]
    for columns in ("summary_keys", "batch_scaling", "precision", "legend"):
        assert "toy_knob" in seen[columns], columns
    # beside the numerics: after graph, before the model in every table that shows them
    assert seen["batch_scaling"].index("toy_knob") == seen["batch_scaling"].index("graph") + 1


def test_a_value_the_field_does_not_take_is_refused_naming_its_key():
    assert "toy_knob" in probe(toy_knob=["medium"])["error"]


def test_without_the_plugin_no_module_knows_the_field():
    with pytest.raises(campaign.ConfigError, match="toy_knob"):
        campaign.load_campaign(config(toy_knob=["high"]))


CAMPAIGN = """\
campaign: knob
systems: [local]
experiments:
  batches:
    type: batch_sweep
    framework: [toy]
    models: [small_cnn]
    threads: [1]
    batch_per_process: [4]
    toy_knob: [low, high]
    repetitions: 1
    image_size: 8
    num_classes: 10
    warmup_steps: 1
    steps: 2
    timeout_minutes: 5
"""


@pytest.mark.workflow
def test_the_field_goes_through_the_workflow_to_the_tables_figures_and_report(workflow_copy):
    """The real workflow, the field and the toy framework registered through the environment
    alone: two runs differing only in the field, told apart from the plan to the report."""
    (workflow_copy / "knob.yaml").write_text(CAMPAIGN)
    run = ("--profile", "profiles/local", "--configfile", "knob.yaml")
    snakemake(workflow_copy, *run, timeout=900, env=plugin_env())
    results = workflow_copy / "results"
    plan = pd.read_csv(results / "plan/knob.csv")
    assert plan["measurements"].tolist() == [2], plan  # the field's two values
    records = [json.loads(p.read_text()) for p in (results / "raw").rglob("rep*.json")]
    assert sorted(r["toy_knob"] for r in records) == ["high", "low"]
    assert all(r["status"] == "ok" for r in records), [r["reason"] for r in records]
    logs = {p.parent.name: p.read_text() for p in (workflow_copy / "logs").rglob("*.worker.log")}
    assert [run for run, text in logs.items() if "--toy-knob high" in text] == \
        [r["config_id"] for r in records if r["toy_knob"] == "high"]  # the worker's command line
    tables = results / "tables"
    tidy = pd.read_csv(tables / "measurements.csv")
    assert sorted(tidy["toy_knob"]) == ["high", "low"]
    summary = pd.read_csv(tables / "summary.csv")
    assert sorted(summary["toy_knob"]) == ["high", "low"] and summary["n"].tolist() == [1, 1]
    batch = pd.read_csv(tables / "batch_scaling.csv")
    assert sorted(batch["toy_knob"]) == ["high", "low"]
    # the figure's legend tells the two lines apart by the field's own legend text
    svg = (results / "figures/batch_scaling.svg").read_text()
    assert "<!-- knob high -->" in svg and "<!-- knob low -->" in svg
    snakemake(workflow_copy, *run, "--report", "results/report.html", timeout=600,
              env=plugin_env())
    html = (results / "report.html").read_text()
    embedded = {name: base64.b64decode(data) for name, data in
                re.findall(r'filename=([\w.]+);base64,([A-Za-z0-9+/=]+)', html)}
    assert embedded["summary.csv"] == (tables / "summary.csv").read_bytes()
    assert b"toy_knob" in embedded["summary.csv"]
