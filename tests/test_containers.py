"""Unit tests for archbench.plan.containers against the shipped definition files."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from archbench.plan import containers as c

REPO = Path(__file__).resolve().parents[1]
DEFS = sorted((REPO / "containers").glob("*.def"))
# archbench's own runtime dependencies, installed in every image beside the package
RUNTIME_DEPS = ("jsonschema", "fastjsonschema", "pyyaml")


def shipped(stem: str) -> c.Definition:
    return c.parse_definition(REPO / "containers" / f"{stem}.def")


def pyproject_pins() -> dict[str, str]:
    """Exact (==) pins of pyproject's dependencies, by normalised name."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return {c._normalise(d.split("==")[0]): d.split("==")[1] for d in deps if "==" in d}


# the images with PyTorch beside TensorFlow, one Horovod for both (built by the image tests)
TORCH_CPU_IMAGES = ("x86_64-onednn", "aarch64-acl")
TORCH_STACK = ("torch", "torchvision", "timm", "horovod")
# Horovod 0.28.1's CMake files compile it as C++14: 17 overall (upstream's later fix), and 20
# for its PyTorch extension (torch 2.14's headers refuse anything older)
CXX_PATCHES = {"CMakeLists.txt": "17", "horovod/torch/CMakeLists.txt": "20"}


def test_every_architecture_ships_a_definition():
    names = {d.stem for d in DEFS}
    assert {"x86_64-onednn", "x86_64-cuda", "x86_64-cuda-pytorch", "aarch64-acl", "aarch64-armpl",
            "ppc64le-vanilla"} <= names


@pytest.mark.parametrize("path", DEFS, ids=lambda p: p.stem)
def test_shipped_definition_is_valid_and_matches_its_name(path):
    d = c.validate_definition(path)
    arch, variant = path.stem.split("-", 1)
    assert d.labels["arch"] == arch
    assert d.labels["variant"] == variant
    assert d.header["Bootstrap"] == "docker"
    assert d.sections["runscript"].strip()
    # the benchmark workers import inside the image
    assert "import archbench.train, archbench.workloads.kernels.cli" in d.sections["test"]
    assert "pip install --no-cache-dir --no-deps /opt/archbench" in d.sections["post"]
    pins = c.pinned_packages(d)
    assert pins.get("horovod") == d.labels.get("horovod")  # ppc64le-debian: none (Debian has none)
    # every framework installed is imported by %test and stated by a label
    assert ("torch" in pins) is ("import torch" in d.sections["test"]) is ("torch" in d.labels)
    tf = pins.get("tensorflow") or pins.get("tensorflow-cpu")
    assert (tf is not None) is ("import tensorflow" in d.sections["test"]) is ("tensorflow" in d.labels)
    if tf is not None:
        assert d.environment.get("TF_USE_LEGACY_KERAS") == "1"
        # Legacy Keras must match TensorFlow 2.16+; TF 2.14 bundles Keras 2.
        if tuple(int(x) for x in tf.split(".")[:2]) >= (2, 16):
            assert pins["tf-keras"].split(".")[:2] == tf.split(".")[:2]


def test_x86_pins_match_the_verified_stack():
    d = c.parse_definition(next(p for p in DEFS if p.stem == "x86_64-onednn"))
    assert c.pinned_packages(d) == {
        "tensorflow-cpu": "2.18.1", "tf-keras": "2.18.0", "torch": "2.14.1",
        "torchvision": "0.29.1", "timm": "1.0.31", "horovod": "0.28.1"}
    assert d.environment["TF_ENABLE_ONEDNN_OPTS"] == "1"


def test_every_pytorch_image_pins_one_pytorch_stack():
    """CPU and GPU, x86_64 and aarch64 numbers compare one torch, torchvision, timm and
    Horovod (the GPU image's torch is the CUDA build of the same version)."""
    stacks = {stem: {k: v for k, v in c.pinned_packages(shipped(stem)).items() if k in TORCH_STACK}
              for stem in (*TORCH_CPU_IMAGES, "x86_64-cuda-pytorch")}
    assert all(set(s) == set(TORCH_STACK) for s in stacks.values()), stacks
    assert len({tuple(sorted(s.items())) for s in stacks.values()}) == 1, stacks
    for stem in (*TORCH_CPU_IMAGES, "x86_64-cuda-pytorch"):
        assert {k: shipped(stem).labels[k] for k in TORCH_STACK} == stacks[stem]


