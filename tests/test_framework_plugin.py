"""A framework is a plugin: a throwaway one (tests/toy_framework.py, numpy softmax regression,
one registry entry) is registered here and nowhere else, and goes the whole way a framework
goes: the campaign plans it (and refuses what it lacks), the supervisor runs it in a real
worker process (which finds it through ``ARCHBENCH_FRAMEWORKS``), its record passes the
sense checks and the planned-versus-measured check, and the summary and batch_scaling
tables show it (the summary as the report's markdown prints it). Then the real workflow,
Snakemake and every job finding the toy through ``ARCHBENCH_FRAMEWORKS`` alone, runs it
beside TensorFlow: framework_comparison puts it against TensorFlow (its ratio from the
summary's img/s, its columns headed by its short label) and the report shows that table
and the figure titled by its label. No module of archbench names it."""

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
from conftest import snakemake

from archbench.core.record import raw_path, read_record
from archbench.execute import supervisor
from archbench.plan import campaign
from archbench.plan.plan_match import mismatch
from archbench.results import artifacts
from archbench.results.collect import records_to_frame
from archbench.results.tables import build_table
from archbench.workloads import names, sense
from archbench.workloads.training import frameworks

HERE = Path(__file__).parent
PLUGIN = "toy_framework:FRAMEWORKS"
SYSTEM = {"arch": "x86_64", "nodes": 1, "sockets": 1, "cores_per_socket": 2,
          "threads_per_core": 1, "runtime_minutes": 5, "container_runtime": "none",
          "launcher": "local", "vendor_library": "onednn", "env": {}}


@pytest.fixture
def toy(monkeypatch):
    """The toy framework registered in this process and in every process it starts."""
    monkeypatch.syspath_prepend(str(HERE))
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv(frameworks.PLUGINS, PLUGIN)
    import toy_framework
    for name, entry in toy_framework.FRAMEWORKS.items():
        monkeypatch.setitem(frameworks.FRAMEWORKS, name, entry)
    campaign.experiment_schema.cache_clear()  # the schema is built once from the registries
    yield toy_framework.NAME
    campaign.experiment_schema.cache_clear()


def plan(framework: str, **experiment) -> list[dict]:
    config = {"campaign": "t", "systems": ["local"], "system_definitions": {"local": SYSTEM},
              "experiments": {"e": {"type": "batch_sweep", "models": ["small_cnn"],
                                    "batch_per_process": [4, 8], "threads": [1], "repetitions": 1,
                                    "image_size": 8, "num_classes": 10, "warmup_steps": 1,
                                    "steps": 3, "framework": [framework], **experiment}}}
    return campaign.load_campaign(config).measurements


