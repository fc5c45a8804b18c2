"""A record is what its plan says, and nothing disappears silently (issue 42).

Each hostile record below is a valid, sensible record of a planned measurement with one
field edited. The one check (:func:`archbench.plan.plan_match.mismatch`) names the field
and both values, and every surface says that line: the supervisor taking its worker's
record (a failure record with the reason), the quarantine at workflow start (moved
aside), collection (listed, not counted) and a comparison of a results folder holding its
spec files (left out). Records the campaign does not plan are listed and excluded, never
moved; one dry run and one `paper` run of the workflow hold several such records at once.
"""

from __future__ import annotations

import json
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from conftest import copy_workflow, snakemake

from archbench.cli import PAPER
from archbench.core.record import make_record, raw_path, read_record, run_id, schema
from archbench.execute import supervisor
from archbench.execute.specfiles import spec_text, write_specs
from archbench.plan.campaign import load_campaign
from archbench.plan.plan_match import mismatch, plans_of, resolved
from archbench.results.collect import collect, unplanned
from archbench.results.integrity import quarantine_invalid
from archbench.results.record_sets import read_side

SYSTEM = {"arch": "x86_64", "nodes": 1, "sockets": 1, "cores_per_socket": 2, "threads_per_core": 1,
          "runtime_minutes": 5, "container_runtime": "none", "launcher": "local",
          "vendor_library": "onednn", "env": {}}


def campaign(**experiment) -> dict:
    """A one-system campaign of small-CNN thread-scaling runs in 16-px images, both frameworks."""
    return {"campaign": "hostile", "systems": ["local"], "system_definitions": {"local": SYSTEM},
            "experiments": {"threads": {
                "type": "thread_scaling", "models": ["small_cnn"], "batch_per_process": [4],
                "threads": [1], "repetitions": 1, "image_size": 16, "num_classes": 10,
                "warmup_steps": 1, "steps": 2, "framework": ["tensorflow", "pytorch"],
                "env": {"KMP_BLOCKTIME": "0"}, **experiment}}}


MEASUREMENTS = load_campaign(campaign()).measurements
PLANS = {m["framework"]: m for m in MEASUREMENTS}
KERNEL = load_campaign({**campaign(), "experiments": {"k": {
    "type": "kernel", "kernels": ["matmul"], "sizes": [256], "workers": [1], "steps": 2,
    "warmup_steps": 1, "repetitions": 1}}}).measurements[0]


def record_of(m: dict, **edits) -> dict:
    """An ok record of measurement ``m`` as a worker and its supervisor write it (its
    throughput agreeing with its step times), with ``edits``."""
    fields = {k: v for k, v in m.items() if k in schema()["properties"]}
    fields.update(run_id=run_id(m), start_time="t0", end_time="t1", **edits)
    steps = fields["measured_steps"]
    times = [0.25] * steps
    if m["kind"] == "kernel":
        work = 2 * fields["problem_size"] ** 3 - fields["problem_size"] ** 2
        fields.update(step_times_s=times, throughput=work / 0.25 / 1e9)
    else:
        images, window = fields["global_batch"] * steps, 0.25 * steps + 0.01
        fields.update(step_times_s=times, throughput=images / window, throughput_unit=edits.get(
            "throughput_unit", "img/s"), metrics={"window_s": {"value": window, "unit": "s"},
                                                  "images": {"value": images, "unit": "img"}})
    return make_record(**fields)