def test_pytorch_images_pin_pyprojects_pytorch():
    expected = {k: v for k, v in pyproject_pins().items() if k in ("torch", "torchvision", "timm")}
    assert set(expected) == {"torch", "torchvision", "timm"}
    for stem in (*TORCH_CPU_IMAGES, "x86_64-cuda-pytorch"):
        pins = c.pinned_packages(shipped(stem))
        assert {k: pins[k] for k in expected} == expected, stem


def check_one_horovod_for_both_frameworks(d: c.Definition) -> None:
    """Horovod built once, with TensorFlow and PyTorch, from its sdist patched to C++17 (its
    PyTorch extension to C++20), each patch checked, and both frameworks' bindings checked
    by %test."""
    env = c.install_env(d, "horovod")
    for flag in ("TENSORFLOW", "PYTORCH", "MPI", "GLOO"):
        assert env.get(f"HOROVOD_WITH_{flag}") == "1" and f"HOROVOD_WITHOUT_{flag}" not in env, env
    post = d.sections["post"]
    assert post.count("pip install --no-cache-dir --no-build-isolation /tmp/horovod/horovod-0.28.1") == 1
    assert "--no-binary :all: --no-deps horovod==0.28.1" in post
    for path, standard in CXX_PATCHES.items():
        assert re.search(rf"sed -i 's/.*CMAKE_CXX_STANDARD 14.*/.*CMAKE_CXX_STANDARD {standard}.*' "
                         rf"{re.escape(path)}$", post, re.M), path
        assert re.search(rf"^ *grep -q '.*set\(CMAKE_CXX_STANDARD {standard}\)\$' {re.escape(path)}$",
                         post, re.M), path
    assert "import horovod.tensorflow as hvd" in d.sections["test"]
    assert "import horovod.torch as hvd" in d.sections["test"]


@pytest.mark.parametrize("stem", TORCH_CPU_IMAGES)
def test_cpu_images_build_one_horovod_for_tensorflow_and_pytorch(stem):
    check_one_horovod_for_both_frameworks(shipped(stem))


@pytest.mark.parametrize("old, new", [
    ("HOROVOD_WITH_PYTORCH=1", "HOROVOD_WITHOUT_PYTORCH=1"),
    ("torch/CMakeLists.txt\n", "torch/CMakeLists.txt.orig\n"),  # patched the wrong file
    ("    grep -q '^set(CMAKE_CXX_STANDARD 17)$' CMakeLists.txt\n", ""),  # a patch left unchecked
])
def test_a_horovod_without_pytorch_or_a_newer_cxx_fails_the_check(tmp_path, old, new):
    path = tmp_path / "x86_64-onednn.def"
    text = (REPO / "containers/x86_64-onednn.def").read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(AssertionError):
        check_one_horovod_for_both_frameworks(c.parse_definition(path))


def test_cpu_image_tensorflow_is_pyprojects():
    assert c.pinned_packages(shipped("x86_64-onednn"))["tensorflow-cpu"] == pyproject_pins()["tensorflow-cpu"]


def check_cuda_matches_cpu(gpu_def: c.Definition, cpu_def: c.Definition) -> None:
    """GPU and CPU numbers compare one TensorFlow: the CUDA build of the CPU image's version
    (and of pyproject's), with the same tf_keras and Horovod."""
    cpu, gpu = c.pinned_packages(cpu_def), c.pinned_packages(gpu_def)
    assert gpu["tensorflow"] == cpu["tensorflow-cpu"] == pyproject_pins()["tensorflow-cpu"]
    assert (gpu["tf-keras"], gpu["horovod"]) == (cpu["tf-keras"], cpu["horovod"])
    assert "tensorflow-cpu" not in gpu  # the CPU wheel beside the CUDA one would shadow it
    assert f"'tensorflow[and-cuda]=={gpu['tensorflow']}'" in gpu_def.sections["post"]


def test_cuda_image_pins_the_cpu_images_tensorflow():
    check_cuda_matches_cpu(shipped("x86_64-cuda"), shipped("x86_64-onednn"))


