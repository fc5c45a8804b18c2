"""Where the synchronous parameter-server updates put their variables: round robin in
creation order (replica_device_setter's default) or greedily by size, the way CSCS 2017
Fig. 4 contrasts them. Graph construction only, no cluster."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import json, sys
import tensorflow as tf
from archbench.workloads.training.tensorflow.models import build_model
from archbench.workloads.training.tensorflow.sync_ps import ps_device_setter
tf.compat.v1.disable_eager_execution()
with tf.compat.v1.device(ps_device_setter(tf, 2, sys.argv[1], worker_device="/job:worker/task:0")):
    model = build_model("small_cnn", 32, 10)
    logits = model(tf.zeros((1, 32, 32, 3)))
print(json.dumps([[v.name, v.device, int(v.shape.num_elements())] for v in model.variables]
                 + [["logits", logits.device, 0]]))
"""


def placed(placement: str) -> list:
    import json
    out = subprocess.run([sys.executable, "-c", SCRIPT, placement], capture_output=True,
                         text=True, check=True, timeout=120).stdout
    return json.loads(out.strip().splitlines()[-1])


def ps_loads(rows: list) -> list[int]:
    loads = [0, 0]
    for _, device, size in rows[:-1]:
        loads[int(device.split("/task:")[1][0])] += 4 * size
    return loads


def test_round_robin_alternates_and_greedy_balances_bytes():
    rr, greedy = placed("round_robin"), placed("greedy")
    # small_cnn: conv 3x3x3x16 + 16, conv 3x3x16x32 + 32, dense 32x10 + 10
    assert [size for _, _, size in rr[:-1]] == [432, 16, 4608, 32, 320, 10]
    assert [d.split("/task:")[1][0] for _, d, _ in rr[:-1]] == list("010101")
    assert all(d.startswith("/job:ps/") for _, d, _ in rr[:-1] + greedy[:-1])
    # computation stays on the worker
    assert rr[-1][1].startswith("/job:worker/task:0") and greedy[-1][1].startswith("/job:worker/task:0")
    # greedy: each variable to the server with the fewest bytes so far
    assert [d.split("/task:")[1][0] for _, d, _ in greedy[:-1]] == list("011000")
    assert max(ps_loads(greedy)) < max(ps_loads(rr))


def test_an_unknown_placement_is_refused():
    from archbench.workloads.launch import LaunchError
    from archbench.workloads.training.tensorflow.sync_ps import ps_device_setter
    with pytest.raises(LaunchError, match="unknown variable placement 'random'"):
        ps_device_setter(None, 2, "random", worker_device="/job:worker/task:0")