def test_listing_the_frameworks_loads_none():
    code = ("import sys; from archbench.workloads.training import frameworks as f; "
            "[e.model_names() for e in f.FRAMEWORKS.values()]; f.strategies_of('pytorch'); "
            "print(sorted({'tensorflow', 'torch'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_campaign_plans_the_toy_framework_and_refuses_what_it_lacks(toy):
    ms = plan(toy)
    assert {(m["framework"], m["batch_per_process"]) for m in ms} == {(toy, 4), (toy, 8)}
    assert toy in campaign.experiment_schema()["$defs"]["framework_name"]["enum"]
    with pytest.raises(campaign.ConfigError, match=f"framework {toy} has no model 'resnet50'"):
        plan(toy, models=["resnet50"])
    assert frameworks.strategies_of(toy) == ["single"]  # from its backends: nothing else runs it
    assert toy not in frameworks.frameworks_of("horovod")


def test_without_its_registry_entry_the_name_is_refused():
    campaign.experiment_schema.cache_clear()
    with pytest.raises(campaign.ConfigError, match="'toy' is not one of"):
        plan("toy")
    campaign.experiment_schema.cache_clear()


def test_the_toy_framework_runs_supervised_and_its_record_counts(toy, tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHBENCH_HOST_LOCK", str(tmp_path / "host.lock"))
    records = []
    for m in plan(toy):
        out = tmp_path / raw_path(m)
        record = supervisor.supervise(m, {"name": "local", **SYSTEM}, output=out,
                                      log_path=tmp_path / f"{m['config_id']}.log")
        assert read_record(out) == record
        assert record["status"] == "ok", (record["reason"], (tmp_path / f"{m['config_id']}.log").read_text()[-2000:])
        records.append(record)
    import numpy as np
    for record, m in zip(records, plan(toy)):
        assert (record["framework"], record["framework_version"]) == (toy, np.__version__)
        assert record["devices"] == ["CPU:0"] and record["loss_decreased"] is True
        assert names.registered("framework")[-1] == toy
        sense.check(record)  # images = batch x steps, throughput = images / window
        assert mismatch(record, m) == ""  # what ran is what was planned
        # numpy ran no oneDNN: the probe says so, and the record names what ran
        assert record["vendor_evidence"]["library"] == "none" and record["vendor_mismatch"]
    frame = records_to_frame(records)
    summary = build_table("summary", frame)
    assert set(summary["framework"]) == {toy}
    assert sorted(summary["batch_per_process"]) == [4, 8]
    assert "toy" in artifacts.to_markdown(summary)  # as the report shows it
    batch = build_table("batch_scaling", frame)
    assert len(batch) == 2 and set(batch["framework"]) == {toy}, batch


# one configuration in each framework: the least the workflow can compare
CAMPAIGN = """\
campaign: toy
systems: [local]
experiments:
  batches:
    type: batch_sweep
    framework: [tensorflow, toy]
    models: [small_cnn]
    threads: [1]
    batch_per_process: [4]
    repetitions: 1
    image_size: 8
    num_classes: 10
    warmup_steps: 1
    steps: 2
    timeout_minutes: 5
"""


@pytest.mark.workflow
def test_the_toy_framework_goes_through_the_workflow_to_the_report(toy, workflow_copy):
    """The real workflow, the toy registered through ``ARCHBENCH_FRAMEWORKS`` alone (the
    fixture's environment, which Snakemake and every job inherit): both frameworks run, the
    framework comparison puts the toy against TensorFlow, the report shows it."""
    (workflow_copy / "toy.yaml").write_text(CAMPAIGN)
    run = ("--profile", "profiles/local", "--configfile", "toy.yaml")
    snakemake(workflow_copy, *run, timeout=900)
    records = {r["framework"]: r for r in (json.loads(p.read_text()) for p in
                                           (workflow_copy / "results/raw").rglob("rep*.json"))}
    assert set(records) == {"tensorflow", toy}
    assert all(r["status"] == "ok" for r in records.values()), records
    tables = workflow_copy / "results/tables"
    summary = pd.read_csv(tables / "summary.csv").set_index("framework")
    table = pd.read_csv(tables / "framework_comparison.csv")
    assert list(zip(table["framework"], table["base"])) == [(toy, "tensorflow")]
    row = table.iloc[0]
    img_s = {f: summary.loc[f, "value"] for f in ("tensorflow", toy)}
    assert (row[f"img_s_{toy}"], row["img_s_tensorflow"]) == pytest.approx((img_s[toy], img_s["tensorflow"]))
    assert row["ratio"] == pytest.approx(img_s[toy] / img_s["tensorflow"]) and row["status"] == "ok"
    label, short = frameworks.FRAMEWORKS[toy].label, frameworks.FRAMEWORKS[toy].short_label
    assert f"{short} img/s" in (tables / "framework_comparison.md").read_text()
    snakemake(workflow_copy, *run, "--report", "results/report.html", timeout=600)
    html = (workflow_copy / "results/report.html").read_text()
    embedded = {name: base64.b64decode(data) for name, data in
                re.findall(r'filename=([\w.]+);base64,([A-Za-z0-9+/=]+)', html)}
    # the report shows the comparison's table and its figure, titled by the labels
    assert embedded["framework_comparison.csv"] == (tables / "framework_comparison.csv").read_bytes()
    figures = workflow_copy / "results/figures"
    assert embedded["framework_comparison.png"] == (figures / "framework_comparison.png").read_bytes()
    # (the PNG draws its text: the same figure's SVG keeps it, one comment each)
    assert f"<!-- TensorFlow vs {label}: " in (figures / "framework_comparison.svg").read_text()
