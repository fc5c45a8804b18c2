"""Unit tests for archbench.plan.containers against the shipped definition files."""

from __future__ import annotations

import hashlib
import re
import subprocess
import tarfile
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
# the images whose Horovod is built from scripts/horovod_source.sh's patched sdist, and
# whether they ask it for a PyTorch extension without CUDA (--cpu-torch: the CPU images with
# PyTorch; the GPU images and the TensorFlow-only ones do not)
HOROVOD_SOURCE = {"x86_64-onednn": True, "aarch64-acl": True, "aarch64-armpl": False,
                  "x86_64-cuda": False, "x86_64-cuda-pytorch": False}
SOURCE_SCRIPT = REPO / "scripts/horovod_source.sh"


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
        "tensorflow": "2.21.0", "tf-keras": "2.21.0", "torch": "2.15.0",
        "torchvision": "0.29.2", "timm": "1.0.31", "horovod": "0.28.1"}
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


def check_horovod_source(d: c.Definition, *, cpu_torch: bool) -> None:
    """Horovod built from the source scripts/horovod_source.sh makes (the 0.28.1 sdist, each
    patch checked there): the script copied in, run once (``--cpu-torch`` where asked), its
    source tree installed once, and no patch of the image's own."""
    assert c.files(d).get("/opt/archbench/horovod_source.sh") == "scripts/horovod_source.sh"
    post = d.sections["post"]
    runs = re.findall(r"^ *HVD_SRC=\$\(bash /opt/archbench/horovod_source.sh /tmp/horovod( --cpu-torch)?\)$",
                      post, re.M)
    assert runs == [" --cpu-torch" if cpu_torch else ""] and post.count("horovod_source.sh") == 1, runs
    assert post.count('pip install --no-cache-dir --no-build-isolation "$HVD_SRC"') == 1
    assert post.count("$HVD_SRC") == 1 and "rm -rf /tmp/horovod" in post
    assert "CMAKE_CXX_STANDARD" not in post and "sed -i" not in post and "pip download" not in post
    assert c.pinned_packages(d)["horovod"] == "0.28.1"  # the script's download, read by the parser


@pytest.mark.parametrize("stem, cpu_torch", HOROVOD_SOURCE.items())
def test_every_horovod_build_takes_the_one_patched_source(stem, cpu_torch):
    check_horovod_source(shipped(stem), cpu_torch=cpu_torch)


def test_only_the_ppc64le_image_builds_horovod_otherwise():
    """ppc64le-vanilla's TensorFlow 2.14 needs none of the TensorFlow 2.19+ patches: the
    plain sdist from the index; ppc64le-debian has no Horovod."""
    builds = {d.stem for d in DEFS if "horovod" in c.pinned_packages(c.parse_definition(d))}
    assert builds == {*HOROVOD_SOURCE, "ppc64le-vanilla"}
    post = shipped("ppc64le-vanilla").sections["post"]
    assert "pip install --no-cache-dir --no-build-isolation horovod==0.28.1" in post
    assert "horovod_source.sh" not in post


def check_one_horovod_for_both_frameworks(d: c.Definition) -> None:
    """Horovod built once, with TensorFlow and PyTorch (without CUDA), from the patched source,
    and both frameworks' bindings checked by %test."""
    env = c.install_env(d, "horovod")
    for flag in ("TENSORFLOW", "PYTORCH", "MPI", "GLOO"):
        assert env.get(f"HOROVOD_WITH_{flag}") == "1" and f"HOROVOD_WITHOUT_{flag}" not in env, env
    check_horovod_source(d, cpu_torch=True)
    assert "import horovod.tensorflow as hvd" in d.sections["test"]
    assert "import horovod.torch as hvd" in d.sections["test"]


@pytest.mark.parametrize("stem", TORCH_CPU_IMAGES)
def test_cpu_images_build_one_horovod_for_tensorflow_and_pytorch(stem):
    check_one_horovod_for_both_frameworks(shipped(stem))


def mutated(tmp_path: Path, stem: str, old: str, new: str, count: int = 1) -> Path:
    """A copy of containers/<stem>.def with ``old`` replaced, laid out as in the repository
    (its scripts/ beside), so that %files' scripts are found."""
    (tmp_path / "containers").mkdir(exist_ok=True)
    if not (tmp_path / "scripts").exists():
        (tmp_path / "scripts").symlink_to(REPO / "scripts")
    text = (REPO / f"containers/{stem}.def").read_text()
    assert old in text, old
    path = tmp_path / "containers" / f"{stem}.def"
    path.write_text(text.replace(old, new, count))
    return path