@pytest.mark.parametrize("old, new", [
    ("'tensorflow[and-cuda]==2.18.1'", "'tensorflow[and-cuda]==2.18.0'"),
    ("'tensorflow[and-cuda]==2.18.1'", "tensorflow==2.18.1"),  # the CUDA libraries left out
    ("horovod==0.28.1", "horovod==0.28.0"),
])
def test_cuda_image_drifting_from_the_cpu_image_fails_the_check(tmp_path, old, new):
    path = tmp_path / "x86_64-cuda.def"
    path.write_text((REPO / "containers/x86_64-cuda.def").read_text().replace(old, new))
    with pytest.raises(AssertionError):
        check_cuda_matches_cpu(c.parse_definition(path), shipped("x86_64-onednn"))


def test_cuda_image_builds_horovod_with_nccl_and_reports_the_cuda_stack():
    d = c.validate_definition(REPO / "containers/x86_64-cuda.def")
    env = c.install_env(d, "horovod")
    assert env["HOROVOD_GPU_OPERATIONS"] == "NCCL"
    assert env["HOROVOD_WITH_TENSORFLOW"] == env["HOROVOD_WITH_MPI"] == "1"
    # NCCL from the wheel TensorFlow pulls in, so TensorFlow and Horovod load the same one
    assert env["HOROVOD_NCCL_HOME"] == "$NCCL" and env["HOROVOD_NCCL_LINK"] == "SHARED"
    assert "NCCL=/opt/venv/lib/python3.11/site-packages/nvidia/nccl" in d.sections["post"]
    assert "nvidia/nccl/lib" in d.environment["LD_LIBRARY_PATH"]
    assert {"cuda", "cudnn", "nccl"} <= set(d.labels) and d.labels["python"] == "3.11"
    test = d.sections["test"]
    assert "tf.sysconfig.get_build_info()" in test and "is_cuda_build" in test
    assert "hvd.nccl_built()" in test
    assert f'assert v == "{d.labels["nccl"]}"' in test  # the NCCL label is what is installed
    assert "p.accelerator_fields()" in test


def test_cuda_pytorch_image_builds_one_horovod_with_nccl_and_reports_the_cuda_stack():
    d = c.validate_definition(REPO / "containers/x86_64-cuda-pytorch.def")
    pins = c.pinned_packages(d)
    assert "tensorflow" not in pins and "tensorflow-cpu" not in pins  # one CUDA stack, one NCCL
    env = c.install_env(d, "horovod")
    assert env["HOROVOD_GPU_OPERATIONS"] == "NCCL"
    assert env["HOROVOD_WITH_PYTORCH"] == env["HOROVOD_WITH_MPI"] == env["HOROVOD_WITH_GLOO"] == "1"
    # NCCL from the wheel torch pulls in, so torch and Horovod load the same one
    assert env["HOROVOD_NCCL_HOME"] == "$NCCL" and env["HOROVOD_NCCL_LINK"] == "SHARED"
    post = d.sections["post"]
    assert "NCCL=/opt/venv/lib/python3.11/site-packages/nvidia/nccl" in post
    assert "apt-get purge -y --allow-change-held-packages libnccl2 libnccl-dev" in post
    assert "nvidia/nccl/lib" in d.environment["LD_LIBRARY_PATH"]
    assert post.count("pip install --no-cache-dir --no-build-isolation /tmp/horovod/horovod-0.28.1") == 1
    for path, standard in CXX_PATCHES.items():
        assert re.search(rf"^ *grep -q '.*set\(CMAKE_CXX_STANDARD {standard}\)\$' {re.escape(path)}$",
                         post, re.M), path
    # one list of compute capabilities: the label's, torch's (checked by %test), Horovod's kernels'
    capabilities = [x.replace(".", "") for x in d.labels["cuda_compute_capabilities"].split()]
    assert env["HOROVOD_BUILD_CUDA_CC_LIST"] == ",".join(capabilities)
    assert str([f"sm_{x}" for x in capabilities]).replace("'", '"') in d.sections["test"]
    assert {"cuda", "cudnn", "nccl"} <= set(d.labels) and d.labels["python"] == "3.11"
    test = d.sections["test"]
    assert "import horovod.torch as hvd" in test and "hvd.nccl_built()" in test
    # the NCCL and cuDNN labels are what is installed
    assert f'm.version("nvidia-nccl-cu13"); assert v == "{d.labels["nccl"]}"' in test
    assert f'm.version("nvidia-cudnn-cu13"); assert v == "{d.labels["cudnn"]}"' in test