# (case, the plan, the edit, the one line every surface gives)
CASES = [
    ("pytorch id whose framework says tensorflow", "pytorch", {"framework": "tensorflow"},
     "framework: record says 'tensorflow', its plan says 'pytorch'"),
    ("tensorflow record edited to say pytorch", "tensorflow", {"framework": "pytorch"},
     "framework: record says 'pytorch', its plan says 'tensorflow'"),
    ("image_size 224 in a 16-px configuration", "tensorflow", {"image_size": 224},
     "image_size: record says 224, its plan says 16"),
    ("GFLOP/s on a training record", "pytorch", {"throughput_unit": "GFLOP/s"},
     "throughput_unit: record says 'GFLOP/s', a train record's unit is 'img/s'"),
    ("batch 8 in a batch-4 configuration", "tensorflow", {"batch_per_process": 8, "global_batch": 8},
     "batch_per_process: record says 8, its plan says 4"),
    ("40 steps where 2 were planned (another run's settings)", "tensorflow", {"measured_steps": 40},
     "measured_steps: record says 40, its plan says 2"),
    ("2 threads in a 1-thread configuration", "pytorch", {"intra_threads": 2},
     "intra_threads: record says 2, its plan says 1"),
    ("a GPU record of a CPU configuration", "tensorflow", {"device": "gpu"},
     "device: record says 'gpu', its plan says 'cpu'"),
    ("oneDNN off in an oneDNN-on configuration", "tensorflow", {"vendor_library_enabled": False},
     "vendor_library_enabled: record says False, its plan says True"),
    ("real data in a synthetic configuration", "pytorch", {"data": "real"},
     "data: record says 'real', its plan says 'synthetic'"),
    ("another KMP_BLOCKTIME than planned", "tensorflow", {"env": {"KMP_BLOCKTIME": "1"}},
     "env.KMP_BLOCKTIME: record says '1', its plan says '0'"),
    ("a planned variable missing from the environment", "pytorch", {"env": {}},
     "env.KMP_BLOCKTIME: record says None, its plan says '0'"),
    ("a kernel record of another problem size", "kernel", {"problem_size": 512},
     "problem_size: record says 512, its plan says 256"),
    ("another experiment's record", "tensorflow", {"experiment_type": "hybrid"},
     "experiment_type: record says 'hybrid', its plan says 'thread_scaling'"),
]
IDS = [c[0] for c in CASES]


def plan(name: str) -> dict:
    return KERNEL if name == "kernel" else PLANS[name]


@pytest.mark.parametrize("case, planned, edit, reason", CASES, ids=IDS)
def test_the_check_names_the_field_and_both_values(case, planned, edit, reason):
    m = plan(planned)
    assert mismatch(record_of(m), m) == ""  # the record as planned agrees
    assert mismatch(record_of(m, **edit), m) == reason


@pytest.mark.parametrize("case, planned, edit, reason", CASES, ids=IDS)
def test_the_supervisor_turns_a_worker_record_that_contradicts_its_spec_into_a_failure(
        case, planned, edit, reason, tmp_path, monkeypatch):
    """The worker writes the hostile record and exits 0: its supervisor leaves a failure
    record naming the field, never the number (or, for the fields it states itself, the
    environment, the workflow's fields and a kernel's planned ones, the planned values)."""
    m = plan(planned)
    hostile = record_of(m, **edit)
    script = ("import sys; open(sys.argv[sys.argv.index('--output') + 1], 'w')"
              f".write({json.dumps(hostile)!r})")
    monkeypatch.setattr(supervisor, "worker_command", lambda m, s: [sys.executable, "-c", script])
    monkeypatch.setenv("ARCHBENCH_HOST_LOCK", str(tmp_path / "host.lock"))
    out = tmp_path / raw_path(m)
    record = supervisor.supervise(m, {"name": "local", **SYSTEM}, output=out, log_path=tmp_path / "w.log")
    assert read_record(out) == record
    assert mismatch(record, m) == ""  # whatever it writes is what its plan says
    if set(edit) <= {"env", *supervisor.WORKFLOW_FIELDS, *supervisor.planned_fields(m)}:
        assert record["status"] == "ok"  # fields it states itself, as planned
        return
    assert (record["status"], record["throughput"]) == ("failed", None)
    assert record["reason"] == f"its record was refused: {reason}"


@pytest.mark.parametrize("case, planned, edit, reason", CASES, ids=IDS)
def test_collection_excludes_and_the_quarantine_moves_a_record_that_contradicts_its_plan(
        case, planned, edit, reason, tmp_path):
    m = plan(planned)
    path = tmp_path / "results" / raw_path(m)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record_of(m, **edit)))
    plans = plans_of(tmp_path / "results", [(str(path), m)])
    frame, errors = collect([path], plans)
    assert frame.empty and errors == [f"{path}: {reason}"]
    assert collect([path])[1] == []  # without its plan it would have counted

    messages = quarantine_invalid([path], tmp_path / "results", plans=plans)
    assert not path.exists() and len(messages) == 1 and messages[0].endswith(f"{path}: {reason}")
    moved = next((tmp_path / "results/quarantine").rglob("*.reason"))
    assert moved.read_text() == f"{path}: {reason}\n"


