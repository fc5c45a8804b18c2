"""Records checked for sense: bounds (the record schema, shared with imports) and an ok
measurement's values against each other (archbench.workloads.sense), wherever a record is read.

Worked examples first, then properties over generated records: consistent ones pass,
one field out of bounds or a throughput off its step times by a factor is refused with
that field named; then the two readers (quarantine, collection) on one nonsense record.
"""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archbench.core.record import DEFAULTS, RecordError, bound, make_record, read_record, schema
from archbench.results import imports as importer
from archbench.results.collect import collect
from archbench.results.integrity import quarantine_invalid
from archbench.workloads import ceiling, sense
from archbench.workloads.kernels import KERNELS

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STEPS = [0.52, 0.49, 0.50, 0.51, 0.48, 0.50, 0.50, 0.49, 0.51, 0.50]  # 5.0 s


def train_record(**overrides) -> dict:
    """An ok Horovod record as archbench.train writes it: 2 workers x batch 32 for 10 steps
    of 5.0 s in all, in a window of 5.1 s: 640 img / 5.1 s = 125.49 img/s."""
    fields = dict(
        experiment="e", system="s", arch="x86_64", kind="train", model="resnet50", run_id="c/rep0",
        data="synthetic", strategy="horovod", nodes=1, processes_per_node=2, workers=2,
        intra_threads=4, inter_threads=1, batch_per_process=32, global_batch=64,
        image_size=224, config_id="c", repetition=0, start_time="t0", end_time="t1",
        warmup_steps=2, measured_steps=10, step_times_s=list(STEPS), throughput=640 / 5.1,
        throughput_unit="img/s", metrics={"window_s": {"value": 5.1, "unit": "s"},
                                          "images": {"value": 640, "unit": "img"}})
    return {**DEFAULTS, **fields, **overrides}


def kernel_record(**overrides) -> dict:
    """An ok matmul record: N = 1024, 3 multiplies in 0.6 s: 3 x (2 x 1024^3 - 1024^2)
    FLOP / 0.6 s = 10.7322 GFLOP/s."""
    fields = dict(
        experiment="k", system="s", arch="x86_64", kind="kernel", kernel="matmul", run_id="m/rep0",
        strategy="workers", workers=2, problem_size=1024, tile_size=256, config_id="m",
        repetition=0, start_time="t0", end_time="t1", measured_steps=3,
        step_times_s=[0.2, 0.2, 0.2], throughput=3 * (2 * 1024**3 - 1024**2) / 0.6 / 1e9,
        throughput_unit="GFLOP/s")
    return {**DEFAULTS, **fields, **overrides}


def refused(record: dict, field: str) -> str:
    """The one-line reason ``record`` is refused; it names ``field`` first."""
    with pytest.raises(RecordError) as caught:
        sense.check(record)
    reason = str(caught.value)
    assert "\n" not in reason and re.match(rf"record: {re.escape(field)}\b", reason), reason
    return reason


# ---------------------------------------------------------------- worked examples

def test_a_genuine_training_record_is_accepted():
    record = make_record(**train_record())
    assert record["throughput"] == pytest.approx(125.49, abs=0.01)


def test_a_genuine_kernel_record_is_accepted():
    assert make_record(**kernel_record())["throughput"] == pytest.approx(10.7322, abs=1e-4)


def test_a_throughput_of_1e30_is_refused():
    reason = refused(train_record(throughput=1e30, metrics={}, step_times_s=[]), "throughput")
    assert "1e+30 is greater than the maximum of 1e+21" in reason


def test_negative_step_times_and_throughput_are_refused():
    times = [-t for t in STEPS]
    reason = refused(train_record(step_times_s=times, metrics={}), "step_times_s")
    assert re.search(r"step_times_s/\d: -0\.\d+ is less than or equal to the minimum of 0$", reason)
    refused(train_record(step_times_s=times, throughput=-1781.6, metrics={}), "throughput")


def test_a_throughput_above_its_step_times_rate_is_refused():
    """640 img in 5.0 s of steps is 128 img/s at most: a window can't be shorter."""
    reason = refused(train_record(throughput=140.0, metrics={}), "throughput")
    assert "above its step times' rate" in reason and "= 128 img/s" in reason