# the images of Debian's own Python packages (From: debian:<release>) and what they take
# archbench's runtime dependencies from: Debian's builds, each pinned to its Debian version
DEBIAN_IMAGES = ("ppc64le-debian",)
DEBIAN_RUNTIME_DEPS = ("python3-jsonschema", "python3-fastjsonschema", "python3-yaml")


def test_every_image_pins_the_same_runtime_dependencies():
    pins = {d.stem: c.pinned_packages(c.parse_definition(d), names=RUNTIME_DEPS) for d in DEFS
            if d.stem not in DEBIAN_IMAGES}
    assert all(set(p) == set(RUNTIME_DEPS) for p in pins.values()), pins
    assert len({tuple(sorted(p.items())) for p in pins.values()}) == 1, pins
    for stem in DEBIAN_IMAGES:
        d = shipped(stem)
        assert d.header["From"].startswith("debian:")
        debian = c.debian_pins(d)
        assert all(debian.get(name) for name in DEBIAN_RUNTIME_DEPS), debian
        assert not c.pinned_packages(d, names=("pyyaml",))  # no pip install of them beside


def test_debians_pytorch_is_read_as_its_upstream_version_and_must_be_pinned(tmp_path):
    d = shipped("ppc64le-debian")
    assert c.pinned_packages(d) == {"torch": "1.13.1", "torchvision": "0.14.1"}
    assert c.debian_pins(d)["python3-torch"] == "1.13.1+dfsg-4"
    assert c.image_frameworks(d) == {"pytorch": "1.13.1"}
    with pytest.raises(ValueError, match="apt-get installs 'python3-torch' without an exact version"):
        c.validate_definition(_write(tmp_path, "apt-get install -y python3-torch python3-numpy\n"))
    good = _write(tmp_path, "apt-get install -y python3-torch=1.13.1+dfsg-4\n",
                  labels="    arch ppc64le\n    variant debian\n    torch 1.13.1\n")
    assert c.pinned_packages(c.validate_definition(good)) == {"torch": "1.13.1"}
    with pytest.raises(ValueError, match="label torch 2.14.1 but %post installs 1.13.1"):
        c.validate_definition(_write(tmp_path, "apt-get install -y python3-torch=1.13.1+dfsg-4\n",
                                     labels="    arch ppc64le\n    variant debian\n    torch 2.14.1\n"))


@pytest.mark.parametrize("asked, says", [
    ({"framework": "tensorflow"}, "has no TensorFlow (it has: PyTorch 1.13.1)"),
    ({"graph": "compiled"}, "runs no graph 'compiled' with its PyTorch 1.13.1 (it runs: eager)"),
    ({"math_mode": "bf16"}, "runs no math_mode 'bf16' with its PyTorch 1.13.1 (it runs: strict)"),
    ({"strategy": "horovod"}, "has no Horovod (strategy horovod; its PyTorch is 1.13.1)"),
    ({"strategy": "ddp"}, "runs no strategy 'ddp' with its PyTorch 1.13.1 (it runs: single)"),
])
def test_what_an_image_cannot_run_is_named_from_its_labels(asked, says):
    d = shipped("ppc64le-debian")
    planned = {"kind": "train", "framework": "pytorch", "strategy": "single", "precision": "fp32",
               "math_mode": "strict", "graph": "eager"}
    assert c.image_lacks(d, planned) == ""
    assert c.image_lacks(d, {**planned, **asked}) == says
    assert c.image_lacks(d, {**planned, **asked, "kind": "kernel"}) == ""
    # the images without such labels run what their frameworks declare
    x86 = shipped("x86_64-onednn")
    assert c.image_lacks(x86, {**planned, "graph": "compiled", "math_mode": "bf16"}) == ""
    assert c.image_lacks(shipped("ppc64le-vanilla"), planned) == "has no PyTorch (it has: TensorFlow 2.14.1)"


def test_install_env_reads_the_assignments_before_pip():
    d = shipped("x86_64-onednn")
    assert c.install_env(d, "horovod") == {
        "HOROVOD_WITH_TENSORFLOW": "1", "HOROVOD_WITH_PYTORCH": "1", "HOROVOD_WITH_MPI": "1",
        "HOROVOD_WITH_GLOO": "1", "HOROVOD_WITHOUT_MXNET": "1", "MAKEFLAGS": "-j$(nproc)"}
    assert c.install_env(d, "tensorflow-cpu") == {}


