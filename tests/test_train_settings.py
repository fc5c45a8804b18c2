"""Each training setting is declared once (archbench.workloads.training.settings.SETTINGS):
the command line, the TrainRun, the worker argv of a planned measurement, the probe
child's options and the record fields all follow the table; and a planned run's record
fields have one writer, the worker (the supervisor adds only what the workflow knows)."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
from test_run import SYSTEM as LOCAL
from test_run import measurement

from archbench.core.fields import config_id
from archbench.core.record import make_record, read_record, schema
from archbench.execute import supervisor
from archbench.plan.campaign import load_campaign
from archbench.workloads.training import benchmark as train
from archbench.workloads.training import settings
from archbench.workloads.training.settings import ABSENT, SETTINGS, Setting, TrainRun
from archbench.workloads.training.vendor_evidence.probing import probe_argv
from archbench.workloads.training.vendor_probe_child import parse_probe_args

SYSTEM = {"arch": "x86_64", "sockets": 2, "cores_per_socket": 4, "nodes": 2, "launcher": "srun",
          "vendor_library": "onednn", "gpus_per_node": 2, "data_dir": "/data/imagenet"}
EXPERIMENTS = {  # between them, every planned setting
    "threads": {"type": "thread_scaling", "models": ["small_cnn"], "batch_per_process": [4],
                "threads": [1, 2], "data": ["synthetic", "real"], "vendor_library": ["on", "off"]},
    "gpus": {"type": "node_scaling", "models": ["resnet50"], "batch_per_process": [8], "device": ["gpu"],
             "strategies": ["horovod", "mirrored"]},
    "ps": {"type": "node_scaling", "models": ["alexnet"], "batch_per_process": [8],
           "variable_update": ["parameter_server", "ps_async"], "parameter_servers": [1, 2],
           "ps_variable_placement": "greedy", "processes_per_node": 2},
    "horovod": {"type": "horovod_tuning", "models": ["alexnet"], "batch_per_process": [8],
                "cycle_time_ms": [2.5, 5], "fusion_threshold_mb": [0, 64], "processes_per_node": 2},
    "pinned": {"type": "inter_intra", "models": ["alexnet"], "batch_per_process": [8], "cores": [2, 4]},
    "numerics": {"type": "batch_sweep", "models": ["small_cnn"], "batch_per_process": [4],
                 "framework": ["tensorflow", "pytorch"], "device": ["gpu"], "precision": ["fp32", "fp16"],
                 "math_mode": ["strict", "tf32"], "graph": ["compiled"]},
    "fpmath": {"type": "thread_scaling", "models": ["small_cnn"], "batch_per_process": [4],
               "threads": [1], "math_mode": ["bf16"], "systems": ["s"]},
    "torch": {"type": "ppn_sweep", "models": ["resnet50"], "batch_per_process": [8], "processes_per_node": [1, 2],
              "framework": ["tensorflow", "pytorch"], "data": ["synthetic", "real"], "loader_workers": 2},
    "quality": {"type": "quality", "framework": ["tensorflow", "pytorch"], "target_accuracy": 0.9,
                "eval_every": 10, "systems": ["s"]},
}
WORKFLOW = set(supervisor.WORKFLOW_FIELDS) | {"env"}


def planned_measurements() -> list[dict]:
    systems = {"s": SYSTEM, "plain": {**SYSTEM, "vendor_library": "none"}}
    config = {"campaign": "t", "systems": list(systems), "system_definitions": systems,
              "defaults": {"repetitions": 1, "image_size": 32, "steps": 3, "warmup_steps": 1},
              "experiments": EXPERIMENTS}
    return load_campaign(config).measurements


MEASUREMENTS = planned_measurements()


def run_of(m: dict) -> TrainRun:
    """The TrainRun the worker of measurement ``m`` parses from its argv."""
    return train.parse_args(train.worker_argv(m, SYSTEM)[3:] + ["--output", "x"])


def test_every_setting_is_an_option_and_a_field_and_nothing_else_is():
    options = {a.dest for a in train.parser()._actions} - {"help"}
    assert options == {s.name for s in SETTINGS} == {f.name for f in dataclasses.fields(TrainRun)}
    help_text = train.parser().format_help()
    for s in SETTINGS:
        assert s.flag in help_text


def test_every_planned_setting_is_planned_by_some_experiment():
    planned = {s.name for s in SETTINGS if s.planned}
    seen = {s.name for s in SETTINGS for m in MEASUREMENTS
            if s.planned_value(m) not in (ABSENT, None)}
    assert planned == seen
    recorded = {s.planned or s.name for s in SETTINGS if s.recorded}
    assert recorded <= set(schema()["properties"])


@pytest.mark.parametrize("m", MEASUREMENTS, ids=[m["config_id"] for m in MEASUREMENTS])
def test_a_measurement_round_trips_through_argv_run_and_record(m):
    """measurement -> worker argv -> TrainRun -> record fields: every planned value
    arrives, and the worker writes every configuration field of the measurement itself,
    with the plan's value (so the supervisor need not write it)."""
    run = run_of(m)
    fields = train.base_fields(run)
    for s in SETTINGS:
        value = s.planned_value(m)
        if value is ABSENT:
            continue
        assert s.recorded_value(getattr(run, s.name)) == value, s.name
        if s.recorded:
            assert fields[s.planned] == value, s.name
    known = set(schema()["properties"])
    configuration = {k: v for k, v in m.items() if k in known and k not in WORKFLOW}
    assert {k: fields.get(k, "missing") for k in configuration} == configuration