def test_a_throughput_far_below_its_step_times_rate_is_refused():
    """10 steps of 5.0 s allow a window of 5.0 x 1.2 + 1 = 7 s: 640 img / 8 s = 80 img/s
    is too slow for them; 640 img / 6.9 s is not."""
    reason = refused(train_record(throughput=80.0, metrics={}), "throughput")
    assert "below its step times' rate" in reason and "over the 7 s its steps allow" in reason
    sense.check(train_record(throughput=640 / 6.9, metrics={}))


def test_a_short_window_may_hold_a_barrier_longer_than_its_steps():
    """A real two-worker MultiWorkerMirrored record: 3 steps in 23 ms, a 31.6 ms window."""
    times = [0.010106543, 0.009038603, 0.005143215]
    sense.check(train_record(strategy="mirrored", batch_per_process=4, global_batch=8,
                          measured_steps=3, step_times_s=times, throughput=24 / 0.031494596,
                          metrics={"window_s": {"value": 0.031494596, "unit": "s"},
                                   "images": {"value": 24, "unit": "img"}}))


def test_throughput_must_be_images_over_the_window():
    reason = refused(train_record(throughput=127.0), "throughput")
    assert "is not metrics.images / metrics.window_s = 640 / 5.1 s" in reason


@pytest.mark.parametrize("change, field", [
    ({"global_batch": 32}, "global_batch"),
    ({"metrics": {"window_s": {"value": 5.1, "unit": "s"}, "images": {"value": 600, "unit": "img"}}},
     "metrics.images"),
    ({"metrics": {"window_s": {"value": -5.1, "unit": "s"}, "images": {"value": 640, "unit": "img"}}},
     "metrics.window_s"),
    ({"measured_steps": 9}, "step_times_s"),
    ({"measured_steps": 0, "step_times_s": []}, "measured_steps"),
    ({"throughput": None}, "throughput"),
    ({"throughput": float("nan")}, "throughput"),
    ({"step_times_s": [float("nan")] + STEPS[1:]}, "step_times_s/0"),
])
def test_an_ok_training_record_must_agree_with_itself(change, field):
    refused(train_record(**change), field)


@pytest.mark.parametrize("change, field", [
    ({"nodes": 0}, "nodes"), ({"workers": 10**6 + 1}, "workers"),
    ({"processes_per_node": 2 * 10**6}, "processes_per_node"), ({"intra_threads": -1}, "intra_threads"),
    ({"gpus": 0}, "gpus"), ({"repetition": 10**6 + 1}, "repetition"),
    ({"measured_steps": 10**6 + 1}, "measured_steps"), ({"batch_per_process": 2**20 + 1}, "batch_per_process"),
    ({"global_batch": 2**40 + 1}, "global_batch"), ({"image_size": 0}, "image_size"),
    ({"problem_size": 2**50 + 1}, "problem_size"), ({"tile_size": 0}, "tile_size"),
    ({"step_times_s": [2e6] + STEPS[1:]}, "step_times_s/0"), ({"throughput": 0.0}, "throughput"),
])
def test_counts_sizes_and_times_are_bounded(change, field):
    refused(train_record(**change), field)


def test_failure_records_still_pass():
    for status in ("oom", "timeout", "failed"):
        sense.check(train_record(status=status, reason="r", throughput=None, throughput_unit="",
                              step_times_s=[], metrics={}))


def test_records_without_step_times_hold_to_the_bounds_only():
    """An asynchronous parameter-server run has no step times (its window metrics still
    count); a fabricated record neither."""
    sense.check(train_record(strategy="parameter_server", variable_update="ps_async", step_times_s=[]))
    sense.check(train_record(step_times_s=[], metrics={}, measured_steps=None, throughput=7.0))


def test_a_kernel_throughput_must_be_its_work_over_its_step_times():
    reason = refused(kernel_record(throughput=12.0), "throughput")
    assert "2.14644 GFLOP x 3 steps / 0.6 s = 10.7322 GFLOP/s" in reason
    refused(kernel_record(throughput_unit="GB/s"), "throughput_unit")