@pytest.mark.parametrize("old, new", [
    ("HOROVOD_WITH_PYTORCH=1", "HOROVOD_WITHOUT_PYTORCH=1"),
    ("/tmp/horovod --cpu-torch)", "/tmp/horovod)"),  # the wrong patch: CUDA for the PyTorch extension
    ("    scripts/horovod_source.sh /opt/archbench/horovod_source.sh\n", ""),  # the script not copied in
    ('"$HVD_SRC"', "horovod==0.28.1"),  # the index's sdist, unpatched
])
def test_a_horovod_without_pytorch_or_the_patched_source_fails_the_check(tmp_path, old, new):
    with pytest.raises(AssertionError):
        check_one_horovod_for_both_frameworks(c.parse_definition(mutated(tmp_path, "x86_64-onednn", old, new)))


def test_a_gpu_image_asking_for_a_cpu_torch_extension_fails_the_check(tmp_path):
    path = mutated(tmp_path, "x86_64-cuda-pytorch", "/tmp/horovod)", "/tmp/horovod --cpu-torch)")
    with pytest.raises(AssertionError):
        check_horovod_source(c.parse_definition(path), cpu_torch=False)


# The patches scripts/horovod_source.sh applies: file of the sdist, what it must find, what it
# writes (C++17; C++20 for the PyTorch extension; TensorFlow 2.19+'s XLA builder header, its
# absl::StatusOr and the highwayhash/farmhash include dirs; with --cpu-torch no CUDA for torch)
XLA_OPS = "${PROJECT_SOURCE_DIR}/horovod/tensorflow/xla_mpi_ops.cc"
PATCHES = [
    ("CMakeLists.txt", "set(CMAKE_CXX_STANDARD 14)\n", "set(CMAKE_CXX_STANDARD 17)\n"),
    ("horovod/torch/CMakeLists.txt", "    set(CMAKE_CXX_STANDARD 14)\n", "    set(CMAKE_CXX_STANDARD 20)\n"),
    ("horovod/tensorflow/xla_mpi_ops.cc", '#include "tensorflow/compiler/xla/client/xla_builder.h"\n',
     '#include "tensorflow/compiler/xla/hlo/builder/xla_builder.h"\n'),
    ("horovod/tensorflow/xla_mpi_ops.cc", "::xla::StatusOr<::xla::XlaOp> A();\n::xla::StatusOr<::xla::XlaOp> B();\n",
     "absl::StatusOr<::xla::XlaOp> A();\nabsl::StatusOr<::xla::XlaOp> B();\n"),
    ("horovod/tensorflow/CMakeLists.txt", f'list(APPEND TF_SOURCES "{XLA_OPS}")\n',
     f'list(APPEND TF_SOURCES "{XLA_OPS}")\nset_source_files_properties("{XLA_OPS}" PROPERTIES INCLUDE_DIRECTORIES '
     '"${Tensorflow_INCLUDE_DIRS}/external/highwayhash;${Tensorflow_INCLUDE_DIRS}/external/farmhash_archive/src")\n'),
    ("cmake/Modules/FindPytorch.cmake",
     '  "print(True if ((torch.version.cuda is not None) and (CUDA_HOME is not None)) else False)"\n',
     '  "print(False)"\n'),
]
CPU_TORCH_ONLY = "cmake/Modules/FindPytorch.cmake"


def test_the_source_script_holds_each_patch():
    text = re.sub(r"\\\n\s*", " ", SOURCE_SCRIPT.read_text())
    for pattern in ("'^set(CMAKE_CXX_STANDARD 14)$' 'set(CMAKE_CXX_STANDARD 17)'",
                    "horovod/torch/CMakeLists.txt '^\\( *\\)set(CMAKE_CXX_STANDARD 14)$' "
                    "'\\1set(CMAKE_CXX_STANDARD 20)'",
                    "'#include \"tensorflow/compiler/xla/hlo/builder/xla_builder.h\"'",
                    "'::xla::StatusOr<::xla::XlaOp>' 'absl::StatusOr<::xla::XlaOp>' g",
                    "/external/highwayhash;", "/external/farmhash_archive/src"):
        assert pattern in text, pattern
    cpu_torch = text[text.index('if [ "$CPU_TORCH" = --cpu-torch ]'):]
    assert re.match(r"if \[ \"\$CPU_TORCH\" = --cpu-torch \]; then\s+patch_source cmake/Modules/FindPytorch.cmake\s+"
                    r"'print\(True if .*\) else False\)' 'print\(False\)'\s+elif", cpu_torch), cpu_torch
    assert "horovod==0.28.1" in text and text.count("patch_source ") == len(PATCHES)


