"""The identity fields are declared once (archbench.core.fields) and every reader agrees
with the declaration: the configuration id keeps the form of the ids records on disk are
named by, the record schema types each field as declared, and records, settings, plans and
tables read an unstated field as its declared ``read_as``."""

from __future__ import annotations

import glob
import hashlib
import json
from importlib import resources
from unittest.mock import ANY

import fabricated
import pandas as pd
import pytest

from archbench.core import fields
from archbench.core.record import DEFAULTS, RecordError, make_record, schema
from archbench.plan.campaign import load_campaign_file
from archbench.plan.plan_match import mismatch
from archbench.results.artifacts import header
from archbench.results.tables.common import BOOL_FIELDS, INT_FIELDS, KEYS, STRING_FIELDS, normalise
from archbench.workloads.training.settings import SETTINGS


def frozen_config_id(c: dict) -> str:
    """The configuration id as written before the registry, kept verbatim: every record on
    disk sits in a folder of this name, so the registry's id must equal it."""
    if c["kind"] == "kernel":
        parts = [c["kernel"], f"n{c.get('problem_size')}", f"t{c.get('tile_size') or 0}",
                 f"w{c['workers']}", f"N{c['nodes']}"]
    else:
        vendor = {True: "vlon", False: "vloff", None: "vlna"}[c.get("vendor_library_enabled")]
        parts = [c["model"], f"b{c['batch_per_process']}", f"N{c['nodes']}",
                 f"p{c['processes_per_node']}", f"t{c['intra_threads']}",
                 f"i{c['inter_threads']}", vendor, c["data"], c["strategy"]]
        if c.get("parameter_servers"):
            parts.append(f"ps{c['parameter_servers']}")
        if c.get("variable_update"):
            parts.append(c["variable_update"])
    for name, default, text in (("precision", "fp32", "{}"), ("math_mode", "strict", "math{}"),
                                ("graph", "eager", "{}")):
        if c.get(name) not in (None, default):
            parts.append(text.format(c[name]))
    if c.get("framework", "tensorflow") != "tensorflow":
        parts.append(c["framework"])
    if c.get("device") == "gpu":
        parts.append(f"gpu{c.get('gpus_per_node') or ''}")
    extra = dict(sorted(c.get("tuning", {}).items()))
    if c.get("env"):
        extra["env"] = c["env"]
    if extra:
        parts.append(hashlib.sha256(json.dumps(extra, sort_keys=True).encode()).hexdigest()[:8])
    return "_".join(str(p) for p in parts)


RECORD = {"schema_version": 1, "run_id": "c/rep0", "config_id": "c", "repetition": 0,
          "experiment": "e", "system": "s", "arch": "x86_64", "kind": "train",
          "status": "failed", "reason": "r", "throughput": None, "throughput_unit": "img/s",
          "start_time": "t", "end_time": "t"}
CAMPAIGNS = sorted(glob.glob("config/campaigns/*.yaml")) + ["config/config.yaml"] + sorted(
    p for p in glob.glob("tests/campaigns/*.yaml") if "emulated" not in p)


@pytest.mark.parametrize("path", CAMPAIGNS)
def test_every_shipped_campaign_plans_the_ids_it_planned_before_the_registry(path):
    measurements = load_campaign_file(path).measurements
    assert measurements
    for m in measurements:
        assert m["config_id"] == fields.config_id(m) == frozen_config_id(m), m