@pytest.mark.parametrize("kernel, size, workers, metrics, work", [
    ("stream", 2**20, 2, {}, 3 * 8 * 2**20 * 2 / 1e9),  # triad: 3 arrays of 8-byte words
    ("stream_comm", 64, 2, {}, 64.0),  # MiB per push
    ("fft", 2**10, 1, {}, 5 * 2**10 * 10 / 1e9),
    ("cg", 100, 1, {"iterations": {"value": 7, "unit": "count"}}, 7 * 2 * 100**2 / 1e9),
])
def test_every_kernel_counts_its_work_per_step(kernel, size, workers, metrics, work):
    spec = KERNELS[kernel]
    record = kernel_record(kernel=kernel, problem_size=size, workers=workers, metrics=metrics,
                           throughput=work * 3 / 0.6, throughput_unit=spec.unit, tile_size=None)
    assert spec.work(record) == pytest.approx(work)
    sense.check(record)
    refused({**record, "throughput": work * 3 / 0.6 * 1.01}, "throughput")


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_and_infinity_in_a_file_are_unreadable(tmp_path, value):
    """Python's json writes and reads them; records never hold them (written strictly)."""
    path = tmp_path / "rep0.json"
    path.write_text(json.dumps({**train_record(), "throughput": value}))
    with pytest.raises(RecordError, match="(NaN|Infinity) is not a JSON number"):
        read_record(path)


def test_imports_and_records_share_one_definition_of_the_bounds():
    """Every bounded import column holds to the bound of the record field it fills."""
    for column, (low, high) in importer.INT_BOUNDS.items():
        field = importer.RECORD_FIELD.get(column, column)
        assert (low, high) == (bound(field, "minimum"), bound(field, "maximum"))
        assert importer.parse_cell(str(high), column) == high
        with pytest.raises(ValueError, match="is not between"):
            importer.parse_cell(str(high + 1), column)
    assert importer.MAX_VALUE == bound("throughput", "maximum") == 1e21


# ---------------------------------------------------------------- properties

@st.composite
def consistent_training(draw) -> dict:
    """A training record as a real run writes it: n step times inside a window that
    outlasts them by at most the allowance, throughput = images / window, and no step
    shorter than its FLOPs at the physical bound allow."""
    batch, workers = draw(st.integers(1, 2**20)), draw(st.integers(1, 2**10))
    shape = train_record(batch_per_process=batch, workers=workers, processes_per_node=workers)
    fastest = batch * workers * ceiling.training_flops(shape)[0] / (
        ceiling.FACTOR * ceiling.hardware(shape)[0])
    times = [fastest + t for t in draw(st.lists(st.floats(1e-4, 100.0), min_size=1, max_size=30))]
    total = math.fsum(times)
    window = total * (1 + draw(st.floats(0, 0.99 * sense.WINDOW_SLACK))) \
        + draw(st.floats(0, 0.99 * sense.WINDOW_SLACK_S))
    images = batch * workers * len(times)
    metrics = {"window_s": {"value": window, "unit": "s"}, "images": {"value": images, "unit": "img"}}
    return train_record(batch_per_process=batch, workers=workers, processes_per_node=workers,
                        global_batch=batch * workers, measured_steps=len(times), step_times_s=times,
                        throughput=images / window, metrics=metrics if draw(st.booleans()) else {})


@st.composite
def consistent_kernel(draw) -> dict:
    """A kernel record as a real run writes it: throughput = work x steps / time, no step
    shorter than its work at the physical bound allows."""
    spec = KERNELS[draw(st.sampled_from(sorted(KERNELS)))]
    record = kernel_record(kernel=spec.name, problem_size=draw(st.integers(2, 2**16)),
                           workers=draw(st.integers(1, 64)), throughput_unit=spec.unit,
                           metrics={"iterations": {"value": draw(st.integers(1, 1000)), "unit": "count"}})
    amount, base, _ = ceiling.implied(record, spec.work(record), spec.unit)
    peak = ceiling.hardware(record)[0 if base == "FLOP/s" else 1]
    fastest = amount / (ceiling.FACTOR * peak)
    times = [fastest + t for t in draw(st.lists(st.floats(1e-4, 100.0), min_size=1, max_size=10))]
    return {**record, "step_times_s": times, "measured_steps": len(times),
            "throughput": spec.work(record) * len(times) / math.fsum(times)}