def run_source_script(tmp_path: Path, tree: dict[str, str], *options: str) -> subprocess.CompletedProcess:
    """scripts/horovod_source.sh on a fake sdist holding ``tree``, with a ``python`` on PATH
    that stands in for ``pip download`` (it puts that sdist where ``-d`` says)."""
    sdist = tmp_path / "horovod-0.28.1.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name, text in tree.items():
            path = tmp_path / "tree" / "horovod-0.28.1" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        tar.add(tmp_path / "tree" / "horovod-0.28.1", arcname="horovod-0.28.1")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(
        "#!/bin/sh\n"
        f'echo "$@" > {tmp_path}/pip-args\n'
        'while [ $# -gt 0 ]; do\n'
        f'    if [ "$1" = -d ]; then mkdir -p "$2" && cp {sdist} "$2/"; fi\n'
        '    shift\n'
        'done\n')
    (bin_dir / "python").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LC_ALL": "C"}
    return subprocess.run(["bash", str(SOURCE_SCRIPT), str(tmp_path / "hvd"), *options],
                          capture_output=True, text=True, env=env, timeout=60)


def original_tree() -> dict[str, str]:
    tree: dict[str, str] = {}
    for name, before, _ in PATCHES:
        tree[name] = tree.get(name, "# Horovod 0.28.1\n") + before
    return tree


@pytest.mark.parametrize("cpu_torch", [True, False])
def test_the_source_script_patches_the_sdist_and_prints_its_folder(tmp_path, cpu_torch):
    done = run_source_script(tmp_path, original_tree(), *(["--cpu-torch"] if cpu_torch else []))
    assert done.returncode == 0, done.stderr
    src = tmp_path / "hvd" / "horovod-0.28.1"
    assert done.stdout == f"{src}\n"
    assert "--no-binary :all: --no-deps horovod==0.28.1 -d" in (tmp_path / "pip-args").read_text()
    for name, before, after in PATCHES:
        text = (src / name).read_text()
        patched = cpu_torch or name != CPU_TORCH_ONLY
        assert (after in text) is patched and (before in text) is (not patched or before in after), name


@pytest.mark.parametrize("index", range(len(PATCHES)), ids=lambda i: PATCHES[i][0].rsplit("/", 1)[-1] + str(i))
def test_the_source_script_stops_where_a_pattern_is_missing(tmp_path, index):
    tree = original_tree()
    name, before, _ = PATCHES[index]
    tree[name] = tree[name].replace(before, "")
    done = run_source_script(tmp_path, tree, "--cpu-torch")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("horovod_source: Horovod source not as expected:"), done.stderr
    assert done.stderr.strip().endswith(f"not in {name}") and done.stderr.count("\n") == 1


def test_the_source_script_refuses_an_unknown_option(tmp_path):
    done = run_source_script(tmp_path, original_tree(), "--gpu-torch")
    assert done.returncode == 1 and done.stdout == "" and "unknown option --gpu-torch" in done.stderr


def test_cpu_image_tensorflow_is_pyprojects():
    pins, pyproject = c.pinned_packages(shipped("x86_64-onednn")), pyproject_pins()
    assert (pins["tensorflow"], pins["tf-keras"]) == (pyproject["tensorflow"], pyproject["tf-keras"])
    assert "tensorflow-cpu" not in pins and "tensorflow-cpu" not in pyproject


def check_cuda_matches_cpu(gpu_def: c.Definition, cpu_def: c.Definition) -> None:
    """GPU and CPU numbers compare one TensorFlow: the CUDA build of the CPU image's version
    (and of pyproject's), with the same tf_keras and Horovod."""
    cpu, gpu = c.pinned_packages(cpu_def), c.pinned_packages(gpu_def)
    assert gpu["tensorflow"] == cpu["tensorflow"] == pyproject_pins()["tensorflow"]
    assert (gpu["tf-keras"], gpu["horovod"]) == (cpu["tf-keras"], cpu["horovod"])
    assert "tensorflow-cpu" not in gpu  # the CPU wheel beside the CUDA one would shadow it
    assert f"'tensorflow[and-cuda]=={gpu['tensorflow']}'" in gpu_def.sections["post"]


