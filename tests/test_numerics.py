"""Precision, fp32 math mode and graph: three settings, each one declaration and an axis of
every training experiment type in both frameworks; what a framework runs on which device
and strategy is its registry entry's (``runs``, ``runs_with``), and the rest is refused at
plan time and on the command line in one line; a real bf16 run and a real compiled run per
framework write ok records stating what was asked, the loss of every measured step and, when
compiled, the compile time apart from the window; configurations at the defaults keep
their ids."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from archbench.core.fields import config_id
from archbench.core.record import read_record
from archbench.core.validate import ConfigError
from archbench.plan.campaign import load_campaign
from archbench.workloads.training import benchmark as train
from archbench.workloads.training import frameworks, settings

SYSTEM = {"arch": "x86_64", "sockets": 1, "cores_per_socket": 2, "nodes": 2, "launcher": "local",
          "vendor_library": "onednn", "gpus_per_node": 1}
NUMERICS = {"precision": ("fp32", "bf16", "fp16"), "math_mode": ("strict", "bf16", "tf32"),
            "graph": ("eager", "compiled")}


def plan(**experiment) -> list[dict]:
    experiment = {"type": "batch_sweep", "models": ["small_cnn"], "batch_per_process": [4], **experiment}
    config = {"campaign": "t", "systems": ["s"], "system_definitions": {"s": SYSTEM},
              "defaults": {"repetitions": 1, "image_size": 16, "steps": 2, "warmup_steps": 1},
              "experiments": {"e": experiment}}
    return load_campaign(config).measurements


def test_each_setting_is_one_declared_axis_the_registries_bound():
    declared = {s.name: s for s in settings.axes()}
    for name, values in NUMERICS.items():
        s = declared[name]
        assert (s.axis, s.planned, s.choices, s.default) == (name, name, values, values[0])
        assert s.identity and s.recorded and s.probe and s.omit_default
    for chosen in frameworks.FRAMEWORKS.values():  # every value a framework runs is a choice
        for name, by_device in chosen.runs.items():
            assert all(set(v) <= set(NUMERICS[name]) for v in by_device.values())


def test_a_sweep_plans_what_each_framework_runs_and_leaves_the_rest_out():
    ms = plan(framework=["tensorflow", "pytorch"], device=["cpu", "gpu"],
              **{name: list(values) for name, values in NUMERICS.items()})
    planned = {(m["framework"], m.get("device", "cpu"), m.get("precision", "fp32"),
                m.get("math_mode", "strict"), m.get("graph", "eager")) for m in ms}
    for framework in ("tensorflow", "pytorch"):
        for graph in NUMERICS["graph"]:
            cpu = {(p, mm) for f, d, p, mm, g in planned if (f, d, g) == (framework, "cpu", graph)}
            gpu = {(p, mm) for f, d, p, mm, g in planned if (f, d, g) == (framework, "gpu", graph)}
            # fp16 and tf32 only on a GPU, bf16 math only on a CPU, a math mode only in fp32
            assert cpu == {("fp32", "strict"), ("bf16", "strict"), ("fp32", "bf16")}
            assert gpu == {("fp32", "strict"), ("bf16", "strict"), ("fp16", "strict"), ("fp32", "tf32")}
    ids = {m["config_id"] for m in ms}
    assert len(ids) == len(ms) == 2 * 2 * 7
    assert "small_cnn_b4_N1_p1_t2_i1_vlon_synthetic_single" in ids  # the defaults: the old id
    assert "small_cnn_b4_N1_p1_t2_i1_vlon_synthetic_single_bf16_compiled_pytorch" in ids
    assert "small_cnn_b4_N1_p1_t2_i1_vlon_synthetic_single_mathbf16" in ids
    default = next(m for m in ms if m["config_id"].endswith("_single"))
    assert not {"precision", "math_mode", "graph"} & set(default)  # hashes stay, too
    bf16 = next(m for m in ms if m["config_id"].endswith("_single_bf16_compiled_pytorch"))
    argv = train.worker_argv(bf16, SYSTEM)
    assert argv[argv.index("--precision") + 1] == "bf16" and argv[argv.index("--graph") + 1] == "compiled"
    assert "--math-mode" not in argv


@pytest.mark.parametrize("experiment, says", [
    (dict(precision=["fp16"]), "precision: framework tensorflow has no precision 'fp16' on cpu (it has: fp32, bf16)"),
    (dict(math_mode=["tf32"], framework=["pytorch"]), "math_mode: framework pytorch has no math_mode 'tf32' on cpu"),
    (dict(math_mode=["bf16"], device=["gpu"]), "math_mode: framework tensorflow has no math_mode 'bf16' on gpu"),
    (dict(precision=["bf16"], math_mode=["bf16"]), "math_mode bf16 concerns fp32 tensors: it needs precision fp32"),
    (dict(math_mode=["bf16"], vendor_library=["off"]), "it needs the vendor library on"),
    (dict(type="node_scaling", graph=["compiled"], strategies=["horovod"]),
     "graph: framework tensorflow runs graph 'compiled' only with strategy single, not horovod"),
])
def test_what_a_framework_or_device_cannot_run_is_refused_at_plan_time_in_one_line(experiment, says):
    with pytest.raises(ConfigError) as refused:
        plan(**experiment)
    assert says in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("bad, says", [
    (["--precision", "fp16"], "framework pytorch has no precision 'fp16' on cpu"),
    (["--math-mode", "tf32"], "framework pytorch has no math_mode 'tf32' on cpu"),
    (["--precision", "bf16", "--math-mode", "bf16"], "needs precision fp32, not bf16"),
    (["--graph", "compiled", "--strategy", "ddp"], "runs graph 'compiled' only with strategy single"),
])
def test_the_command_line_refuses_them_in_one_line(bad, says, capsys):
    with pytest.raises(SystemExit) as done:
        train.parse_args(["--framework", "pytorch", "--model", "small_cnn", "--batch-per-process", "4",
                          *bad, "--output", "x"])
    assert done.value.code == 2
    assert says in capsys.readouterr().err.strip().splitlines()[-1]


def test_the_id_names_a_value_only_off_its_default():
    base = dict(kind="train", model="m", batch_per_process=1, nodes=1, processes_per_node=1,
                intra_threads=1, inter_threads=1, vendor_library_enabled=True, data="synthetic",
                strategy="single")
    assert config_id({**base, "precision": "fp32", "math_mode": "strict", "graph": "eager"}) == config_id(base)
    assert config_id({**base, "math_mode": "tf32", "graph": "compiled"}).endswith("_single_mathtf32_compiled")


# ------------------------------------------------------------------ real runs

TINY = ["--model", "small_cnn", "--batch-per-process", "4", "--image-size", "8", "--num-classes", "10",
        "--warmup-steps", "1", "--steps", "3", "--intra-threads", "1", "--vendor-probe", "off"]


def train_process(out, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "archbench.train", *TINY, *extra, "--output", str(out)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("framework", ["tensorflow", "pytorch"])
@pytest.mark.parametrize("numerics", [("--precision", "bf16"), ("--graph", "compiled")],
                         ids=["bf16", "compiled"])
def test_a_real_run_states_what_it_asked_and_every_step_loss(tmp_path, framework, numerics):
    done = train_process(tmp_path / "r.json", "--framework", framework, *numerics)
    assert done.returncode == 0, done.stderr[-2000:]
    r = read_record(tmp_path / "r.json")
    name, value = numerics[0][2:].replace("-", "_"), numerics[1]
    assert r["status"] == "ok" and r[name] == value
    assert {k: r[k] for k in NUMERICS if k != name} == {k: v[0] for k, v in NUMERICS.items() if k != name}
    assert len(r["losses"]) == 3 and all(x is not None for x in r["losses"])
    assert (r["loss_first"], r["loss_last"]) == (r["losses"][0], r["losses"][-1])
    if value == "compiled":  # the first step compiled: timed apart, neither warm-up nor window
        assert r["metrics"]["compile_s"]["value"] > 0 and "_compiled" in r["config_id"]
        assert len(r["step_times_s"]) == 3
    else:
        assert "compile_s" not in r["metrics"]


def test_a_compiled_run_without_a_cxx_compiler_is_a_failure_record_saying_so(tmp_path):
    done = train_process(tmp_path / "r.json", "--framework", "pytorch", "--graph", "compiled",
                         env={"CXX": str(tmp_path / "no-such-g++")})
    assert done.returncode == train.EXIT_BENCHMARK_FAILED
    r = read_record(tmp_path / "r.json")
    assert r["status"] == "failed" and r["graph"] == "compiled"
    assert "no working C++ compiler" in r["reason"]
