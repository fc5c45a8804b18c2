"""Result records: schema, atomic writes, strict reads, tidy rows, duplicate detection."""

import json

import pytest

from archbench.core import record as rec
from archbench.results.collect import DuplicateRunError, collect, flatten, records_to_frame


def sample(**overrides):
    fields = dict(experiment="e", system="s", arch="x86_64", kind="train", model="small_cnn",
                  config_id="c1", repetition=0, throughput=10.0, throughput_unit="img/s",
                  start_time="t0", end_time="t1",
                  metrics={"flops_per_image": {"value": 3.0, "unit": "FLOP"}})
    fields.update(overrides)
    return rec.make_record(**fields)


def test_make_record_fills_defaults_and_run_id():
    r = sample()
    assert r["schema_version"] == 1 and r["status"] == "ok" and r["image"] == "host"
    assert r["run_id"] == "c1/rep0"


def test_make_record_rejects_unknown_field_and_bad_values():
    with pytest.raises(rec.RecordError, match="bogus"):
        sample(bogus=1)
    with pytest.raises(rec.RecordError, match="status"):
        sample(status="exploded")
    with pytest.raises(rec.RecordError, match="nodes"):
        sample(nodes=0)


def test_only_a_workers_record_for_its_supervisor_skips_the_flush_to_disk(tmp_path, monkeypatch):
    """The supervisor reads its worker's record back at once and writes its own durably:
    the worker's is not flushed to disk."""
    flushed = []
    monkeypatch.setattr(rec.os, "fsync", flushed.append)
    output = tmp_path / "rep0.json"
    scratch = rec.scratch_path(output)
    assert scratch == tmp_path / ".rep0.json.worker" and rec.is_scratch(scratch)
    rec.write_record(scratch, sample())
    assert flushed == [] and json.loads(scratch.read_text())["model"]
    rec.write_record(output, sample())
    assert len(flushed) == 1 and not rec.is_scratch(output)


def test_write_is_atomic_and_roundtrips(tmp_path):
    path = tmp_path / "a" / "rep0.json"
    rec.write_record(path, sample())
    assert rec.read_record(path) == sample()
    assert [p.name for p in path.parent.iterdir()] == ["rep0.json"]  # no temp file left


def test_invalid_record_is_not_written(tmp_path):
    bad = sample()
    bad["throughput_unit"] = 5
    with pytest.raises(rec.RecordError):
        rec.write_record(tmp_path / "x.json", bad)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("content", [
    "",                                    # empty
    '{"schema_version": 1, "run_id"',      # truncated
    "[1, 2]",                              # not an object
    "\x00\xff garbage",                    # binary junk
])
def test_corrupt_files_are_reported_with_their_path(tmp_path, content):
    path = tmp_path / "rep0.json"
    path.write_text(content, errors="surrogateescape") if "\x00" not in content else path.write_bytes(b"\x00\xff")
    with pytest.raises(rec.RecordError, match=str(path)):
        rec.read_record(path)


def test_schema_violation_names_the_field(tmp_path):
    data = sample()
    del data["status"]
    path = tmp_path / "rep0.json"
    path.write_text(json.dumps(data))
    with pytest.raises(rec.RecordError, match="status"):
        rec.read_record(path)


def test_flatten_spreads_metrics_with_units():
    row = flatten(sample(hosts=["a", "b"], step_times_s=[0.1, 0.2]))
    assert row["metric_flops_per_image"] == 3.0
    assert row["metric_flops_per_image_unit"] == "FLOP"
    assert row["hosts"] == "a,b" and row["n_steps_recorded"] == 2
    assert "step_times_s" not in row and "metrics" not in row


def test_collect_excludes_bad_records_and_reports_them(tmp_path):
    good = rec.write_record(tmp_path / "good" / "rep0.json", sample())
    bad = tmp_path / "bad" / "rep0.json"
    bad.parent.mkdir()
    bad.write_text("{ truncated")
    frame, errors = collect([good, bad])
    assert len(frame) == 1 and frame.loc[0, "throughput"] == 10.0
    assert len(errors) == 1 and str(bad) in errors[0]


def test_duplicate_runs_are_an_error():
    with pytest.raises(DuplicateRunError, match="c1/rep0"):
        records_to_frame([sample(), sample(throughput=11.0)])


def test_a_record_is_checked_against_the_path_it_sits_at(tmp_path):
    """A valid record of another run copied into a record path is refused by every reader
    (collect names it as invalid; the workflow quarantines it), never double-counted."""
    import shutil

    from archbench.results.integrity import quarantine_invalid
    folder = tmp_path / "results/raw/local/threads/cfg"
    rec.write_record(folder / "rep0.json", sample(config_id="cfg", system="local", experiment="threads"))
    shutil.copy2(folder / "rep0.json", folder / "rep1.json")
    with pytest.raises(rec.RecordError, match="rep1.json: the record of another run: repetition 0 "
                       r"\(the path says 1\), run_id 'cfg/rep0' \(the path says 'cfg/rep1'\)"):
        rec.read_record(folder / "rep1.json")
    frame, errors = collect(sorted(folder.glob("*.json")))
    assert len(frame) == 1 and len(errors) == 1 and "rep1.json" in errors[0]
    messages = quarantine_invalid([folder / "rep0.json", folder / "rep1.json"], tmp_path / "results")
    assert len(messages) == 1 and not (folder / "rep1.json").exists()
    assert "the record of another run" in next((tmp_path / "results/quarantine").rglob("*.reason")).read_text()