def test_cuda_image_pins_the_cpu_images_tensorflow():
    check_cuda_matches_cpu(shipped("x86_64-cuda"), shipped("x86_64-onednn"))


@pytest.mark.parametrize("old, new", [
    ("'tensorflow[and-cuda]==2.21.0'", "'tensorflow[and-cuda]==2.20.0'"),
    ("'tensorflow[and-cuda]==2.21.0'", "tensorflow==2.21.0"),  # the CUDA libraries left out
    ("tf_keras==2.21.0", "tf_keras==2.20.0"),
    ('"$HVD_SRC"', "horovod==0.28.0"),
])
def test_cuda_image_drifting_from_the_cpu_image_fails_the_check(tmp_path, old, new):
    path = mutated(tmp_path, "x86_64-cuda", old, new)
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
    # the NCCL and cuDNN labels are what is installed: TensorFlow asks lower bounds only, so
    # %post pins the wheels at the labels' versions
    assert f'm.version("nvidia-nccl-cu12"); assert v == "{d.labels["nccl"]}"' in test
    assert f'm.version("nvidia-cudnn-cu12"); assert v == "{d.labels["cudnn"]}"' in test
    pins = c.pinned_packages(d, names=("nvidia-nccl-cu12", "nvidia-cudnn-cu12", "nvidia-cuda-runtime-cu12"))
    assert (pins["nvidia-nccl-cu12"], pins["nvidia-cudnn-cu12"]) == (d.labels["nccl"], d.labels["cudnn"])
    assert pins["nvidia-cuda-runtime-cu12"] == "12.5.82"  # CUDA 12.5.1's runtime, as the base
    assert d.header["From"] == f"nvidia/cuda:{d.labels['cuda']}-devel-ubuntu22.04"
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
    check_horovod_source(d, cpu_torch=False)  # its PyTorch extension keeps CUDA
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
    assert c.install_env(d, "tensorflow") == {}


def _write(tmp_path, post, labels="    arch x86_64\n    variant onednn\n", extra=""):
    text = (f"Bootstrap: docker\nFrom: debian:bookworm\n%labels\n{labels}"
            f"%environment\n    export A=1\n%post\n{post}\n%test\n    python -c 'import tensorflow'\n{extra}")
    path = tmp_path / "x86_64-onednn.def"
    path.write_text(text)
    return path


@pytest.mark.parametrize("post, message", [
    ("    pip install tensorflow", "without an exact version"),
    ("    pip install tensorflow>=2.21 \\\n      horovod==0.28.1", "without an exact version"),
    ("    pip install tensorflow==2.21.0 tf_keras", "tf_keras"),
    ("    conda install -y tensorflow-cpu=2.14", "without an exact version"),
    ("    pip install numpy==1.26.4", "no pinned tensorflow"),
])
def test_unpinned_or_missing_framework_is_rejected(tmp_path, post, message):
    with pytest.raises(ValueError, match=message):
        c.validate_definition(_write(tmp_path, post))


def test_tf_keras_with_its_dependencies_beside_or_after_tensorflow_is_valid(tmp_path):
    for post in ("    pip install tensorflow==2.21.0 tf_keras==2.21.0",
                 "    pip install tensorflow==2.21.0\n    pip install tf_keras==2.21.0"):
        d = c.validate_definition(_write(tmp_path, post, labels="    arch x86_64\n    variant onednn\n"
                                         "    tensorflow 2.21.0\n"))
        assert c.pinned_packages(d) == {"tensorflow": "2.21.0", "tf-keras": "2.21.0"}


def test_missing_section_or_label_is_rejected(tmp_path):
    good = "    pip install tensorflow==2.21.0"
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
    path = _write(tmp_path, "    pip install tensorflow==2.21.0",
                  labels="    arch x86_64\n    variant onednn\n    tensorflow 2.17.0\n")
    with pytest.raises(ValueError, match="label tensorflow 2.17.0"):
        c.validate_definition(path)
    path = _write(tmp_path, "    pip install tensorflow==2.21.0 torch==2.15.0",
                  labels="    arch x86_64\n    variant onednn\n    torch 2.14.0\n")
    with pytest.raises(ValueError, match="label torch 2.14.0 but %post installs 2.15.0"):
        c.validate_definition(path)
    path = _write(tmp_path, "    pip install tensorflow==2.21.0",
                  labels="    arch x86_64\n    variant onednn\n    timm 1.0.31\n")
    with pytest.raises(ValueError, match="label timm 1.0.31 but %post installs none"):
        c.validate_definition(path)