@pytest.mark.parametrize("case, planned, edit, reason", CASES, ids=IDS)
def test_a_compared_results_folder_leaves_out_what_its_spec_files_contradict(
        case, planned, edit, reason, tmp_path):
    m = plan(planned)
    results = tmp_path / "results"
    write_specs([spec_text({"measurement": m, "system": SYSTEM})], results / "specs" / "hostile")
    good, bad = ({**m, "repetition": r} for r in (0, 1))
    write_specs([spec_text({"measurement": bad, "system": SYSTEM})], results / "specs" / "hostile")
    for rep, fields in ((good, {}), (bad, edit)):
        path = results / raw_path(rep)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record_of(rep, **fields)))
    frame, errors = read_side(results)
    assert list(frame["repetition"]) == [0]
    assert errors == [f"{results / raw_path(bad)}: {reason}"]


def test_a_record_planned_twice_agrees_with_one_of_its_specs(tmp_path):
    """A campaign edited after a run leaves two spec files for one record: the record
    agrees with the one it ran and counts."""
    m = PLANS["tensorflow"]
    results = tmp_path / "results"
    edited = {**m, "measured_steps": 5}
    write_specs([spec_text({"measurement": s, "system": SYSTEM}) for s in (edited, m)],
                results / "specs" / "hostile")
    path = results / raw_path(m)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record_of(m)))
    frame, errors = read_side(results)
    assert len(frame) == 1 and errors == []


def test_the_vendor_library_that_ran_is_a_finding_not_a_contradiction():
    """A training record names the library its probe saw run (oneDNN+ACL where ArmPL was
    declared): that is vendor_mismatch's business, not its plan's."""
    m = PLANS["tensorflow"]
    assert mismatch(record_of(m, vendor_library="onednn-acl"), m) == ""


def test_a_best_record_is_checked_against_the_layout_chosen_for_it():
    """A `best` placeholder plans its layout later: a record agrees with the chosen layout
    (or with the placeholder when none was chosen); with no layouts file, nothing to check."""
    placeholder = {**PLANS["tensorflow"], "best_of": "sweep"}
    chosen = {**PLANS["tensorflow"], "intra_threads": 2, "batch_per_process": 8, "global_batch": 8}
    key = raw_path(placeholder)
    assert resolved(placeholder, {key: chosen}) == chosen
    assert resolved(placeholder, {key: {"error": "no run"}}) == placeholder
    assert resolved(placeholder, None) is None
    assert mismatch(record_of(chosen), chosen) == ""