EDGES = [
    {"kind": "kernel", "kernel": "stream", "problem_size": 10, "tile_size": None, "workers": 1, "nodes": 1},
    {"kind": "kernel", "kernel": "matmul", "tile_size": 64, "workers": 2, "nodes": 1, "device": "gpu",
     "gpus_per_node": 4, "framework": "pytorch"},
    {"kind": "train", "model": "resnet50", "batch_per_process": 32, "nodes": 2, "processes_per_node": 4,
     "intra_threads": 0, "inter_threads": 1, "data": None, "strategy": "parameter_server",
     "parameter_servers": 2, "variable_update": "async", "framework": None, "precision": None,
     "math_mode": "bf16", "graph": "compiled", "tuning": {"cores": 4}, "env": {"KMP_BLOCKTIME": "1"}},
    {"kind": "train", "model": "alexnet", "batch_per_process": 1, "nodes": 1, "processes_per_node": 1,
     "intra_threads": 2, "inter_threads": 0, "vendor_library_enabled": False, "data": "real",
     "strategy": "horovod", "parameter_servers": 0, "device": "gpu", "precision": "bf16"},
]


@pytest.mark.parametrize("configuration", EDGES + list(fabricated.configurations()))
def test_ids_of_edge_and_fabricated_configurations_keep_their_form(configuration):
    assert fields.config_id(configuration) == frozen_config_id(configuration)


def test_the_record_schema_takes_each_field_from_its_declaration_alone():
    text = resources.files("archbench").joinpath("schemas/record.schema.json").read_text()
    assert not set(json.loads(text)["properties"]) & set(fields.BY_NAME)  # declared once
    properties, required = schema()["properties"], set(schema()["required"])
    for f in fields.FIELDS:
        prop = properties[f.name]
        assert prop == f.schema()
        if "enum" in prop:
            assert all(v is None or isinstance(v, f.kind) for v in prop["enum"]), f.name
            assert f.read_as is None or f.read_as in prop["enum"], f.name
        assert (f.name in required) == f.required, f.name
        if not f.required:
            assert DEFAULTS[f.name] == f.record_default, f.name
    assert properties["precision"] == {"enum": ["fp32", "bf16", "fp16", None], "description": ANY}
    assert properties["nodes"] == {"type": "integer", "minimum": 1, "maximum": 10**6, "description": ANY}
    with pytest.raises(RecordError, match="precision"):
        make_record(**RECORD, precision="fp8")
    with pytest.raises(RecordError, match="batch_per_process"):
        make_record(**RECORD, batch_per_process=2**20 + 1)
    make_record(**RECORD, precision=None, batch_per_process=2**20)


def test_tables_type_and_head_each_field_as_declared():
    assert KEYS == (*fields.CONFIG_FIELDS, *fields.SERIES_FIELDS, "variant")
    for f in fields.FIELDS:
        kinds = {str: STRING_FIELDS, int: INT_FIELDS, bool: BOOL_FIELDS}
        assert [f.name in k for k in kinds.values()].count(True) == 1 and f.name in kinds[f.kind]
        assert header(f.name) == (f.header or f.name)


def test_a_setting_of_an_identity_field_takes_its_default_and_choices_from_the_field():
    by_name = {s.name: s for s in SETTINGS}
    for name, value in fields.READ_AS.items():
        assert by_name[name].default == value, name
    for f in fields.FIELDS:
        if f.name in by_name and f.choices:
            assert by_name[f.name].choices == f.choices, f.name
    assert by_name["precision"].axis == "precision" and by_name["precision"].recorded


def test_tables_and_the_plan_check_read_an_unstated_field_as_its_read_as():
    row = {"experiment": "e", "system": "s", "kind": "train", "config_id": "x", "device": None}
    tidy = normalise(pd.DataFrame([row]))
    assert {n: tidy.loc[0, n] for n in fields.READ_AS} == dict(fields.READ_AS)
    assert fields.filled({"device": None, "precision": "bf16"}) == {**fields.READ_AS, "precision": "bf16"}
    # a record without the numerics matches a plan stating their read_as, not another value
    record = {"precision": None, "math_mode": None, "graph": None, "device": None,
              "throughput_unit": "img/s", "status": "ok"}
    planned = {"precision": "fp32", "math_mode": "strict", "graph": "eager", "device": "cpu"}
    assert mismatch(record, planned) == ""
    assert mismatch(record, {**planned, "precision": "bf16"}).startswith("precision: ")
