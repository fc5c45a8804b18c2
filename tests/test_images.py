"""The container path as the workflow drives it: image builds planned per system, the exact
build command, benchmarks wrapped in `<runtime> exec` inside the launcher, and the image
digest carried into every record. (No Apptainer exists here: a real build and exec are
verified only on a site; see README.)"""

from __future__ import annotations

import hashlib
import sys

import pytest
from conftest import snakemake

from archbench import provenance, run
from archbench.campaign import load_campaign

SITE = {"arch": "x86_64", "nodes": 2, "sockets": 1, "cores_per_socket": 4,
        "memory_per_node_gb": 8, "partition": "cpu", "launcher": "srun",
        "container_runtime": "apptainer", "image": "x86_64-onednn",
        "vendor_library": "onednn", "data_dir": "/data/tfrecords"}


def campaign(runtime: str):
    cfg = {"campaign": "site", "systems": ["site"],
           "system_definitions": {"site": {**SITE, "container_runtime": runtime}},
           "experiments": {"t": {"type": "thread_scaling", "models": ["small_cnn"],
                                 "batch_sizes": [4], "threads": [2], "repetitions": 1}}}
    return load_campaign(cfg)


@pytest.mark.parametrize("runtime", ["apptainer", "singularity"])
def test_benchmark_runs_inside_the_image(tmp_path, monkeypatch, runtime):
    monkeypatch.chdir(tmp_path)
    image = tmp_path / "results/images/x86_64-onednn.sif"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"SIF" * 1000)
    digest = hashlib.sha256(image.read_bytes()).hexdigest()
    c = campaign(runtime)
    argv = run.worker_command(c.measurements[0], c.systems["site"])
    at = argv.index(runtime)
    assert argv[at:at + 2] == [runtime, "exec"]
    assert argv[argv.index("--bind") + 1] == "/data/tfrecords"
    launched = argv[0] in ("srun", "mpirun")
    assert ("--cleanenv" in argv) is not launched  # ranks keep their per-task variables
    assert f"ARCHBENCH_IMAGE_SHA256={digest}" in argv
    assert "results/images/x86_64-onednn.sif" in argv
    interpreter = argv.index("python3")
    assert argv[interpreter + 1:interpreter + 3] == ["-m", "archbench.train"]
    assert sys.executable not in argv  # the host interpreter never runs the benchmark


def test_host_runtime_runs_host_python():
    c = campaign("none")
    argv = run.worker_command(c.measurements[0], c.systems["site"])
    assert argv[0] == sys.executable and "exec" not in argv


def test_record_carries_the_image_digest(monkeypatch):
    monkeypatch.setenv("ARCHBENCH_IMAGE", "results/images/x86_64-onednn.sif")
    monkeypatch.setenv("ARCHBENCH_IMAGE_SHA256", "ab" * 32)
    fields = provenance.host_fields()
    assert fields["image"] == "results/images/x86_64-onednn.sif"
    assert fields["image_sha256"] == "ab" * 32


@pytest.mark.workflow
@pytest.mark.parametrize("runtime", ["apptainer", "singularity"])
def test_dry_run_plans_the_image_build_before_the_benchmarks(workflow_copy, runtime):
    system = workflow_copy / "config/systems/local.yaml"
    system.write_text(system.read_text().replace("container_runtime: none",
                                                 f"container_runtime: {runtime}\nimage: x86_64-onednn"))
    proc = snakemake(workflow_copy, "-n", "-p", "--profile", "profiles/local",
                     "--configfile", "tiny.yaml")
    out = proc.stdout + proc.stderr
    assert (f"{runtime} build --fakeroot results/images/x86_64-onednn.sif "
            "containers/x86_64-onednn.def") in out
    assert "rule build_image" in out and "results/images/x86_64-onednn.sha256" in out