def test_a_pytorch_only_image_is_valid_and_unpinned_torch_is_not(tmp_path):
    c.validate_definition(_write(tmp_path, "    pip install torch==2.15.0 torchvision==0.29.2 timm==1.0.31"))
    for post in ("    pip install torch", "    pip install torch==2.15.0 torchvision>=0.29",
                 "    pip install torch==2.15.0 timm"):
        with pytest.raises(ValueError, match="without an exact version"):
            c.validate_definition(_write(tmp_path, post))


def test_a_package_built_from_its_downloaded_source_is_pinned_by_both_commands(tmp_path):
    """Horovod's patched sdist: ``pip download name==X`` then ``pip install .../name-X``."""
    post = ("    pip install tensorflow==2.21.0\n"
            "    pip download --no-binary :all: --no-deps horovod==0.28.1 -d /tmp/horovod\n"
            "    HOROVOD_WITH_PYTORCH=1 \\\n"
            "        pip install --no-build-isolation /tmp/horovod/horovod-0.28.1/\n"
            "    pip install --no-deps /opt/archbench")
    d = c.validate_definition(_write(tmp_path, post))
    assert c.pinned_packages(d) == {"tensorflow": "2.21.0", "horovod": "0.28.1"}
    assert c.install_env(d, "horovod") == {"HOROVOD_WITH_PYTORCH": "1"}
    assert c.install_env(d, "archbench") == {}
    # a download without a version, or a source tree whose name carries none, is not a pin
    with pytest.raises(ValueError, match="'horovod' without an exact version"):
        c.validate_definition(_write(tmp_path, post.replace("horovod==0.28.1", "horovod")))
    d = c.parse_definition(_write(tmp_path, post.replace("horovod==0.28.1 ", "").replace(
        "/tmp/horovod/horovod-0.28.1/", "/tmp/horovod/src")))
    assert "horovod" not in c.pinned_packages(d)


def test_a_source_tree_a_copied_script_prints_is_pinned_by_the_scripts_download(tmp_path):
    """``SRC=$(bash <a %files script> ...)`` then ``pip install "$SRC"``: the package and
    version of the script's one ``pip download``, the script read where %files copies it from
    (the repository root, above containers/)."""
    (tmp_path / "containers").mkdir()
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts/src.sh"
    script.write_text('python -m pip download -q --no-binary :all: --no-deps horovod==0.28.1 -d "$1" >&2\n'
                      'echo "$1/horovod-0.28.1"\n')
    path = tmp_path / "containers/x86_64-onednn.def"

    def write(files="    scripts/src.sh /opt/x/src.sh\n", run="SRC=$(bash /opt/x/src.sh /tmp/h --cpu-torch)"):
        path.write_text("Bootstrap: docker\nFrom: debian:bookworm\n%labels\n    arch x86_64\n    variant onednn\n"
                        f"    horovod 0.28.1\n%files\n{files}%environment\n    export A=1\n%post\n"
                        f"    pip install tensorflow==2.21.0\n    {run}\n"
                        '    HOROVOD_WITH_PYTORCH=1 \\\n        pip install --no-build-isolation "$SRC"\n'
                        "%test\n    python -c 'import tensorflow'\n")
        return path

    d = c.validate_definition(write())
    assert c.files(d) == {"/opt/x/src.sh": "scripts/src.sh"}
    assert c.pinned_packages(d) == {"tensorflow": "2.21.0", "horovod": "0.28.1"}
    assert c.install_env(d, "horovod") == {"HOROVOD_WITH_PYTORCH": "1"}
    # a script %files does not copy in, or a variable set otherwise, installs no pin
    for d in (c.parse_definition(write(files="")), c.parse_definition(write(run="SRC=/tmp/h/src"))):
        assert "horovod" not in c.pinned_packages(d) and c.install_env(d, "horovod") == {}
    with pytest.raises(ValueError, match="label horovod 0.28.1 but %post installs none"):
        c.validate_definition(write(files=""))
    # the script missing from the repository, or downloading no exact version: one line
    script.write_text('python -m pip download --no-deps horovod -d "$1"\n')
    with pytest.raises(ValueError, match=r"scripts/src.sh downloads no one package at an exact version") as err:
        c.validate_definition(write())
    assert "\n" not in str(err.value)
    script.unlink()
    with pytest.raises(ValueError, match="%post runs scripts/src.sh, not in") as err:
        c.pinned_packages(c.parse_definition(write()))
    assert "\n" not in str(err.value)


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