def _write(tmp_path, post, labels="    arch x86_64\n    variant onednn\n", extra=""):
    text = (f"Bootstrap: docker\nFrom: debian:bookworm\n%labels\n{labels}"
            f"%environment\n    export A=1\n%post\n{post}\n%test\n    python -c 'import tensorflow'\n{extra}")
    path = tmp_path / "x86_64-onednn.def"
    path.write_text(text)
    return path


@pytest.mark.parametrize("post, message", [
    ("    pip install tensorflow-cpu", "without an exact version"),
    ("    pip install tensorflow-cpu>=2.18 \\\n      horovod==0.28.1", "without an exact version"),
    ("    pip install tensorflow-cpu==2.18.1 tf_keras", "tf_keras"),
    ("    conda install -y tensorflow-cpu=2.14", "without an exact version"),
    ("    pip install numpy==1.26.4", "no pinned tensorflow"),
])
def test_unpinned_or_missing_framework_is_rejected(tmp_path, post, message):
    with pytest.raises(ValueError, match=message):
        c.validate_definition(_write(tmp_path, post))


def test_missing_section_or_label_is_rejected(tmp_path):
    good = "    pip install tensorflow-cpu==2.18.1"
    c.validate_definition(_write(tmp_path, good))
    with pytest.raises(ValueError, match="lacks 'variant'"):
        c.validate_definition(_write(tmp_path, good, labels="    arch x86_64\n"))
    path = _write(tmp_path, good)
    path.write_text(path.read_text().replace("%test\n    python -c 'import tensorflow'\n", ""))
    with pytest.raises(ValueError, match="%test"):
        c.validate_definition(path)
    path.write_text(path.read_text().replace("From: debian:bookworm\n", ""))
    with pytest.raises(ValueError, match="From"):
        c.validate_definition(path)


def test_label_must_match_pinned_version(tmp_path):
    path = _write(tmp_path, "    pip install tensorflow-cpu==2.18.1",
                  labels="    arch x86_64\n    variant onednn\n    tensorflow 2.17.0\n")
    with pytest.raises(ValueError, match="label tensorflow 2.17.0"):
        c.validate_definition(path)
    path = _write(tmp_path, "    pip install tensorflow-cpu==2.18.1 torch==2.14.1",
                  labels="    arch x86_64\n    variant onednn\n    torch 2.14.0\n")
    with pytest.raises(ValueError, match="label torch 2.14.0 but %post installs 2.14.1"):
        c.validate_definition(path)
    path = _write(tmp_path, "    pip install tensorflow-cpu==2.18.1",
                  labels="    arch x86_64\n    variant onednn\n    timm 1.0.31\n")
    with pytest.raises(ValueError, match="label timm 1.0.31 but %post installs none"):
        c.validate_definition(path)


def test_a_pytorch_only_image_is_valid_and_unpinned_torch_is_not(tmp_path):
    c.validate_definition(_write(tmp_path, "    pip install torch==2.14.1 torchvision==0.29.1 timm==1.0.31"))
    for post in ("    pip install torch", "    pip install torch==2.14.1 torchvision>=0.29",
                 "    pip install torch==2.14.1 timm"):
        with pytest.raises(ValueError, match="without an exact version"):
            c.validate_definition(_write(tmp_path, post))


def test_a_package_built_from_its_downloaded_source_is_pinned_by_both_commands(tmp_path):
    """Horovod's patched sdist: ``pip download name==X`` then ``pip install .../name-X``."""
    post = ("    pip install tensorflow-cpu==2.18.1\n"
            "    pip download --no-binary :all: --no-deps horovod==0.28.1 -d /tmp/horovod\n"
            "    HOROVOD_WITH_PYTORCH=1 \\\n"
            "        pip install --no-build-isolation /tmp/horovod/horovod-0.28.1/\n"
            "    pip install --no-deps /opt/archbench")
    d = c.validate_definition(_write(tmp_path, post))
    assert c.pinned_packages(d) == {"tensorflow-cpu": "2.18.1", "horovod": "0.28.1"}
    assert c.install_env(d, "horovod") == {"HOROVOD_WITH_PYTORCH": "1"}
    assert c.install_env(d, "archbench") == {}
    # a download without a version, or a source tree whose name carries none, is not a pin
    with pytest.raises(ValueError, match="'horovod' without an exact version"):
        c.validate_definition(_write(tmp_path, post.replace("horovod==0.28.1", "horovod")))
    d = c.parse_definition(_write(tmp_path, post.replace("horovod==0.28.1 ", "").replace(
        "/tmp/horovod/horovod-0.28.1/", "/tmp/horovod/src")))
    assert "horovod" not in c.pinned_packages(d)


