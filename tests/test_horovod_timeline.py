"""Counting allreduce operations in a Horovod timeline (the format of Horovod 0.28)."""

from __future__ import annotations

import json

from archbench.workloads.training.horovod_timeline import count_allreduces, read_events


def tensor(pid: int, name: str) -> dict:
    return {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}


def allreduce(pids: list[int], collective: str = "MPI_ALLREDUCE", fused: bool = True) -> list[dict]:
    """The events of one response: the tensors of ``pids`` reduced by one collective
    (``fused``) or each by its own, as Horovod's background loop writes them."""
    if not fused:
        return [e for pid in pids for e in allreduce([pid], collective)]
    out = [{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "pid": p, "ts": 0} for p in pids]
    out += [{"ph": "X", "name": "1", "pid": p, "ts": 1, "dur": 0} for p in pids]
    out += [{"ph": "E", "pid": p, "ts": 2} for p in pids]
    out += [{"ph": "B", "name": "ALLREDUCE", "pid": p, "ts": 3} for p in pids]
    if len(pids) > 1:
        out += [{"ph": "B", "name": "MEMCPY_IN_FUSION_BUFFER", "pid": p, "ts": 4} for p in pids]
        out += [{"ph": "E", "pid": p, "ts": 5} for p in pids]
    out += [{"ph": "B", "name": collective, "pid": p, "ts": 6} for p in pids]
    out += [{"ph": "E", "pid": p, "ts": 7} for p in pids]  # collective ends
    out += [{"ph": "E", "pid": p, "ts": 8} for p in pids]  # ALLREDUCE ends
    return out


GRADIENTS = [tensor(1, "HorovodAllreduce_grad_kernel_0"), tensor(2, "HorovodAllreduce_grad_bias_0"),
             tensor(3, "HorovodAllreduce_grad_dense_0"), tensor(4, "archbench_barrier")]


def test_fused_batches_count_once_and_tensors_each():
    step = allreduce([1, 2]) + allreduce([3])  # kernel+bias fused, dense alone
    events = GRADIENTS + step + allreduce([4]) + step
    count = count_allreduces(events, skip="archbench_barrier")
    assert (count.tensors, count.collectives) == (6, 4)
    assert count_allreduces(events) == type(count)(7, 5)  # the barrier counted too


def test_without_fusion_every_tensor_is_one_allreduce():
    events = GRADIENTS + allreduce([1, 2, 3], fused=False) + allreduce([1, 2, 3], collective="GLOO_ALLREDUCE")
    count = count_allreduces(events)
    assert (count.tensors, count.collectives) == (6, 4)


def test_other_collectives_are_not_allreduces():
    gather = [{"ph": "B", "name": "ALLGATHER", "pid": 5, "ts": 0},
              {"ph": "B", "name": "MPI_ALLGATHER", "pid": 5, "ts": 1},
              {"ph": "E", "pid": 5, "ts": 2}, {"ph": "E", "pid": 5, "ts": 3}]
    assert count_allreduces(GRADIENTS + gather + allreduce([1])).collectives == 1


def test_reads_the_open_array_horovod_leaves_while_writing(tmp_path):
    events = GRADIENTS + allreduce([1, 2])
    body = ",\n".join(json.dumps(e) for e in events)
    (tmp_path / "open.json").write_text("[\n" + body + ",\n")
    (tmp_path / "closed.json").write_text("[\n" + body + "\n]\n")
    (tmp_path / "empty.json").write_text("")
    assert read_events(tmp_path / "open.json") == events == read_events(tmp_path / "closed.json")
    assert read_events(tmp_path / "empty.json") == []


def test_settled_events_waits_for_the_writer(tmp_path):
    import threading
    import time

    from archbench.workloads.training.horovod_timeline import settled_events
    path = tmp_path / "timeline.json"
    events = GRADIENTS + allreduce([1, 2])

    def write_slowly():  # the writer thread, still going when the reader starts
        with open(path, "w") as f:
            f.write("[\n")
            for e in events:
                f.write(json.dumps(e) + ",\n")
                f.flush()
                time.sleep(0.02)

    writer = threading.Thread(target=write_slowly)
    writer.start()
    time.sleep(0.01)
    assert settled_events(path, interval_s=0.1) == events
    writer.join()
    assert settled_events(tmp_path / "missing.json", timeout_s=0.1) == []


class FailingTimeline:
    """Horovod's timeline calls, failing the way a broken setup would."""

    def __init__(self, start_error: bool):
        self.start_error = start_error

    def start_timeline(self, path):
        if self.start_error:
            raise ValueError("Set HOROVOD_TIMELINE=DYNAMIC to enable dynamic timeline usage.")
        with open(path, "w") as f:
            f.write('[\n{"ph": "B", "name": ')  # cut off mid-event

    def stop_timeline(self):
        pass


def test_a_failed_count_never_costs_the_measurement(monkeypatch, capsys):
    """The count is extra: a timeline that cannot start or be read gives no count, and the
    run (whose record the caller writes next) goes on."""
    import itertools

    from archbench.workloads.training.tensorflow.backends import Horovod as HorovodBackend
    monkeypatch.setenv("HOROVOD_TIMELINE", "DYNAMIC")
    backend = object.__new__(HorovodBackend)
    backend.rank, backend._barrier = 0, lambda: None
    batches = itertools.repeat((None, None))
    for start_error in (True, False):
        backend.hvd = FailingTimeline(start_error)
        assert backend._count_allreduces(lambda *batch: 1.0, batches) is None
        assert "no allreduce count" in capsys.readouterr().err
