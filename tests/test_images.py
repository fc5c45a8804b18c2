"""The container path as the workflow drives it: image builds planned per system, the exact
build command, benchmarks wrapped in `<runtime> exec` inside the launcher, and the image
digest carried into every record; prebuilt images by path or URI. (No Apptainer exists
here: its build, pull and exec are checked as command lines; real builds and ch-run runs
are tests/test_image_build.py.)"""

from __future__ import annotations

import hashlib
import re
import sys

import pytest
from conftest import snakemake

from archbench.core import provenance
from archbench.execute import supervisor as run
from archbench.plan.campaign import load_campaign

SITE = {"arch": "x86_64", "nodes": 2, "sockets": 1, "cores_per_socket": 4,
        "memory_per_node_gb": 8, "partition": "cpu", "launcher": "srun",
        "container_runtime": "apptainer", "image": "x86_64-onednn",
        "vendor_library": "onednn", "data_dir": "/data/tfrecords"}


def campaign(runtime: str):
    cfg = {"campaign": "site", "systems": ["site"],
           "system_definitions": {"site": {**SITE, "container_runtime": runtime}},
           "experiments": {"t": {"type": "thread_scaling", "models": ["small_cnn"],
                                 "batch_per_process": [4], "threads": [2], "repetitions": 1}}}
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


@pytest.mark.parametrize("device, nv", [("gpu", True), ("cpu", False), (None, False)])
def test_gpu_measurement_gets_the_host_driver(tmp_path, monkeypatch, device, nv):
    monkeypatch.chdir(tmp_path)
    image = tmp_path / "results/images/x86_64-onednn.sif"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"SIF")
    c = campaign("apptainer")
    argv = run.worker_command({**c.measurements[0], "device": device}, c.systems["site"])
    assert ("--nv" in argv) is nv
    if nv:
        assert argv.index("--nv") < argv.index("results/images/x86_64-onednn.sif")


def test_single_process_gpu_run_keeps_the_jobs_gpus_despite_cleanenv(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    image = tmp_path / "results/images/x86_64-onednn.sif"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"SIF")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # what Slurm bound the job to
    c = campaign("apptainer")
    single = {**c.measurements[0], "device": "gpu"}
    argv = run.worker_command(single, c.systems["site"])
    assert "--cleanenv" in argv and "CUDA_VISIBLE_DEVICES=3" in argv
    cpu = run.worker_command({**single, "device": "cpu"}, c.systems["site"])
    assert not any(word.startswith("CUDA_VISIBLE_DEVICES=") for word in cpu)


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


# ---------------------------------------------------------------- prebuilt images

def prebuilt(runtime: str, uri: str):
    site = {k: v for k, v in SITE.items() if k != "image"}
    cfg = {"campaign": "site", "systems": ["site"],
           "system_definitions": {"site": {**site, "container_runtime": runtime, "image_uri": uri}},
           "experiments": {"t": {"type": "thread_scaling", "models": ["small_cnn"],
                                 "batch_per_process": [4], "threads": [2], "repetitions": 1}}}
    return cfg


def test_prebuilt_image_by_path_runs_as_is_and_is_hashed(tmp_path):
    image = tmp_path / "site-images/tf.sif"
    image.parent.mkdir()
    image.write_bytes(b"prebuilt" * 1000)
    # a digest file beside a user's image is not the workflow's: the image is hashed
    image.with_suffix(".sha256").write_text("0" * 64 + "\n")
    c = load_campaign(prebuilt("singularity", str(image)))
    argv = run.worker_command(c.measurements[0], c.systems["site"])
    assert argv[argv.index("singularity"):][:2] == ["singularity", "exec"]
    assert str(image) in argv
    assert f"ARCHBENCH_IMAGE_SHA256={hashlib.sha256(image.read_bytes()).hexdigest()}" in argv
    assert f"ARCHBENCH_IMAGE={image}" in argv


def test_image_and_image_uri_are_exclusive_one_line(tmp_path):
    from archbench.core.validate import ConfigError
    cfg = prebuilt("apptainer", "docker://site/tf:1")
    cfg["system_definitions"]["site"]["image"] = "x86_64-onednn"
    with pytest.raises(ConfigError) as err:
        load_campaign(cfg)
    assert str(err.value).startswith("system_definitions.site.image_uri: exclusive with image")
    # from a system file, the message names the file
    systems = tmp_path / "systems"
    systems.mkdir()
    (systems / "site.yaml").write_text("name: site\narch: x86_64\ncores_per_socket: 2\ncontainer_runtime: charliecloud\n"
                                       "image_uri: oras://site/tf:1\n")
    cfg = {"campaign": "c", "systems": ["site"], "experiments": prebuilt("x", "y")["experiments"]}
    with pytest.raises(ConfigError) as err:
        load_campaign(cfg, system_dir=systems)
    message = str(err.value)
    assert message.startswith("config/systems/site.yaml: image_uri: charliecloud cannot pull oras://")
    assert "\n" not in message


def test_missing_prebuilt_image_file_is_one_line(tmp_path):
    from archbench.core.validate import ConfigError
    from archbench.plan.campaign import check_inputs_exist
    c = load_campaign(prebuilt("apptainer", str(tmp_path / "absent.sif")))
    with pytest.raises(ConfigError, match=r"^system_definitions\.site\.image_uri: no image file .*absent\.sif$"):
        check_inputs_exist(c)


@pytest.mark.workflow
@pytest.mark.parametrize("runtime, uri, command", [
    ("apptainer", "docker://site/archbench:1.0", "apptainer pull results/images/pulled-archbench_1.0-"),
    ("singularity", "library://site/default/archbench:1.0", "singularity pull results/images/pulled-archbench_1.0-"),
    ("charliecloud", "docker://site/archbench:1.0", "ch-image pull site/archbench:1.0 && ch-convert -i ch-image -o squash site/archbench:1.0 results/images/pulled-archbench_1.0-"),
])
def test_dry_run_pulls_a_uri_once_and_builds_nothing(workflow_copy, runtime, uri, command):
    system = workflow_copy / "config/systems/local.yaml"
    system.write_text(system.read_text().replace("container_runtime: none",
                                                 f"container_runtime: {runtime}\nimage_uri: {uri}"))
    proc = snakemake(workflow_copy, "-n", "-p", "--profile", "profiles/local",
                     "--configfile", "tiny.yaml")
    out = proc.stdout + proc.stderr
    assert command in out
    assert out.count("rule pull_image") == 1  # one image, pulled once for all its runs
    pulled = re.search(r"results/images/pulled-archbench_1\.0-\w+\.s\w+", command + out).group()
    runs = out.count("rule run_measurement")
    assert runs > 0 and out.count(f"input: {pulled}") == runs  # every run takes the pulled image
    assert "rule build_image" not in out


@pytest.mark.workflow
def test_dry_run_with_an_image_path_neither_builds_nor_pulls(workflow_copy, tmp_path):
    image = tmp_path / "prebuilt.sqfs"
    image.write_bytes(b"hsqs" + b"\0" * 100)
    system = workflow_copy / "config/systems/local.yaml"
    system.write_text(system.read_text().replace(
        "container_runtime: none", f"container_runtime: charliecloud\nimage_uri: {image}"))
    out = snakemake(workflow_copy, "-n", "--profile", "profiles/local", "--configfile", "tiny.yaml").stdout
    assert "rule run_measurement" in out
    assert "build_image" not in out and "pull_image" not in out
