"""Launching multi-process runs: what a Slurm job step tells its tasks, the local
TF-cluster spawner and its CLI, and the TF cluster of a Slurm job step. (The launcher argv
of each strategy is checked through ``train.command_for`` in test_train.py; real
multi-process runs are in test_distributed.py.)
"""

from __future__ import annotations

import json
import os

import pytest

from archbench.workloads import launch, spawn
from archbench.workloads.training import strategies
from archbench.workloads.training.strategies import ddp
from archbench.workloads.training.tensorflow import cluster as tf_cluster

# The chief lingers so the servers (stopped once it exits) have printed their config.
# One write per line: the tasks share stdout, and an unbuffered print writes the text and
# its newline apart, so two tasks' lines could interleave.
SHOW_CONFIG = ("-c", "import json, os, sys, time; c = json.loads(os.environ['TF_CONFIG']); "
               "os.write(1, (json.dumps(c) + '\\n').encode()); "
               "time.sleep(3 if c['task']['type'] == 'chief' else 0)")


@pytest.mark.parametrize("hostlist, hosts", [
    ("n1", ["n1"]),
    ("n[1-3,7],gpu[08-10]", ["n1", "n2", "n3", "n7", "gpu08", "gpu09", "gpu10"]),
    ("r[1-2]n[01-02]-ib,login", ["r1n01-ib", "r1n02-ib", "r2n01-ib", "r2n02-ib", "login"]),
])
def test_slurm_host_lists_expand_as_scontrol_shows_them(hostlist, hosts):
    assert launch.hostnames(hostlist) == hosts


@pytest.mark.parametrize("hostlist", ["n[1-", "n[a-b]", "n1,,n2", ""])
def test_a_malformed_host_list_is_refused(hostlist):
    with pytest.raises(ValueError, match="not a Slurm host list"):
        launch.hostnames(hostlist)


def test_each_task_of_a_slurm_step_has_its_node_and_port(monkeypatch):
    monkeypatch.setenv("SLURM_STEP_NODELIST", "n[1-2],m5")
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2),1")
    monkeypatch.setenv("ARCHBENCH_PORT_BASE", "25000")
    monkeypatch.setattr(launch, "node_address", lambda node: f"{node}.ib")
    nodes = launch.task_nodes()
    assert nodes == ["n1", "n1", "n2", "n2", "m5"]
    assert launch.task_addresses(nodes) == ["n1.ib:25000", "n1.ib:25001", "n2.ib:25002",
                                            "n2.ib:25003", "m5.ib:25004"]


def test_ddp_meets_on_the_first_node_of_the_step(monkeypatch):
    monkeypatch.delenv(ddp.ADDRESS, raising=False)
    monkeypatch.setenv("SLURM_STEP_NODELIST", "gpu[07-08]")
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("ARCHBENCH_PORT_BASE", "25000")
    monkeypatch.setattr(ddp, "node_address", lambda node: node)
    assert ddp.rendezvous() == ("gpu07", 25000)