@pytest.mark.parametrize("runtime", ["apptainer", "singularity"])
def test_build_command(runtime):
    assert c.build_command(runtime, "containers/x.def", "results/images/x.sif") == [
        runtime, "build", "--fakeroot", "results/images/x.sif", "containers/x.def"]
    assert c.build_command(runtime, Path("a.def"), Path("a.sif"), fakeroot=False) == [
        runtime, "build", "a.sif", "a.def"]


def test_exec_prefix_per_runtime():
    env = {"TF_USE_LEGACY_KERAS": "1", "OMP_NUM_THREADS": "2"}
    assert c.exec_prefix("apptainer", "results/images/x.sif", binds=["/data:/data"], env=env) == [
        "apptainer", "exec", "--cleanenv", "--bind", "/data:/data",
        "--env", "TF_USE_LEGACY_KERAS=1", "--env", "OMP_NUM_THREADS=2", "results/images/x.sif"]
    assert c.exec_prefix("singularity", Path("x.sif"), binds={"/a": "/b", "/c": "/d"}) == [
        "singularity", "exec", "--cleanenv", "--bind", "/a:/b", "--bind", "/c:/d", "x.sif"]
    assert c.exec_prefix("none", "x.sif", binds=["/data:/data"], env=env) == []


def test_gpu_runs_map_the_host_driver_in():
    for runtime in ("apptainer", "singularity"):
        argv = c.exec_prefix(runtime, "x.sif", env={"A": "1"}, gpu=True)
        assert argv[:4] == [runtime, "exec", "--cleanenv", "--nv"] and argv[-1] == "x.sif"
        assert "--nv" not in c.exec_prefix(runtime, "x.sif")
    # ch-run cannot: the run sees no GPU (and fails as such), no CPU run under a GPU name
    assert c.exec_prefix("charliecloud", "x.sqfs", gpu=True) == c.exec_prefix("charliecloud", "x.sqfs")


def test_unknown_runtime_is_a_one_line_value_error():
    for call in (lambda: c.exec_prefix("docker", "x.sif"),
                 lambda: c.build_command("podman", "x.def", "x.sif"),
                 lambda: c.build_command("none", "x.def", "x.sif")):
        with pytest.raises(ValueError) as err:
            call()
        assert "\n" not in str(err.value)


def test_shell_join_quotes():
    argv = c.exec_prefix("apptainer", "my image.sif", binds=["/d:/d"], env={"X": "a b"}) + ["python", "-c", "print(1)"]
    assert c.shell_join(argv) == (
        "apptainer exec --cleanenv --bind /d:/d --env 'X=a b' 'my image.sif' python -c 'print(1)'")


def test_image_digest_equals_hashlib_and_streams(tmp_path):
    path = tmp_path / "data.bin"
    payload = bytes(range(256)) * 5000  # 1.28 MB: more than one chunk
    path.write_bytes(payload)
    assert c.image_digest(path) == hashlib.sha256(payload).hexdigest()
    assert c.image_digest(path, chunk_size=7) == hashlib.sha256(payload).hexdigest()


def test_image_digest_of_a_sif_like_file(tmp_path):
    # SIF files start with a launch script line and the magic "SIF_MAGIC"; the digest is
    # of the bytes as stored, whatever the content.
    sif = tmp_path / "x86_64-onednn.sif"
    body = b"#!/usr/bin/env run-singularity\n\x00SIF_MAGIC\x000101" + b"\x00" * 4096 + b"squashfs"
    sif.write_bytes(body)
    digest = c.image_digest(sif)
    assert len(digest) == 64 and digest == hashlib.sha256(body).hexdigest()
    sif.write_bytes(body + b"!")
    assert c.image_digest(sif) != digest