def test_a_system_without_vendor_library_is_recorded_as_none():
    m = next(m for m in MEASUREMENTS if m["system"] == "plain" and m["data"] == "synthetic")
    assert m["vendor_library"] is None and m["vendor_library_enabled"] is False
    argv = train.worker_argv(m, SYSTEM)
    assert argv[argv.index("--vendor-library") + 1] == "none"
    assert train.base_fields(run_of(m))["vendor_library"] is None


def other_value(s: Setting, value):
    """A valid value of ``s`` other than ``value``."""
    meanings = [v for v in s.words if v is not None and v != value]  # True/False of on/off
    if meanings:
        return meanings[0]
    if s.choices:
        return next(c for c in (s.choices() if callable(s.choices) else s.choices) if c != value)
    if s.type is str:
        return f"{value}-other"
    return (value or 0) + 1


@pytest.mark.parametrize("s", [s for s in SETTINGS if s.planned], ids=lambda s: s.name)
def test_identity_says_whether_the_configuration_id_names_a_setting(s):
    m = next(m for m in MEASUREMENTS if s.planned_value(m) not in (ABSENT, None))
    changed = json.loads(json.dumps(m))
    key = s.planned.removeprefix(settings.TUNING)
    (changed["tuning"] if s.planned.startswith(settings.TUNING) else changed)[key] = \
        other_value(s, s.planned_value(m))
    assert (config_id(changed) != config_id(m)) is s.identity


def test_the_probe_child_parses_the_settings_it_takes():
    run = train.parse_args(["--model", "small_cnn", "--batch-per-process", "4", "--intra-threads", "3",
                            "--onednn", "off", "--data-format", "NCHW", "--seed", "7",
                            "--steps", "9", "--strategy", "horovod", "--output", "x"])
    child = parse_probe_args(probe_argv(run)[3:])
    for s in SETTINGS:
        expected = getattr(run, s.name) if s.probe else getattr(TrainRun(model="small_cnn", batch_per_process=4,
                                                                         output="x"), s.name)
        if s.name not in ("output", "vendor_probe"):
            assert getattr(child, s.name) == expected, s.name
    assert child.vendor_probe == "off" and child.strategy == "single"


def test_a_new_setting_is_one_entry(monkeypatch):
    """A setting added to SETTINGS alone is an option of the command line, the flag of
    its planned value and a field of the run class."""
    knob = Setting(name="throwaway_knob", type=int, default=3, minimum=1,
                   help="a throwaway knob", planned="tuning.throwaway_knob", identity=True)
    monkeypatch.setattr(settings, "SETTINGS", (*SETTINGS, knob))
    assert "--throwaway-knob THROWAWAY_KNOB" in train.parser().format_help()
    m = {**MEASUREMENTS[0], "tuning": {"throwaway_knob": 5}}
    argv = train.worker_argv(m, SYSTEM)
    assert argv[argv.index("--throwaway-knob") + 1] == "5"
    assert train.parser().parse_args(argv[3:] + ["--output", "x"]).throwaway_knob == 5
    run_class = settings.run_class(settings.SETTINGS)
    assert run_class(model="small_cnn", batch_per_process=4, output="x").throwaway_knob == 3
    with pytest.raises(ValueError, match="--throwaway-knob must be >= 1"):
        run_class(model="small_cnn", batch_per_process=4, output="x", throwaway_knob=0)


# ------------------------------------------------------------------ one writer

def fake_worker(record: dict, code: int = 0) -> list[str]:
    """A worker command that writes ``record`` to its --output and exits ``code``."""
    script = ("import json, sys; out = sys.argv[sys.argv.index('--output') + 1]; "
              f"open(out, 'w').write(json.dumps({record!r})); sys.exit({code})")
    return [sys.executable, "-c", script]


def test_the_supervisor_adds_only_what_the_workflow_knows(tmp_path, monkeypatch):
    m = measurement(scaling_unit="nodes")
    written = {**train.base_fields(run_of(m)), "start_time": "s", "end_time": "e",
               "step_times_s": [0.25, 0.25], "throughput": 16.0, "throughput_unit": "img/s",
               "vendor_library": "onednn-acl",  # what the worker found ran
               "metrics": {"images": {"value": 8, "unit": "img"}, "window_s": {"value": 0.5, "unit": "s"}}}
    written = make_record(**written)
    monkeypatch.setattr(supervisor, "worker_command", lambda m, s: fake_worker(written))
    out = tmp_path / "rep0.json"
    r = supervisor.supervise(m, LOCAL, output=out, log_path=tmp_path / "rep0.log")
    assert r == read_record(out) and r["status"] == "ok"
    added = {k for k in r if r[k] != written.get(k)}
    # and what the supervisor measures around its worker: the machine's other load
    assert added <= set(supervisor.WORKFLOW_FIELDS) | {"run_id", "config_hash", "log_path",
                                                       "host_load", "host_busy"}
    assert r["vendor_library"] == "onednn-acl"  # the worker's, not the declared onednn
    assert (r["experiment"], r["system"], r["scaling_unit"]) == ("e", "local", "nodes")
    assert r["config_id"] == m["config_id"] and r["run_id"] == f"{m['config_id']}/rep0"


def test_a_failure_record_of_the_supervisor_still_names_the_configuration(tmp_path, monkeypatch):
    m = measurement(tuning={"cores": 1})
    monkeypatch.setattr(supervisor, "worker_command",
                        lambda m, s: [sys.executable, "-c", "raise SystemExit(3)"])
    r = supervisor.supervise(m, LOCAL, output=tmp_path / "rep0.json", log_path=tmp_path / "rep0.log")
    assert r["status"] == "failed"
    for key in ("model", "batch_per_process", "intra_threads", "vendor_library",
                "vendor_library_enabled", "warmup_steps", "measured_steps", "global_batch"):
        assert r[key] == m[key], key