def test_records_the_campaign_does_not_plan_are_listed():
    """rep1..rep12 of a 1-repetition campaign, an experiment and a system it lacks."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp, "results/raw")
        planned = [str(Path(tmp, "results", raw_path(m))) for m in MEASUREMENTS]
        others = [raw_path({**MEASUREMENTS[0], "repetition": r}) for r in range(1, 13)]
        others += [raw_path({**MEASUREMENTS[0], "experiment": "gone"}),
                   raw_path({**MEASUREMENTS[0], "system": "elsewhere"})]
        for path in [*planned, *(str(Path(tmp, "results", o)) for o in others)]:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text("{}")
        lines = unplanned(raw, planned, "hostile")
        assert sorted(lines) == sorted(f"{Path(tmp, 'results', o).as_posix()}: not planned by campaign "
                                       "hostile" for o in others)


# ---------------------------------------------------------------- the workflow, once

@pytest.fixture(scope="module")
def hostile_workflow(tmp_path_factory):
    """The tiny campaign (16-px images) with its records on disk: one as planned, three
    that contradict their plans, and records it does not plan (rep1..rep12 of a planned
    configuration, another experiment, another system), on a ``local`` system whose free
    text is markup (issue 53: the report shows it as text)."""
    workdir = copy_workflow(tmp_path_factory.mktemp("hostile"))
    local = workdir / "config/systems/local.yaml"
    local.write_text("".join(line for line in local.read_text().splitlines(keepends=True)
                             if not line.startswith("description:"))
                     + "".join(f"{key}: '{SCRIPT}'\n" for key in ("description", "gpu_model",
                                                                 "interconnect")))
    tiny = workdir / "tiny.yaml"
    tiny.write_text(tiny.read_text().replace("image_size: 32", "image_size: 16"))
    from archbench.plan.campaign import load_campaign_file
    measurements = load_campaign_file(tiny).measurements
    edits = [{}, {"framework": "pytorch"}, {"image_size": 224}, {"throughput_unit": "GFLOP/s"}]
    for m, edit in zip(measurements, edits):
        path = workdir / "results" / raw_path(m)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record_of(m, **edit)))
    first = measurements[0]
    for other in [*({"repetition": r} for r in range(1, 13)), {"experiment": "gone"},
                  {"system": "elsewhere"}]:
        m = {**first, **other}
        path = workdir / "results" / raw_path(m)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record_of(m)))
    return workdir, measurements


def raw_state(workdir: Path) -> dict:
    return {str(p.relative_to(workdir)): p.read_bytes() for p in (workdir / "results/raw").rglob("*")
            if p.is_file()}


def test_paper_lists_and_excludes_what_does_not_count_and_says_so_in_one_line(hostile_workflow):
    workdir, measurements = hostile_workflow
    before = raw_state(workdir)
    proc = snakemake(workdir, "--profile", "profiles/local", *PAPER, "--configfile", "tiny.yaml",
                     timeout=600)
    assert "Traceback" not in proc.stderr
    assert raw_state(workdir) == before  # nothing moved, nothing rewritten
    listed = (workdir / "results/tables/invalid_records.txt").read_text().splitlines()
    paths = [f"results/{raw_path(m)}" for m in measurements]
    assert listed[:3] == sorted([
        f"{paths[1]}: framework: record says 'pytorch', its plan says 'tensorflow'",
        f"{paths[2]}: image_size: record says 224, its plan says 16",
        f"{paths[3]}: throughput_unit: record says 'GFLOP/s', a train record's unit is 'img/s'"])
    assert len(listed) == 3 + 14 and all(line.endswith(": not planned by campaign tiny")
                                         for line in listed[3:])
    table = pd.read_csv(workdir / "results/tables/measurements.csv")
    assert list(table["run_id"]) == [f"{measurements[0]['config_id']}/rep0"]
    line = "archbench: records: 1 counted, 17 excluded (listed in results/tables/invalid_records.txt)"
    said = [x for x in (proc.stdout + proc.stderr).splitlines() if x.startswith("archbench: records:")]
    assert said == [line]
    html = (workdir / "results/report.html").read_text(errors="replace")
    assert "Excluded records" in html and "invalid_records.html" in html
    # the system's markup reaches the platform table's parameters as text, never an element
    elements = LiveElements()
    elements.feed(html)
    assert elements.found == [] and SCRIPT not in html
    assert SCRIPT.replace("<", "&lt;").replace(">", "&gt;") in html


SCRIPT = "</script><img src=x onerror=alert(1)>"


class LiveElements(HTMLParser):
    """The elements of an HTML page that would run or load something of the data: an
    ``img``, ``iframe``, ``object`` or ``embed``, an ``on*`` handler, a ``javascript:`` link
    (Snakemake's report has none of its own; its scripts' text is not parsed as tags)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("img", "iframe", "object", "embed"):
            self.found.append(tag)
        self.found += [f"{tag} {name}" for name, value in attrs if name.startswith("on")
                       or "javascript:" in str(value).lower()]


def test_a_run_would_quarantine_what_contradicts_its_plan_and_never_what_it_does_not_plan(
        hostile_workflow, tmp_path):
    workdir, measurements = hostile_workflow
    workdir = shutil.copytree(workdir, tmp_path / "copy", symlinks=True)
    before = raw_state(workdir)
    proc = snakemake(workdir, "-n", "--profile", "profiles/local", "--configfile", "tiny.yaml",
                     timeout=300)
    said = [x for x in proc.stderr.splitlines() if x.startswith("archbench: invalid record")]
    assert sorted(said) == sorted(f"archbench: invalid record, will be rerun: results/{raw_path(m)}: {reason}"
                                  for m, reason in zip(measurements[1:], [
                        "framework: record says 'pytorch', its plan says 'tensorflow'",
                        "image_size: record says 224, its plan says 16",
                        "throughput_unit: record says 'GFLOP/s', a train record's unit is 'img/s'"]))
    assert raw_state(workdir) == before  # a dry run moves nothing