def test_spawner_gives_every_task_a_tf_config(capfd):
    assert spawn.spawn(list(SHOW_CONFIG), workers=2, ps=1, chief=True) == 0
    configs = [json.loads(line) for line in capfd.readouterr().out.splitlines() if line.startswith("{")]
    tasks = sorted((c["task"]["type"], c["task"]["index"]) for c in configs)
    assert tasks == [("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1)]
    cluster = configs[0]["cluster"]
    addresses = cluster["chief"] + cluster["worker"] + cluster["ps"]
    assert len(set(addresses)) == 4 and all(a.startswith("127.0.0.1:") for a in addresses)


def test_spawner_stops_servers_once_the_chief_is_done():
    script = ("import json, os, sys, time; t = json.loads(os.environ['TF_CONFIG'])['task']; "
              "time.sleep(0 if t['type'] == 'chief' else 600)")
    assert spawn.spawn(["-c", script], workers=1, ps=1, chief=True, grace_s=2) == 0


def test_spawner_reports_a_failing_worker():
    script = ("import json, os, sys, time; t = json.loads(os.environ['TF_CONFIG'])['task']; "
              "sys.exit(5) if t['index'] == 1 else time.sleep(600)")
    assert spawn.spawn(["-c", script], workers=2, grace_s=2) == 5


def test_spawner_cli_needs_a_command():
    with pytest.raises(SystemExit):
        spawn.main(["spawn", "--workers", "1"])


def test_slurm_job_step_becomes_a_tf_cluster(monkeypatch):
    """Every task gets its own port (TensorFlow's resolver fails on GPU-less nodes and
    reuses ports across nodes); jobs are filled in sorted order: chief, ps, worker."""
    monkeypatch.setenv("SLURM_PROCID", "2")
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "4")
    monkeypatch.setenv("SLURM_STEP_NODELIST", "n[1-2]")
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2)")
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    # cluster_resolver sets TF_CONFIG itself: setenv records that it must go afterwards
    # (a leaked TF_CONFIG would become the cluster of every later run from this process).
    monkeypatch.setenv("TF_CONFIG", "")
    monkeypatch.setattr(launch, "node_address", lambda node: node)
    resolver = tf_cluster.cluster_resolver(chief=True, parameter_servers=1)
    spec = resolver.cluster_spec().as_dict()
    assert spec == {"chief": ["n1:21001"], "ps": ["n1:21002"], "worker": ["n2:21003", "n2:21004"]}
    assert (resolver.task_type, resolver.task_id) == ("worker", 0)
    assert strategies.launch_rank("parameter_server") == 1
    monkeypatch.setenv("TF_CONFIG", "")
    with pytest.raises(launch.LaunchError, match="cannot hold"):
        tf_cluster.cluster_resolver(chief=True, parameter_servers=3)
    monkeypatch.setenv("SLURM_PROCID", "0")
    mirrored = tf_cluster.slurm_tf_config({"worker": 4})
    assert mirrored["task"] == {"type": "worker", "index": 0}
    assert len(set(mirrored["cluster"]["worker"])) == 4


@pytest.mark.parametrize("nodelist, per_node, tasks", [
    # beside the workers: block distribution puts tasks 0, 1 on n1 and 2 on n2
    ("n[1-2]", "2,1", [("worker", 0, "n1"), ("ps", 0, "n1"), ("worker", 1, "n2")]),
    # on a node of its own
    ("n[1-3]", "1(x3)", [("worker", 0, "n1"), ("worker", 1, "n2"), ("ps", 0, "n3")]),
])
def test_synchronous_ps_tasks_are_one_worker_per_node(monkeypatch, nodelist, per_node, tasks):
    """Each node's first task is its worker (task 0 = worker 0 writes the record), the
    others parameter servers, wherever Slurm numbered them."""
    monkeypatch.setenv("SLURM_STEP_NODELIST", nodelist)
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", per_node)
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setattr(launch, "node_address", lambda node: node)
    seen = []
    for rank in range(3):
        monkeypatch.setenv("SLURM_PROCID", str(rank))
        config = tf_cluster.slurm_tf_config({"worker": 2, "ps": 1}, workers_per_node=1)
        task = config["task"]
        seen.append((task["type"], task["index"],
                     config["cluster"][task["type"]][task["index"]].split(":")[0]))
    assert seen == tasks
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "3,0" if nodelist == "n[1-2]" else "1(x3)")
    if nodelist == "n[1-2]":  # three tasks on n1: no worker for n2
        with pytest.raises(launch.LaunchError, match="cannot hold 2 workers"):
            tf_cluster.slurm_tf_config({"worker": 2, "ps": 1}, workers_per_node=1)


def test_node_names_that_resolve_are_kept():
    assert launch.node_address("localhost") == "localhost"


def test_no_tf_config_is_left_behind():
    """Runs after the Slurm-step test in this module: the process environment is clean."""
    assert "TF_CONFIG" not in os.environ
