"""Images built and run for real: the repository's own definitions executed step by step
(archbench.execute.imagebuild: debootstrap base, %files, %post, %environment, %labels, %test, a
SquashFS image), then archbench run inside them with Charliecloud's ch-run.

- x86_64 (containers/x86_64-onednn.def, one Horovod compiled for TensorFlow and PyTorch):
  the tiny campaign through Snakemake, every record carrying the image's digest, one
  PyTorch training measurement whose vendor evidence is oneDNN, and one in bf16 compiled
  by torch.compile with the image's g++, its evidence checked against the host's ISA.
- aarch64 (containers/aarch64-acl.def, HOROVOD=0) under qemu-user emulation: TensorFlow
  training with oneDNN on and off and one kernel; the records say arch aarch64, and the
  oneDNN-on run's vendor evidence names the Arm Compute Library and the share of reference
  fallbacks; and one PyTorch training measurement, its evidence whichever library ran (torch
  2.15.0's wheel showed oneDNN without ACL, 2.14.1's ran ACL);
  and one with math mode bf16 (ACL's fast math), whose evidence says whether bf16 kernels
  ran, checked against the emulated CPU's BF16 capability.
- ppc64le (containers/ppc64le-debian.def) under emulation: Debian 12's own PyTorch 1.13.1
  (no TensorFlow or torch wheel exists for ppc64le); its Debian userland runs NumPy and
  archbench's TensorFlow-free parts, and one real PyTorch training measurement whose record
  says arch ppc64le, framework_version 1.13.1 and vendor evidence none (Debian's ppc64el torch
  has no oneDNN), and passes the record checks.

Needs root, debootstrap, qemu-user-static with binfmt_misc, squashfs-tools and
charliecloud: scripts/image_tools.sh installs them (as root). Without root or binfmt_misc
these tests skip, except under CI=true, where they fail. Each image is built once per
session, started at idle priority when collection ends and these tests run last
(tests/image_builds.py); the debootstrap trees are cached in /var/tmp/archbench-image-cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import image_builds
import pandas as pd
import pytest
from conftest import REPO, copy_workflow, in_ci, snakemake

from archbench.plan import containers
from archbench.plan.containers import image_digest
from archbench.workloads.training.vendor_evidence import library, precision

pytestmark = pytest.mark.images
TIMES: dict[str, float] = {}  # step -> seconds, printed at the end of the module


def unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"CI requires the image tests: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def image_tools() -> None:
    """Root, and the build and runtime tools (installed by scripts/image_tools.sh when the
    session's collection ended, as the builds started: tests/image_builds.py)."""
    if image_builds.SESSION.tools_error:
        unavailable(image_builds.SESSION.tools_error)
    if image_builds.SESSION.image_dir is None:
        unavailable("no image test was collected to build for")


def built(fixture: str) -> dict:
    """The report of the build the session started for ``fixture``."""
    build = image_builds.SESSION.started.get(fixture)
    if build is None:
        pytest.skip("this host runs that architecture natively: nothing to emulate")
    return build.report()


@pytest.fixture(scope="session")
def x86_image(image_tools) -> dict:
    return built("x86_image")


@pytest.fixture(scope="session")
def aarch64_image(image_tools) -> dict:
    return built("aarch64_image")


@pytest.fixture(scope="session")
def ppc64le_image(image_tools) -> dict:
    return built("ppc64le_image")


def ch_run(image: str, *argv: str, timeout: float = 600, workdir: Path | None = None,
           binds: Sequence[str] = ()) -> str:
    """stdout of argv run inside the image with ch-run and the image's environment;
    ``workdir`` is bound at /mnt and is the working directory there, as the workflow runs
    benchmarks; ``binds`` are more ``-b`` arguments."""
    env = {**os.environ, "USER": os.environ.get("USER") or "root"}
    bind = [arg for b in binds for arg in ("-b", b)]
    bind += ["-b", f"{workdir}:/mnt", "-c", "/mnt"] if workdir else []
    done = subprocess.run(["ch-run", "--unset-env=*", "--set-env", *bind, image, "--", *argv],
                          capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# One PyTorch training measurement (the TensorFlow benchmark's record, framework pytorch),
# run by hand inside an image
PYTORCH_TRAIN = ("python3", "-m", "archbench.train", "--framework", "pytorch", "--model", "small_cnn",
                 "--batch-per-process", "8", "--image-size", "32", "--warmup-steps", "1", "--steps", "3",
                 "--intra-threads", "1", "--output", "rec.json")
# what containers/x86_64-onednn.def pins (its test checks pyproject pins the same)
X86_PINS = containers.pinned_packages(containers.parse_definition(REPO / "containers/x86_64-onednn.def"))
TORCH_VERSION = X86_PINS["torch"]
TORCH_STACK = (TORCH_VERSION, X86_PINS["torchvision"], X86_PINS["timm"])


def pytorch_record(image: str, workdir: Path, *, arch: str, timeout: float,
                   binds: Sequence[str] = (), options: Sequence[str] = (),
                   version: str = TORCH_VERSION) -> dict:
    """The record of PYTORCH_TRAIN (and ``options``, e.g. ``--precision bf16``) run in
    ``image``: a finished PyTorch measurement of the image's torch (``version``) on
    ``arch``, with the vendor evidence of its probe."""
    workdir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    ch_run(image, *PYTORCH_TRAIN, *options, timeout=timeout, workdir=workdir, binds=binds)
    TIMES[f"pytorch measurement{''.join(' ' + o for o in options)} in the {arch} image"] = (
        time.monotonic() - start)
    record = json.loads((workdir / "rec.json").read_text())
    assert record["status"] == "ok", record.get("reason")
    assert record["framework"] == "pytorch" and record["framework_version"].split("+")[0] == version
    assert record["kind"] == "train" and record["model"] == "small_cnn" and record["arch"] == arch
    assert (record["batch_per_process"], record["image_size"], record["intra_threads"]) == (8, 32, 1)
    assert record["measured_steps"] == 3 and len(record["step_times_s"]) == 3
    assert record["throughput"] > 0 and record["throughput_unit"] == "img/s"
    TIMES[f"{arch} pytorch ({record['throughput_unit']})"] = record["throughput"]
    return record


def run_campaign(tmp_path: Path, campaign: str, *targets: str, timeout: int) -> Path:
    """The workflow copied to ``tmp_path``, campaign file ``campaign`` run to ``targets``."""
    work = copy_workflow(tmp_path / "wf")
    (work / "campaign.yaml").write_text(campaign)
    start = time.monotonic()
    # targets before --configfile, which takes every word after it as a file
    snakemake(work, *targets, "--profile", "profiles/local", "--configfile", "campaign.yaml",
              timeout=timeout)
    TIMES[f"campaign in {tmp_path.name}"] = time.monotonic() - start
    return work


def records(work: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((work / "results/raw").rglob("rep*.json"))]


# ---------------------------------------------------------------- x86_64

def test_x86_image_ran_every_step_of_its_definition(x86_image):
    image = x86_image["image"]
    assert set(x86_image["seconds"]) >= {"%files", "%post", "%test", "pack SquashFS"}
    assert x86_image["sha256"] == image_digest(image)
    assert Path(image).with_suffix(".sha256").read_text().strip() == x86_image["sha256"]
    with open(image, "rb") as handle:
        assert handle.read(4) == b"hsqs"  # a SquashFS image
    # %labels and %environment where Apptainer keeps them; the environment reaches ch-run
    labels = json.loads(ch_run(image, "cat", "/.singularity.d/labels.json"))
    assert labels["arch"] == "x86_64" and labels["horovod"] == "0.28.1"
    out = ch_run(image, "python3", "-c",
                 "import os, horovod.tensorflow as hvd, tensorflow as tf, archbench; "
                 "print(os.environ['TF_USE_LEGACY_KERAS'], os.environ['TF_ENABLE_ONEDNN_OPTS'], "
                 "tf.__version__, hvd.mpi_built(), hvd.gloo_built(), archbench.__file__)")
    assert out.split() == ["1", "1", X86_PINS["tensorflow"], "True", "True",
                           "/usr/local/lib/python3.11/site-packages/archbench/__init__.py"]
    # what the host lent the build stayed out of the image
    assert ch_run(image, "sh", "-c", "ls /etc/pip.conf /etc/xdg/pip 2>&1 || true").count("No such") == 2


def test_x86_image_builds_pytorch_and_one_horovod_for_both_frameworks(x86_image):
    image = x86_image["image"]
    labels = json.loads(ch_run(image, "cat", "/.singularity.d/labels.json"))
    assert (labels["torch"], labels["torchvision"], labels["timm"]) == TORCH_STACK
    out = ch_run(image, "python3", "-c",
                 "import torch, torchvision, timm, numpy, horovod.torch as hvd, horovod.tensorflow as htf; "
                 "print(torch.__version__, torchvision.__version__, timm.__version__, numpy.__version__, "
                 "torch.backends.mkldnn.is_available(), hvd.mpi_built(), hvd.gloo_built(), "
                 "htf.mpi_built(), hvd.__file__ == htf.__file__.replace('tensorflow', 'torch'))")
    # the index's x86_64 torch and torchvision are CUDA builds (+cu132, see the definition)
    words = [word.split("+")[0] for word in out.split()]
    assert words[:3] + words[4:] == [*TORCH_STACK, "True", "True", "True", "True", "True"]
    assert words[3].split(".")[0] == "2"  # NumPy 2, which both frameworks take


def test_pytorch_training_runs_inside_the_x86_image_on_onednn(x86_image, tmp_path):
    record = pytorch_record(x86_image["image"], tmp_path, arch="x86_64", timeout=900)
    evidence = record["vendor_evidence"]
    assert evidence["library"] == "onednn" and evidence["error"] == "", evidence
    assert evidence["implementations"] and evidence["optimized_share"] > 0
    assert record["vendor_library"] == "onednn"


def expected_bf16_execution(cpu_isa: Sequence[str]) -> str:
    """What a bf16 (autocast) PyTorch step's oneDNN primitives run in on an x86_64 CPU with
    the ISA features ``cpu_isa`` (the record's provenance): bf16 instructions
    (AVX512_BF16, AMX) run "bf16"; AVX-512 without them, bf16 converted in software ("bf16
    emulated"); without AVX-512 (a Zen 3) oneDNN has no bf16 kernels and ATen's own run,
    printing nothing ("not recorded")."""
    if {"avx512_bf16", "amx_bf16"} & set(cpu_isa):
        return "bf16"
    return "bf16 emulated" if "avx512f" in cpu_isa else "not recorded"


def test_pytorch_compiled_bf16_training_runs_inside_the_x86_image(x86_image, tmp_path):
    """torch.compile in the image (inductor compiles its kernels with the image's g++) of a
    bf16 mixed-precision step; the compiling first step is timed apart, and the evidence
    says in what precision oneDNN's convolutions and matrix products ran on this CPU."""
    record = pytorch_record(x86_image["image"], tmp_path, arch="x86_64", timeout=900,
                            options=("--precision", "bf16", "--graph", "compiled"))
    assert (record["precision"], record["math_mode"], record["graph"]) == ("bf16", "strict", "compiled")
    metrics = record["metrics"]
    assert metrics["compile_s"]["value"] > 0
    assert metrics["compile_cache_hits"]["value"] + metrics["compile_cache_misses"]["value"] > 0
    assert len(record["losses"]) == 3 and all(0 < loss < 10 for loss in record["losses"])
    evidence = record["vendor_evidence"]
    assert evidence["library"] == "onednn" and evidence["error"] == "", evidence
    ran = expected_bf16_execution(record["cpu_isa"])
    assert precision.executed_precision(evidence) == ran, evidence
    label = precision.record_precision_label(record)
    assert label == {"bf16": "", "bf16 emulated": "bf16 requested, bf16 emulated",
                     "not recorded": "bf16 requested, not recorded"}[ran]
    if ran != "not recorded":  # oneDNN's bf16 primitives ran under inductor
        assert evidence["kernel_dtypes"].get("bf16", 0) > 0
    TIMES["x86_64 pytorch bf16 compiled compile_s"] = metrics["compile_s"]["value"]
    TIMES[f"x86_64 pytorch bf16 compiled ({record['throughput_unit']}; executed {ran})"] = (
        record["throughput"])


def test_tiny_campaign_runs_inside_the_x86_image(x86_image, tmp_path):
    image = x86_image["image"]
    tiny = (REPO / "tests/campaigns/tiny.yaml").read_text()
    work = copy_workflow(tmp_path / "wf")
    system = work / "config/systems/local.yaml"
    system.write_text(system.read_text().replace(
        "container_runtime: none", f"container_runtime: charliecloud\nimage_uri: {image}"))
    (work / "campaign.yaml").write_text(tiny)
    start = time.monotonic()
    snakemake(work, "results/tables/measurements.csv", "--profile", "profiles/local",
              "--configfile", "campaign.yaml", timeout=1200)
    TIMES["tiny campaign in the x86_64 image"] = time.monotonic() - start
    found = records(work)
    assert len(found) == 4
    for record in found:
        assert record["status"] == "ok", record.get("reason")
        assert record["image"] == image and record["image_sha256"] == x86_image["sha256"]
        assert record["throughput"] > 0
    log = next((work / "logs/run_measurement").rglob("*.worker.log")).read_text()
    assert f"ch-run --unset-env=* --set-env -b {work}:/mnt -c /mnt" in log
    table = pd.read_csv(work / "results/tables/measurements.csv")
    assert set(table["image_sha256"]) == {x86_image["sha256"]}


# ---------------------------------------------------------------- aarch64 (emulated)

def test_aarch64_image_ran_every_step_of_its_definition(aarch64_image):
    image = aarch64_image["image"]
    assert aarch64_image["build_args"] == {"HOROVOD": "0"}
    assert set(aarch64_image["seconds"]) >= {"%files", "%post", "%test", "pack SquashFS"}
    out = ch_run(image, "python3", "-c", "import platform, os; print(platform.machine(), "
                 "os.environ['TF_ENABLE_ONEDNN_OPTS'])")
    assert out.split() == ["aarch64", "1"]


def test_aarch64_training_and_kernel_under_emulation_show_acl(aarch64_image, tmp_path):
    campaign = (REPO / "tests/campaigns/emulated_aarch64.yaml").read_text()
    work = run_campaign(tmp_path, campaign.replace("IMAGE", aarch64_image["image"]),
                        "results/tables/measurements.csv", "results/tables/vendor_evidence.csv",
                        timeout=3000)
    found = {(r["kind"], r.get("vendor_library_enabled")): r for r in records(work)}
    assert len(found) == 3
    for record in found.values():
        assert record["status"] == "ok", record.get("reason")
        assert record["arch"] == "aarch64"
        assert record["image_sha256"] == aarch64_image["sha256"]
    on, off = found[("train", True)], found[("train", False)]
    evidence = on["vendor_evidence"]
    assert evidence["library"] == "onednn+acl", evidence
    assert any(name.endswith(":acl") or name == "acl" for name in evidence["implementations"])
    # the backward convolutions fall back to oneDNN's reference code on aarch64
    assert 0 < evidence["reference_share"] < 1
    assert any("ref" in name for name in evidence["implementations"])
    assert on["vendor_library"] == "onednn-acl" and not on.get("vendor_mismatch")
    assert off["vendor_evidence"]["library"] == "none"
    assert set(pd.read_csv(work / "results/tables/measurements.csv")["arch"]) == {"aarch64"}
    # the first aarch64 rows of the vendor-evidence table: ACL, and the reference share
    table = pd.read_csv(work / "results/tables/vendor_evidence.csv").set_index("vendor_library_enabled")
    assert table.loc[True, "library"] == "onednn+acl" and table.loc[False, "library"] == "none"
    assert table.loc[True, "reference_share"] == pytest.approx(evidence["reference_share"])
    assert "acl" in table.loc[True, "implementations"]
    for (kind, enabled), record in found.items():
        setting = "" if kind == "kernel" else f" oneDNN {'on' if enabled else 'off'}"
        TIMES[f"aarch64 {kind}{setting} ({record['throughput_unit']}, emulated)"] = record["throughput"]
    TIMES["aarch64 oneDNN reference share"] = evidence["reference_share"]


def test_pytorch_training_under_emulation_shows_acl(aarch64_image, tmp_path):
    # qemu 7.2 shows an aarch64 process the x86_64 host's /proc/cpuinfo, and torch's CPU
    # detection (cpuinfo) crashes on it once /sys lists the host's CPUs: they are hidden
    # (an emulation-only workaround; oneDNN and ACL read the emulated CPU's hwcaps)
    no_cpus = tmp_path / "no-cpu-sysfs"
    no_cpus.mkdir()
    record = pytorch_record(aarch64_image["image"], tmp_path / "run", arch="aarch64", timeout=2400,
                            binds=[f"{no_cpus}:/sys/devices/system/cpu"])
    evidence = record["vendor_evidence"]
    assert evidence["error"] == "" and evidence["implementations"], evidence
    # torch 2.14.1's aarch64 wheel ran oneDNN through the Arm Compute Library here; 2.15.0's
    # showed oneDNN's own kernels only: the record says whichever ran, consistently
    acl_ran = any(name.endswith(":acl") or name == "acl" for name in evidence["implementations"])
    assert evidence["library"] == ("onednn+acl" if acl_ran else "onednn"), evidence
    # what ran (the command declared the default, onednn)
    assert record["vendor_library"] == library.RECORDED_NAMES[evidence["library"]]
    TIMES[f"aarch64 pytorch vendor library: {evidence['library']}"] = 0.0
    TIMES["aarch64 pytorch oneDNN reference share"] = evidence["reference_share"] or 0.0


# the emulated CPU's hardware capabilities as the kernel (here qemu) hands them to a process:
# AT_HWCAP2 and its BF16 bit (what ACL reads; /proc/cpuinfo under qemu-user is the host's)
EMULATED_BF16 = ("import ctypes; libc = ctypes.CDLL(None); libc.getauxval.restype = ctypes.c_ulong; "
                 "print(bool(libc.getauxval(26) & (1 << 14)))")


def test_pytorch_bf16_math_mode_under_emulation_names_what_ran(aarch64_image, tmp_path):
    """fp32 math mode bf16 (oneDNN's fpmath mode, ACL's fast math) under emulation: the
    evidence says what ran. ACL computes fp32 tensors in bf16 only where the CPU has BF16
    instructions (HWCAP2_BF16); its oneDNN lines show fp32 tensors with attr-fpmath:bf16
    either way, so the record is "bf16 fast math" only where ACL's own kernel names say
    bf16, and otherwise, honestly, "bf16 requested, fp32 executed"."""
    image = aarch64_image["image"]
    no_cpus = tmp_path / "no-cpu-sysfs"  # as in the test above
    no_cpus.mkdir()
    has_bf16 = ch_run(image, "python3", "-c", EMULATED_BF16).strip() == "True"
    record = pytorch_record(image, tmp_path / "run", arch="aarch64", timeout=2400,
                            binds=[f"{no_cpus}:/sys/devices/system/cpu"],
                            options=("--math-mode", "bf16"))
    assert (record["precision"], record["math_mode"]) == ("fp32", "bf16")
    # the record's ISA is the emulated CPU's (its hwcaps), not the x86 host's
    assert record["cpu_isa"] and "asimd" in record["cpu_isa"], record["cpu_isa"]
    assert ("bf16" in record["cpu_isa"]) == has_bf16 and "avx2" not in record["cpu_isa"]
    evidence = record["vendor_evidence"]
    assert evidence["library"] in ("onednn", "onednn+acl") and evidence["error"] == "", evidence
    if evidence["library"] == "onednn+acl":  # the hint reached oneDNN: fpmath bf16, on ACL
        assert "bf16" in evidence["fpmath"] and "acl" in evidence["kernel_isa"], evidence
    ran = precision.executed_precision(evidence)
    label = precision.record_precision_label(record)
    bf16_kernels = [name for name in evidence["external_kernels"] if "bf16" in name.lower()]
    if bf16_kernels:  # ACL's kernels say bf16: fast math ran (needs BF16 in the CPU)
        assert has_bf16 and ran == "bf16 fast math" and label == "", evidence
    elif not has_bf16:  # ACL has no bf16 kernels to run: fp32, and the label says so
        assert ran == "fp32" and label == "bf16 requested, fp32 executed", evidence
    else:
        # qemu's CPU has BF16 (HWCAP2_BF16) but no ACL kernel name was printed: the
        # evidence keeps what oneDNN's lines show (seen: bf16 tensors where fast math
        # reordered to bf16, about half the compute time; oneDNN's fp32 reference kernels
        # the other half; ACL primitives with unnamed kernels "not recorded"), and the
        # label follows the largest share: none when bf16 ran, else it says what did
        assert evidence["kernel_dtypes"].get("fp32", 0) > 0, evidence
        assert ran in ("bf16", "fp32", precision.NOT_RECORDED), evidence
        if ran == "bf16":
            assert evidence["kernel_dtypes"].get("bf16", 0) > 0 and label == "", (label, evidence)
        else:
            assert label in ("bf16 requested, fp32 executed", "bf16 requested, not recorded"), label
    TIMES[f"aarch64 pytorch math mode bf16: emulated CPU BF16 {has_bf16}, executed {ran}, "
          f"ACL kernels {sorted(evidence['external_kernels']) or 'not printed'}"] = (
        record["throughput"])


# ---------------------------------------------------------------- ppc64le (emulated)

PPC64LE_SMOKE = """\
import platform
import numpy, torch, torchvision
import archbench.workloads.kernels
from archbench.core import provenance
from archbench.workloads.training import frameworks
a = numpy.random.default_rng(0).random((256, 256))
print(platform.machine(), numpy.__version__, torch.__version__,
      torchvision.__version__, torch.backends.mkldnn.is_available(), bool((a @ a.T).trace() > 0),
      frameworks.framework("pytorch").installed_version(), provenance.cpu_isa(),
      ",".join(sorted(archbench.workloads.kernels.KERNELS)))
"""
PPC64LE_TORCH = "1.13.1"  # Debian 12's python3-torch (containers/ppc64le-debian.def)


def test_ppc64le_image_runs_debians_pytorch_numpy_and_archbench(ppc64le_image, tmp_path):
    """No TensorFlow or torch wheel for ppc64le on the package index: the Debian ppc64el
    image, Debian's PyTorch and NumPy, and archbench's worker side in it (the
    framework version it records, the ISA it states under emulation, the kernel registry).
    Campaign loading is not among them: it imports the tuner's optuna, which the images,
    running workers only, do not install."""
    image = ppc64le_image["image"]
    assert set(ppc64le_image["seconds"]) >= {"%files", "%post", "%test", "pack SquashFS"}
    labels = json.loads(ch_run(image, "cat", "/.singularity.d/labels.json"))
    assert (labels["arch"], labels["torch"], labels["torchvision"]) == ("ppc64le", PPC64LE_TORCH, "0.14.1")
    assert "tensorflow" not in labels and "horovod" not in labels
    (tmp_path / "smoke.py").write_text(PPC64LE_SMOKE)
    start = time.monotonic()
    out = ch_run(image, "python3", "smoke.py", workdir=tmp_path, timeout=900).split()
    TIMES["ppc64le smoke (torch import, numpy, archbench)"] = time.monotonic() - start
    # machine, NumPy, torch and torchvision (their versions as the .def states them),
    # no oneDNN in Debian's ppc64el build, a matrix product, the version a record states, no
    # ISA (qemu shows the host's x86 flags), the kernels
    assert out[0] == "ppc64le" and out[1].startswith("1.24.")
    assert out[2:4] == [PPC64LE_TORCH, "0.14.1"]
    assert out[4:] == ["False", "True", PPC64LE_TORCH, "None", "cg,fft,matmul,stream,stream_comm"]


def test_pytorch_training_under_ppc64le_emulation_is_a_sound_record(ppc64le_image, tmp_path):
    """One real PyTorch training measurement (small CNN, 3 steps, fp32 eager) of Debian's
    torch 1.13.1 on emulated ppc64le: the record names the arch and version, its vendor
    evidence says no oneDNN ran (none declared, none seen: no mismatch) and which BLAS the
    process loaded, and it passes every record check."""
    from archbench.workloads import sense
    record = pytorch_record(ppc64le_image["image"], tmp_path, arch="ppc64le", timeout=2400,
                            options=("--vendor-library", "none"), version=PPC64LE_TORCH)
    assert (record["precision"], record["math_mode"], record["graph"]) == ("fp32", "strict", "eager")
    evidence = record["vendor_evidence"]
    assert evidence["library"] == "none" and evidence["error"] == "", evidence
    assert not evidence["implementations"]
    assert any("blas" in name for name in evidence["loaded_libraries"]), evidence
    assert not record.get("vendor_mismatch") and record["vendor_library"] is None
    assert len(record["losses"]) == 3 and all(0 < loss < 10 for loss in record["losses"])
    sense.check(record, "ppc64le record")


def teardown_module() -> None:
    for name, value in image_builds.TIMES.items():
        print(f"image tests: build {name} (wall, from the end of collection): {value:.3f}",
              file=sys.stderr)
    for name, value in TIMES.items():
        print(f"image tests: {name}: {value:.3f}", file=sys.stderr)