def test_charliecloud_exec_prefix_mounts_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"TF_USE_LEGACY_KERAS": "1", "OMP_NUM_THREADS": "2"}
    assert c.exec_prefix("charliecloud", "results/images/x.sqfs", binds=["/data"], env=env) == [
        "ch-run", "--unset-env=*", "--set-env", "-b", f"{tmp_path}:/mnt", "-c", "/mnt",
        "-b", "/data", "--set-env=TF_USE_LEGACY_KERAS=1", "--set-env=OMP_NUM_THREADS=2",
        "results/images/x.sqfs", "--"]
    launched = c.exec_prefix("charliecloud", "x.sqfs", cleanenv=False)
    assert "--unset-env=*" not in launched and launched[-2:] == ["x.sqfs", "--"]


def test_charliecloud_builds_with_archbench_imagebuild():
    assert c.build_command("charliecloud", "containers/x.def", "results/images/x.sqfs") == [
        "python3", "-m", "archbench.execute.imagebuild", "containers/x.def", "results/images/x.sqfs"]


@pytest.mark.parametrize("runtime", ["apptainer", "singularity"])
@pytest.mark.parametrize("uri", ["docker://python:3.11-slim-bookworm",
                                 "oras://ghcr.io/site/archbench:1.0",
                                 "library://site/default/archbench:latest"])
def test_pull_command(runtime, uri):
    path = c.pulled_image_path(runtime, uri)
    assert path.startswith("results/images/pulled-") and path.endswith(".sif")
    assert c.pull_commands(runtime, uri, path) == [[runtime, "pull", path, uri]]


def test_charliecloud_pulls_docker_images_into_squashfs():
    uri = "docker://python:3.11-slim-bookworm"
    path = c.pulled_image_path("charliecloud", uri)
    assert path.endswith(".sqfs")
    assert c.pull_commands("charliecloud", uri, path) == [
        ["ch-image", "pull", "python:3.11-slim-bookworm"],
        ["ch-convert", "-i", "ch-image", "-o", "squash", "python:3.11-slim-bookworm", path]]
    with pytest.raises(ValueError, match="cannot pull oras://"):
        c.pull_commands("charliecloud", "oras://ghcr.io/x:1", "x.sqfs")


def test_pulled_paths_differ_per_uri():
    a = c.pulled_image_path("apptainer", "docker://site/archbench:1")
    b = c.pulled_image_path("apptainer", "oras://site/archbench:1")
    assert a != b and "archbench_1" in a


@pytest.mark.parametrize("system, expected", [
    ({"container_runtime": "none", "image": "x86_64-onednn"}, None),
    ({"container_runtime": "apptainer", "image": "x86_64-onednn"}, "results/images/x86_64-onednn.sif"),
    ({"container_runtime": "charliecloud", "image": "x86_64-onednn"}, "results/images/x86_64-onednn.sqfs"),
    ({"container_runtime": "singularity", "image_uri": "/site/images/tf.sif"}, "/site/images/tf.sif"),
])
def test_image_file(system, expected):
    assert c.image_file(system) == expected


@pytest.mark.parametrize("runtime, uri, message", [
    ("apptainer", "/site/images/tf.sqfs", "runs .sif image files"),
    ("charliecloud", "/site/images/tf.sif", "runs .sqfs image files"),
    ("charliecloud", "library://site/tf:1", "cannot pull library://"),
    ("none", "/site/images/tf.sif", "other than none"),
])
def test_bad_image_uri_is_one_line(runtime, uri, message):
    with pytest.raises(ValueError, match=message) as err:
        c.check_image_uri(runtime, uri)
    assert "\n" not in str(err.value)


def test_a_framework_runs_in_its_own_image_where_the_system_names_one():
    """power9: TensorFlow in ppc64le-vanilla, PyTorch in ppc64le-debian (framework_images);
    kernels and unnamed frameworks in the system's image."""
    power9 = {"container_runtime": "apptainer", "image": "ppc64le-vanilla",
              "framework_images": {"pytorch": "ppc64le-debian"}}
    assert c.image_file(power9, "pytorch") == "results/images/ppc64le-debian.sif"
    assert c.image_file(power9, "tensorflow") == c.image_file(power9) == "results/images/ppc64le-vanilla.sif"
    assert c.system_images(power9) == ["ppc64le-vanilla", "ppc64le-debian"]
    assert c.image_name({**power9, "image_uri": "/x.sif"}, "pytorch") is None
    shipped_power9 = yaml.safe_load((REPO / "config/systems/power9.yaml").read_text())
    assert c.image_name(shipped_power9, "pytorch") == "ppc64le-debian"