BOUNDED = ("nodes", "processes_per_node", "workers", "intra_threads", "inter_threads", "gpus",
           "gpus_per_node", "parameter_servers", "repetition", "warmup_steps", "measured_steps",
           "batch_per_process", "global_batch", "image_size", "problem_size", "tile_size",
           "throughput")


@PROPERTY
@given(record=st.one_of(consistent_training(), consistent_kernel()))
def test_consistent_records_are_accepted(record):
    sense.check(record)


@PROPERTY
@given(record=st.one_of(consistent_training(), consistent_kernel()), field=st.sampled_from(BOUNDED),
       above=st.booleans(), by=st.integers(1, 10**6))
def test_a_field_out_of_bounds_is_refused_by_name(record, field, above, by):
    properties = schema()["properties"][field]
    if above:
        value = properties["maximum"] * (1 + by) if field == "throughput" else properties["maximum"] + by
    else:
        value = properties.get("minimum", properties.get("exclusiveMinimum", 0)) - by
    refused({**record, field: value}, field)


@PROPERTY
@given(record=st.one_of(consistent_training(), consistent_kernel()), index=st.integers(0, 29),
       seconds=st.one_of(st.floats(-1e6, 0), st.floats(1e6, 1e300, exclude_min=True)))
def test_a_step_time_out_of_bounds_is_refused_by_name(record, index, seconds):
    times = list(record["step_times_s"])
    index %= len(times)
    times[index] = seconds
    refused({**record, "step_times_s": times}, f"step_times_s/{index}")


@PROPERTY
@given(record=consistent_training(), factor=st.floats(1.001, 1e3), slower=st.booleans())
def test_a_training_throughput_off_its_step_times_is_refused(record, factor, slower):
    """Above the steps' own rate by 0.1% or more, or below it beyond the allowance."""
    total, steps = math.fsum(record["step_times_s"]), len(record["step_times_s"])
    rate = record["global_batch"] * steps / total
    if slower:
        factor *= 1 + sense.WINDOW_SLACK + sense.WINDOW_SLACK_S / total
    reason = refused({**record, "throughput": rate / factor if slower else rate * factor}, "throughput")
    if not record["metrics"]:
        assert ("below" if slower else "above") in reason


@PROPERTY
@given(record=consistent_kernel(), factor=st.floats(1.00001, 1e3), slower=st.booleans())
def test_a_kernel_throughput_off_its_work_is_refused(record, factor, slower):
    throughput = record["throughput"] / factor if slower else record["throughput"] * factor
    refused({**record, "throughput": throughput}, "throughput")


# ---------------------------------------------------------------- the readers

def test_quarantine_and_collection_refuse_a_nonsense_record_alike(tmp_path):
    """The workflow's start (integrity) and the table (collect) read through one check."""
    folder = tmp_path / "results/raw/s/e/c"
    folder.mkdir(parents=True)
    good = train_record()
    (folder / "rep0.json").write_text(json.dumps(good))
    (folder / "rep1.json").write_text(json.dumps({**good, "repetition": 1, "run_id": "c/rep1",
                                                  "throughput": 1e30}))
    frame, errors = collect(sorted(folder.glob("*.json")))
    assert frame["run_id"].tolist() == ["c/rep0"]
    assert len(errors) == 1 and "rep1.json: throughput: 1e+30 is greater than the maximum" in errors[0]
    (message,) = quarantine_invalid(sorted(folder.glob("*.json")), tmp_path / "results")
    assert "rep1.json" in message and not (folder / "rep1.json").exists()
    (reason,) = (tmp_path / "results/quarantine").rglob("*.reason")
    assert reason.read_text() == errors[0] + "\n"
