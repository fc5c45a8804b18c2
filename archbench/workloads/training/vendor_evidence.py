"""Which vendor library really ran: evidence from oneDNN's verbose mode, not a label.

A system file *declares* its vendor library (``vendor_library``); what executed is found
by a probe: the writing worker starts one short child process
(``python -m archbench.workloads.training.vendor_probe_child``) that builds the same model with the same batch,
threads, data format and vendor flag (TF_ENABLE_ONEDNN_OPTS), runs one warm-up step and
then ONE probe step with ``ONEDNN_VERBOSE=1``. oneDNN reads that variable once, when it
first runs in a process, and TensorFlow exposes no runtime switch (its library does not
export oneDNN's ``dnnl_set_verbose``), so the probe cannot run inside the measured process
without its verbose output slowing the measured steps; the child leaves the run's timing
untouched. A run that probes starts the child first thing, before it imports TensorFlow,
and waits for it after its first step (:class:`ProbeChild`): the two start-ups and step
tracings overlap, the rest of the warm-up and the window run alone. Only the lines
between the probe step's two markers count.

PyTorch switches oneDNN's verbose mode at run time (``torch.backends.mkldnn.verbose``):
a one-process PyTorch run probes ONE more step of its own, after the window, with the
mode on around that step only (:func:`probe_in_process`), and starts no child.

What ran does not change between runs whose probes would be the same (the same probe
settings, ``settings``: model, batch per process, image size, classes, threads, data
format, vendor flag and seed) on one system, image, framework version and code. A run
states the evidence such a run's own probe gathered instead of probing
(:func:`shared_evidence`), with ``source`` naming the record that probed: first another
repetition of its configuration (:func:`earlier_record`), else the last run of the
system, in any configuration or experiment, that probed with the same settings
(:func:`indexed_record`: a 2-rank Horovod run states the evidence of the 1-process run
with its per-process settings). A run finds none when the others have not run yet or
their probe failed: it probes, and the later ones state its evidence.

A vendor-off run is probed the same way, with the flag off: TensorFlow's own kernels then
run, and any oneDNN *primitive* that still executes contradicts the flag. The oneDNN
``gemm_api`` lines are not primitives: on x86_64 TensorFlow's Eigen contraction kernel calls
oneDNN's sgemm with the flag on or off; they are reported as ``gemm_api_share`` and counted
neither as optimized nor as reference implementations.

Evidence (record field ``vendor_evidence``): ``library`` (onednn | onednn+acl | armpl |
none), oneDNN ``version`` and ``isa``, ``implementations`` (name -> calls, ms, share of the
probe step's oneDNN time), ``optimized_share``, ``reference_share`` (implementations named
``ref``, e.g. ``gemm:ref``, ``ref:any``), ``gemm_api_share`` and ``loaded_libraries`` (math
runtimes mapped into the probe process). ArmPL counts as evidence only when oneDNN reports
an external-BLAS implementation (``gemm:blas``) while libarmpl is loaded: an ArmPL build of
TensorFlow that calls ArmPL outside oneDNN leaves no trace here (its records say library
none with libarmpl among the loaded libraries, and are flagged when declared armpl).

What precision executed (:func:`precision_evidence`): the probe step's computing
primitives (convolution, matmul, inner_product, ...), their data types in either syntax of
the oneDNN versions the frameworks bundle (``src:bf16:...`` in 3.6+, ``src_bf16:...`` in
3.5), the ISA of their implementations and their ``attr-fpmath:`` attribute, as
``kernels``, ``kernel_dtypes``, ``kernel_isa``, ``fpmath``, ``external_kernels``,
``compute_share`` and ``executed_precision`` (bf16, bf16 fast math, bf16 emulated, fp16,
fp32, or "not recorded" when none ran in oneDNN). :func:`precision_label` compares it with
the precision and fp32 math mode a run asked for ("bf16 requested, fp32 executed"). The
probe must run with the run's numerics: the child builds its run from every probe setting
it is given (``Setting.probe``), and evidence is never stated across requested numerics
(:func:`why_not_shared` compares :data:`REQUEST_FIELDS`, absent ones as their defaults).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Callable, Sequence

from archbench.core.fields import NUMERICS_DEFAULTS
from archbench.core.files import MAX_RECORD_BYTES, atomic_write_text, read_regular
from archbench.core.provenance import PERFORMANCE_ENV
from archbench.workloads.training.settings import command_line

PROBE_BEGIN = "archbench-vendor-probe-begin"
PROBE_END = "archbench-vendor-probe-end"
LIBRARIES_LINE = "archbench-vendor-probe-libraries:"
# oneDNN v3 reads ONEDNN_/DNNL_, v1-v2 DNNL_, MKL-DNN v0 MKLDNN_; "1" = executions + errors
VERBOSE_ENV = {"ONEDNN_VERBOSE": "1", "DNNL_VERBOSE": "1", "MKLDNN_VERBOSE": "1"}
PROBE_TIMEOUT_S = 300.0
GEMM_API = "gemm_api"  # oneDNN's sgemm entry point (Eigen's contraction kernel on x86_64)
LIBRARIES = ("onednn", "onednn+acl", "armpl", "none")
# what each declared vendor_library (config/systems/*.yaml) must show when enabled
EXPECTED = {"onednn": "onednn", "mkl": "onednn", "onednn-acl": "onednn+acl",
            "acl": "onednn+acl", "armpl": "armpl", "none": "none"}
# math runtimes worth naming when mapped into the probe process (the BLAS and LAPACK too:
# a framework built without oneDNN, Debian's ppc64el PyTorch, computes through them)
_RUNTIMES = re.compile(r"^lib(armpl|mkl|iomp5|gomp|omp|arm_compute|dnnl|mkldnn|openblas|blis|blas|lapack)[^/]*\.so")
# record fields in which a run must equal the run whose evidence it states: where and from
# what it ran, and the settings the probe takes (evidence from before it stated its probe's
# settings is only offered to the repetitions of its configuration, whose hash covers
# the others)
SAME_FOR_EVIDENCE = ("arch", "cpu_model", "image", "image_sha256", "git_commit", "framework",
                     "framework_version", "device", "model", "batch_per_process", "image_size",
                     "intra_threads", "inter_threads", "vendor_library_enabled")
# thread counts a run that sets its intra-op threads tells its framework itself: the
# framework does not read these then (Snakemake sets them to a job's threads)
THREAD_COUNT_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
# where a system's runs find the last record that probed with given settings: beside its
# experiments, <raw>/<system>/.vendor-probes/<probe key>.json, naming the record
PROBES_DIR = ".vendor-probes"
_VERSION = re.compile(r"(?:oneDNN|DNNL|MKL-DNN)\s+v(\d[\w.]*)")
_TIMESTAMP = re.compile(r"^(v\d+|\d+(\.\d+)?)$")


def _fields(line: str) -> list[str] | None:
    """The comma-separated fields of a verbose line after its prefix, the format version
    ("v1") and an optional timestamp; None for any other line."""
    parts = line.strip().split(",")
    if not parts[0].endswith("_verbose"):
        return None
    rest = parts[1:]
    while rest and _TIMESTAMP.match(rest[0]):
        rest = rest[1:]
    if rest[:1] in (["primitive"], ["graph"]):
        rest = rest if rest[0] == "graph" else rest[1:]
    return rest


def _exec_entry(fields: list[str]) -> tuple[str, float] | None:
    """(implementation name, ms) of one primitive execution line, else None."""
    if not fields or fields[0] != "exec" or len(fields) < 4:
        return None
    rest = fields[1:]
    if rest[0] in ("cpu", "gpu"):  # MKL-DNN v0 lines have no engine field
        rest = rest[1:]
    kind, impl = rest[0], rest[1].strip()
    try:
        ms = float(fields[-1])
    except ValueError:
        return None
    return impl or kind, ms  # gemm_api lines name no implementation


def probe_lines(text: str) -> tuple[list[str], list[str]]:
    """(every verbose line, the verbose lines of the probe step); without markers every
    line is the probe step's (a plain verbose log)."""
    lines = text.splitlines()
    if PROBE_BEGIN not in text:
        return lines, lines
    begin = next(i for i, line in enumerate(lines) if line.strip() == PROBE_BEGIN)
    end = next((i for i, line in enumerate(lines) if line.strip() == PROBE_END), len(lines))
    return lines, lines[begin + 1:end]


def classify(implementation: str) -> str:
    """"reference" for oneDNN's reference code (a ``ref`` part: ``gemm:ref``, ``ref:any``,
    ``ref_fused``), "api" for the unnamed sgemm entry point, else "optimized"."""
    if implementation == GEMM_API:
        return "api"
    parts = re.split(r"[:_\s]", implementation.lower())
    return "reference" if "ref" in parts else "optimized"


def library_of(implementations: Sequence[str], loaded: Sequence[str] = ()) -> str:
    """The vendor library the executed implementations show (see the module docstring)."""
    named = [i.lower() for i in implementations if i != GEMM_API]
    if any("acl" in i.split(":") for i in named):  # gemm:acl, indirect_gemm:acl, acl
        return "onednn+acl"
    if any("blas" in re.split(r"[:_]", i) for i in named) and any("armpl" in x for x in loaded):
        return "armpl"
    return "onednn" if named else "none"


def parse_verbose(text: str, loaded: Sequence[str] = ()) -> dict:
    """Evidence from oneDNN verbose output (the probe step's lines when it has markers):
    library, version, isa, per-implementation calls/ms/share and the optimized, reference
    and gemm_api shares of the oneDNN time (None when nothing executed), and what
    precision the computing primitives ran in (:func:`precision_evidence`)."""
    every, step = probe_lines(text)
    version = isa = None
    for line in every:
        fields = _fields(line) or []
        if fields[:1] == ["info"]:
            info = ",".join(fields[1:])
            match = _VERSION.search(info)
            version = version or (match.group(1) if match else None)
            if "isa:" in info:
                isa = isa or info.split("isa:", 1)[1].strip()
    totals: dict[str, list[float]] = {}
    for line in step:
        entry = _exec_entry(_fields(line) or [])
        if entry:
            calls_ms = totals.setdefault(entry[0], [0, 0.0])
            calls_ms[0] += 1
            calls_ms[1] += entry[1]
    total = sum(ms for _, ms in totals.values())
    share = {name: (ms / total if total > 0 else None) for name, (_, ms) in totals.items()}

    def share_of(category: str) -> float | None:
        if not totals or total <= 0:  # summed from the times, not the rounded shares
            return None
        return min(1.0, sum(ms for name, (_, ms) in totals.items() if classify(name) == category) / total)

    return {
        "library": library_of(list(totals), loaded), "version": version, "isa": isa,
        "implementations": {name: {"calls": int(calls), "ms": round(ms, 6),
                                   "share": None if share[name] is None else round(share[name], 6)}
                            for name, (calls, ms) in sorted(totals.items())},
        "optimized_share": share_of("optimized"), "reference_share": share_of("reference"),
        "gemm_api_share": share_of("api"), "loaded_libraries": sorted(loaded), "error": "",
        **precision_evidence(step, isa),
    }


# ------------------------------------------------------------------ what precision ran
# oneDNN primitives that compute (their tensors' data types and the ISA of their
# implementation say in what precision the step's arithmetic ran); reorders, pooling,
# eltwise and the like only move or map values
COMPUTE_KINDS = ("convolution", "deconvolution", "matmul", "inner_product", "rnn")
# one memory descriptor of a primitive line: ``src:bf16::blocked:ab::f0`` (oneDNN >= 3.6,
# PyTorch's) or ``src_bf16::blocked:ab::f0`` (oneDNN 3.5, TensorFlow's)
_DESCRIPTOR = re.compile(
    r"^(?P<arg>(?:diff_)?(?:src|wei|bia|dst|ws)(?:_iter_c|_iter|_layer|_c)?)[:_]"
    r"(?P<dt>f32|bf16|f16|tf32|f64|s32|s8|u8|s4|u4|f8_e5m2|f8_e4m3|e8m0|f4_e2m1|f4_e3m0|undef)(?::|$)")
# ISA tokens of an implementation name (``brg_matmul:avx512_core_bf16``, ``jit:sve_256``,
# ``gemm:acl``): oneDNN's cpu_isa_t names as its verbose lines print them
_ISA_TOKEN = re.compile(r"^(sse41|avx|avx2(_vnni(_2)?)?|avx512_core\w*|avx10\w*|amx\w*|uni|any"
                        r"|asimd|sve(_\d+)?|acl)$")
# ISAs whose bf16 kernels use bf16 instructions (AVX512_BF16, AMX-BF16, AVX-NE-CONVERT,
# AVX10); a bf16 primitive on another ISA (avx512_core, avx2, uni) converts in software
BF16_NATIVE_ISA = re.compile(r"^(avx512_core_bf16|avx512_core_fp16|avx512_core_amx\w*|avx2_vnni_2"
                             r"|avx10\w*|acl)$")
# ISAs on which oneDNN computes f32 tensors in bf16 when the fpmath attribute allows it
# (x86: only AMX, "bf32"; aarch64: ACL fast math, proven by its external kernel's name)
BF16_FASTMATH_ISA = re.compile(r"^(avx512_core_amx\w*)$")
# executed precisions (evidence ``executed_precision``; docs/metrics.md)
EXECUTED = ("bf16", "bf16 fast math", "bf16 emulated", "fp16", "fp32", "int8", "other")
NOT_RECORDED = "not recorded"
_DT_CLASS = {"f32": "fp32", "f64": "fp32", "tf32": "fp32", "f16": "fp16", "s8": "int8", "u8": "int8"}
# oneDNN's data type names in archbench's vocabulary (the precision setting's: fp32, bf16,
# fp16), so that a record names a data type one way; others keep oneDNN's name
DTYPE_NAMES = {"f32": "fp32", "f64": "fp64", "f16": "fp16", "s8": "int8", "u8": "uint8",
               "s32": "int32"}


def dtype_name(onednn: str) -> str:
    """A oneDNN data type (``f32``) in archbench's vocabulary (``fp32``)."""
    return DTYPE_NAMES.get(onednn, onednn)
# the record fields that state what precision a run asked for, and their defaults (records
# written before them ran fp32, strict, eager): core.fields' NUMERICS_DEFAULTS
PRECISION_FIELD, MATH_MODE_FIELD, GRAPH_FIELD = NUMERICS_DEFAULTS
DEFAULT_PRECISION, DEFAULT_MATH_MODE, DEFAULT_GRAPH = NUMERICS_DEFAULTS.values()
# the record fields a numerics configuration is told apart by, each with what its absence means
REQUEST_FIELDS = dict(NUMERICS_DEFAULTS)


def descriptors(text: str) -> dict[str, str]:
    """Data type per argument (src, wei, bia, dst, diff_src, ...) of a verbose line's
    memory-descriptor field, in either syntax (``src:bf16:...`` or ``src_bf16:...``)."""
    found = {}
    for token in text.split():
        match = _DESCRIPTOR.match(token)
        if match:
            found.setdefault(match.group("arg"), match.group("dt"))
    return found


def fpmath_of(attributes: str) -> str:
    """The ``attr-fpmath:`` mode of a verbose line's attribute field ("" when absent):
    ``attr-fpmath:bf16`` and ``attr-fpmath:bf16:true`` give "bf16"."""
    for token in attributes.split():
        if token.startswith("attr-fpmath:"):
            return token.split(":")[1]
    return ""


def isa_tokens(implementation: str) -> list[str]:
    """The ISA names in an implementation name (``brg_conv_bwd:avx512_core_bf16+
    brg_conv_fwd:avx512_core_bf16`` -> [avx512_core_bf16]; ``gemm:jit:bf16`` -> [])."""
    tokens = []
    for piece in implementation.split("+"):
        for part in piece.split(":"):
            if _ISA_TOKEN.match(part) and part not in tokens:
                tokens.append(part)
    return tokens


def compute_entry(fields: list[str]) -> dict | None:
    """One execution of a computing primitive (:data:`COMPUTE_KINDS`): kind, implementation,
    the src/wei/dst data types, the fpmath attribute and ms; None for any other line
    (reorders, gemm_api, MKL-DNN v0 lines, which have no engine field)."""
    if len(fields) < 8 or fields[0] != "exec" or fields[1] not in ("cpu", "gpu"):
        return None
    kind, impl = fields[2], fields[3].strip()
    if kind not in COMPUTE_KINDS or not impl:
        return None
    try:
        ms = float(fields[-1])
    except ValueError:
        return None
    dts = descriptors(fields[5])
    return {"kind": kind, "implementation": impl,
            **{arg: dts.get(arg, "undef") for arg in ("src", "wei", "dst")},
            "fpmath": fpmath_of(fields[6]), "ms": ms}


def compute_class(entry: dict, *, info_isa: str | None = None,
                  external: Sequence[str] = ()) -> str:
    """In what precision one computing primitive ran (:data:`EXECUTED`):

    - bf16 tensors: "bf16" on an ISA with bf16 instructions (:data:`BF16_NATIVE_ISA`; an
      implementation that names no ISA, e.g. ``gemm:jit:bf16``, by oneDNN's ``isa`` info
      line ``info_isa``), else "bf16 emulated" (``jit_bf16:avx512_core``: no bf16
      instructions, converted in software);
    - f32 tensors with ``attr-fpmath:bf16`` (or ``any``): "bf16 fast math" on AMX
      (oneDNN's bf32) or with ACL when an ACL kernel that ran (``external``, the
      ``exec:external`` names) has bf16 in its name; "not recorded" with ACL when no ACL
      kernel was named (oneDNN names them only with its ``profile_externals`` verbose flag,
      and ACL may or may not have computed in bf16); otherwise "fp32": the attribute is a
      hint, which oneDNN ignores where the ISA has no bf32 kernels (AVX512_BF16 included);
    - f16 tensors "fp16", s8/u8 "int8", f32 "fp32"."""
    dts = {entry.get("src"), entry.get("wei")}
    isas = isa_tokens(entry.get("implementation", ""))
    if "bf16" in dts:
        if any(BF16_NATIVE_ISA.match(i) for i in isas):
            return "bf16"
        if not [i for i in isas if i not in ("uni", "any")] and info_isa and re.search(
                r"bfloat16|bf16|AMX|AVX10", info_isa, re.IGNORECASE):
            return "bf16"
        return "bf16 emulated"
    if "f16" in dts:
        return "fp16"
    if dts & {"s8", "u8"}:
        return "int8"
    if dts & {"f32", "f64", "tf32"}:
        if entry.get("fpmath") in ("bf16", "any"):
            if any(BF16_FASTMATH_ISA.match(i) for i in isas):
                return "bf16 fast math"
            if "acl" in isas and any("bf16" in name.lower() for name in external):
                return "bf16 fast math"
            if "acl" in isas and not external:  # ACL's kernels unnamed: fast math unseen
                return NOT_RECORDED
        return "fp32"
    return _DT_CLASS.get(entry.get("src") or "", "other")


def external_kernels(step: Sequence[str]) -> dict[str, int]:
    """Kernel name -> calls of the ``exec:external`` lines of a probe step (aarch64: the
    ACL kernel that really ran, ``CpuGemmAssemblyWrapperKernel/sve_..._bf16fp32_mmla_...``)."""
    names: dict[str, int] = {}
    for line in step:
        fields = _fields(line) or []
        if fields[:1] == ["exec:external"] and len(fields) >= 3:
            names[fields[1]] = names.get(fields[1], 0) + 1
    return names


def precision_evidence(step: Sequence[str], info_isa: str | None = None) -> dict:
    """What precision the computing primitives of a probe step ran in:

    - ``kernels``: one entry per distinct kind, implementation, src/wei/dst data type and
      fpmath attribute, with its class (:func:`compute_class`), calls and ms;
    - ``kernel_dtypes``: calls per tensor data type (src, or wei where src is f32 and wei
      is not), named as the precision setting names them (:func:`dtype_name`):
      {"bf16": 12, "fp32": 1};
    - ``kernel_isa``: the ISA names of their implementations, sorted;
    - ``fpmath``: the fpmath modes they carried, sorted (empty: strict);
    - ``external_kernels``: the ``exec:external`` kernel names (ACL) and their calls;
    - ``compute_share``: class -> share of the computing primitives' time (of their calls
      where no time was measured);
    - ``executed_precision``: the class with the largest share, "not recorded" when no
      computing primitive ran (PyTorch's fp32 GEMMs go to its BLAS, XLA-compiled
      TensorFlow and ATen's own bf16 kernels print nothing, a GPU run prints nothing)."""
    external = external_kernels(step)
    kernels: dict[tuple, dict] = {}
    for line in step:
        entry = compute_entry(_fields(line) or [])
        if entry is None:
            continue
        key = tuple(entry[k] for k in ("kind", "implementation", "src", "wei", "dst", "fpmath"))
        kept = kernels.setdefault(key, {**{k: entry[k] for k in ("kind", "implementation", "src", "wei",
                                                                  "dst", "fpmath")},
                                        "class": compute_class(entry, info_isa=info_isa,
                                                               external=list(external)),
                                        "calls": 0, "ms": 0.0})
        kept["calls"] += 1
        kept["ms"] += entry["ms"]
    rows = list(kernels.values())
    dtypes: dict[str, int] = {}
    for k in rows:
        dt = k["wei"] if k["src"] in ("f32", "undef") and k["wei"] not in ("f32", "undef") else k["src"]
        dtypes[dtype_name(dt)] = dtypes.get(dtype_name(dt), 0) + k["calls"]
    total_ms = sum(k["ms"] for k in rows)
    weight = (lambda k: k["ms"] / total_ms) if total_ms > 0 else (
        lambda k: k["calls"] / sum(r["calls"] for r in rows))
    share: dict[str, float] = {}
    for k in rows:
        share[k["class"]] = share.get(k["class"], 0.0) + weight(k)
    executed = (max(share, key=lambda c: (share[c], -EXECUTED.index(c) if c in EXECUTED else -99))
                if share else NOT_RECORDED)
    return {
        "kernels": [{**k, **{t: dtype_name(k[t]) for t in ("src", "wei", "dst")},
                     "ms": round(k["ms"], 6)} for k in sorted(
            rows, key=lambda k: (-k["ms"], k["kind"], k["implementation"]))],
        "kernel_dtypes": dict(sorted(dtypes.items())),
        "kernel_isa": sorted({i for k in rows for i in isa_tokens(k["implementation"])}),
        "fpmath": sorted({k["fpmath"] for k in rows if k["fpmath"]}),
        "external_kernels": dict(sorted(external.items())),
        "compute_share": {c: round(min(1.0, v), 6) for c, v in sorted(share.items())},
        "executed_precision": executed,
    }


def requested_precision(record: dict) -> str:
    """What precision a run asked for: "bf16", "fp16" or "tf32" when its ``precision``
    or its fp32 math mode asks for one (precision wins), else "fp32" (absent fields read
    as fp32, strict: records from before them)."""
    precision = record.get(PRECISION_FIELD) or DEFAULT_PRECISION
    mode = record.get(MATH_MODE_FIELD) or DEFAULT_MATH_MODE
    if precision != DEFAULT_PRECISION:
        return str(precision)
    return DEFAULT_PRECISION if mode == DEFAULT_MATH_MODE else str(mode)


def executed_precision(evidence: dict | None) -> str:
    """The evidence's ``executed_precision``; "not recorded" without a finished probe or
    for evidence from before it was kept."""
    if not evidence or evidence.get("library") is None:
        return NOT_RECORDED
    return evidence.get("executed_precision") or NOT_RECORDED


def precision_label(precision: str | None, math_mode: str | None, evidence: dict | None) -> str:
    """How what executed compares with what was asked (every table shows it): "" when
    they agree; "bf16 requested, fp32 executed" for a bf16 run (precision bf16 or math
    mode bf16) whose computing primitives ran in fp32; "bf16 requested, bf16 emulated"
    when they ran bf16 without bf16 instructions; "<asked> requested, not recorded" when
    no computing primitive was seen (no probe, a failed probe, a GPU run, XLA). An fp32
    strict run is labelled only when the evidence contradicts it ("fp32 requested, bf16
    executed"); bf16 fast math (f32 tensors computed in bf16) satisfies a bf16 request."""
    asked = requested_precision({PRECISION_FIELD: precision, MATH_MODE_FIELD: math_mode})
    ran = executed_precision(evidence)
    if asked == DEFAULT_PRECISION:
        return "" if ran in (DEFAULT_PRECISION, NOT_RECORDED) else f"fp32 requested, {ran} executed"
    if ran == NOT_RECORDED:
        return f"{asked} requested, not recorded"
    if ran == asked or (asked == "bf16" and ran == "bf16 fast math"):
        return ""
    if ran == "bf16 emulated":
        return f"{asked} requested, bf16 emulated"
    return f"{asked} requested, {ran} executed"


def record_precision_label(record: dict) -> str:
    """:func:`precision_label` of a record: its requested precision and fp32 math mode
    (:data:`PRECISION_FIELD`, :data:`MATH_MODE_FIELD`) against its vendor evidence."""
    return precision_label(record.get(PRECISION_FIELD), record.get(MATH_MODE_FIELD),
                           record.get("vendor_evidence"))


def failed_evidence(reason: str) -> dict:
    """Evidence of a probe that did not finish: no library, the reason in ``error``."""
    return {"library": None, "version": None, "isa": None, "implementations": {},
            "optimized_share": None, "reference_share": None, "gemm_api_share": None,
            "loaded_libraries": [], "error": reason[:300]}


# OpenMP runtimes that read KMP_BLOCKTIME / KMP_AFFINITY (Intel's, and LLVM's, which shares
# its code); GNU libgomp and TensorFlow's own thread pool ignore them
KMP_READERS = ("libiomp5", "libomp")


def kmp_read_by(evidence: dict | None) -> str | None:
    """Which runtime mapped into the probe process reads the KMP_* settings: their names
    joined, "none" when the probe saw none (the settings then change nothing), None
    without a finished probe."""
    if not evidence or evidence.get("library") is None:
        return None
    readers = [n for n in evidence.get("loaded_libraries") or []
               if n.split(".so")[0] in KMP_READERS]
    return " ".join(sorted(readers)) or "none"


def evidence_columns(evidence: dict | None) -> dict:
    """A record's evidence as flat tidy-table columns (implementations as one text:
    ``name=share`` pairs, largest share first; ``vendor_evidence_source``: the run id of
    the record whose probe it is, None for the record's own)."""
    e = evidence or {}
    impls = sorted((e.get("implementations") or {}).items(),
                   key=lambda kv: (-(kv[1].get("share") or 0), kv[0]))
    return {
        "vendor_evidence_library": e.get("library"), "vendor_evidence_version": e.get("version"),
        "vendor_evidence_isa": e.get("isa"),
        "vendor_optimized_share": e.get("optimized_share"),
        "vendor_reference_share": e.get("reference_share"),
        "vendor_gemm_api_share": e.get("gemm_api_share"),
        "vendor_implementations": "; ".join(
            f"{name}={(v.get('share') or 0):.3f}" for name, v in impls) if evidence else None,
        "vendor_probe_error": e.get("error") if evidence else None,
        "vendor_evidence_source": e.get("source") if evidence else None,
        "kmp_read_by": kmp_read_by(evidence),
        "vendor_kernel_dtypes": "; ".join(
            f"{dt}={n}" for dt, n in sorted((e.get("kernel_dtypes") or {}).items())) or None,
        "vendor_kernel_isa": " ".join(e.get("kernel_isa") or []) or None,
        "vendor_fpmath": " ".join(e.get("fpmath") or []) or None,
    }


def precision_columns(record: dict) -> dict:
    """A record's requested and executed precision as tidy-table columns:
    ``requested_precision`` (:func:`requested_precision`), ``executed_precision``
    (:func:`executed_precision`) and ``evidence_label`` (:func:`record_precision_label`;
    None when it is ""); all None for a record that is not a training run (a kernel)."""
    if record.get("kind", "train") != "train":
        return {"requested_precision": None, "executed_precision": None, "evidence_label": None}
    return {"requested_precision": requested_precision(record),
            "executed_precision": executed_precision(record.get("vendor_evidence")),
            "evidence_label": record_precision_label(record) or None}


def expected_library(declared: str | None) -> str:
    """The evidence library a declared ``vendor_library`` promises when enabled (mkl is
    MKL-DNN, oneDNN's former name; None is none)."""
    return EXPECTED.get(declared or "none", declared or "none")


def mismatch(declared: str | None, enabled: bool | None, evidence: dict | None) -> str:
    """Why ``evidence`` contradicts the declared library and its on/off flag ("" when it
    does not, or when there is no evidence to judge)."""
    if not evidence or evidence.get("library") is None:
        return ""
    ran = evidence["library"]
    if enabled is False or (declared or "none") == "none":
        return "" if ran == "none" else f"vendor library off, but {ran} primitives ran"
    want = expected_library(declared)
    if ran == want:
        return ""
    if ran == "none":
        loaded = ", ".join(evidence.get("loaded_libraries") or []) or "none"
        return f"declared {declared} on, but no oneDNN primitive ran (loaded runtimes: {loaded})"
    return f"declared {declared}, evidence {ran}"


# evidence library -> the system-schema name a record states
RECORDED_NAMES = {"onednn": "onednn", "onednn+acl": "onednn-acl", "armpl": "armpl"}


def recorded_library(declared: str | None, enabled: bool | None, evidence: dict | None) -> str | None:
    """The ``vendor_library`` a record states: the declared one, unless the probe saw a
    different library run with the flag on (declared armpl, oneDNN+ACL ran: the record says
    onednn-acl, and ``vendor_mismatch`` keeps the declaration). A probe that saw no vendor
    primitive keeps the declaration and its mismatch flag (an ArmPL build that bypasses
    oneDNN leaves no trace)."""
    ran = RECORDED_NAMES.get((evidence or {}).get("library") or "")
    if enabled is False or ran is None or expected_library(declared) == evidence["library"]:
        return declared
    return ran


def probe_argv(config) -> list[str]:
    """argv of the probe child for the training run ``config`` (a TrainRun): the settings
    the child takes (``Setting.probe``)."""
    return [sys.executable, "-m", "archbench.workloads.training.vendor_probe_child",
            *command_line(config, probe=True)]


class ProbeChild:
    """The probe child for a training run, started at once; :meth:`evidence` waits for it.

    A TensorFlow run that probes starts it before it imports TensorFlow itself, so the
    child's start-up, model build and steps overlap the run's own, and waits for it after
    its first step (the rest of the warm-up and the window run alone). Its output goes to
    files, not pipes, so a child printing more than a pipe holds never waits on a parent
    that is not reading."""

    def __init__(self, config, *, timeout_s: float = PROBE_TIMEOUT_S):
        env = {**os.environ, **VERBOSE_ENV}
        env.pop("TF_CONFIG", None)  # the probe is one process, never a cluster task
        self.timeout_s = timeout_s
        self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        self._process = subprocess.Popen(probe_argv(config), env=env, stdout=self._out,
                                         stderr=self._err, stdin=subprocess.DEVNULL)
        self._evidence: dict | None = None

    def evidence(self) -> dict:
        """Its evidence once it has exited (a failed probe gives :func:`failed_evidence`;
        it never fails the run)."""
        if self._evidence is None:
            try:
                code = self._process.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                self.stop()
                self._evidence = failed_evidence(f"probe exceeded {self.timeout_s:.0f} s")
                return self._evidence
            stdout, stderr = (self._read(f) for f in (self._out, self._err))
            if code != 0 or PROBE_END not in stdout:
                tail = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
                self._evidence = failed_evidence(f"probe exited {code}: {tail[0]}")
            else:
                loaded = next((line.split(":", 1)[1].split() for line in stdout.splitlines()
                               if line.startswith(LIBRARIES_LINE)), [])
                self._evidence = parse_verbose(stdout, loaded)
        return self._evidence

    @property
    def running(self) -> bool:
        """Whether the child has not exited yet."""
        return self._process.poll() is None

    def stop(self) -> None:
        """Kill the child if it still runs (the run failed before it waited): a probe left
        running would share the CPU with whatever runs next. Its output files are closed."""
        if self.running:
            self._process.kill()
            self._process.wait()
        for file in (self._out, self._err):
            file.close()

    @staticmethod
    def _read(file) -> str:
        file.seek(0)
        text = file.read().decode(errors="replace")
        file.close()
        return text


def probe(config, *, timeout_s: float = PROBE_TIMEOUT_S) -> dict:
    """Run the probe child for ``config`` and return its evidence (a failed probe gives
    :func:`failed_evidence`; it never fails the run)."""
    return ProbeChild(config, timeout_s=timeout_s).evidence()


def loaded_runtimes(maps_path: str = "/proc/self/maps") -> list[str]:
    """Math runtimes mapped into this process (libarmpl, libmkl, libiomp5, libgomp, ...)."""
    try:
        with open(maps_path) as maps:
            names = {line.split()[-1].rsplit("/", 1)[-1] for line in maps if ".so" in line}
    except OSError:
        return []
    return sorted(n for n in names if _RUNTIMES.match(n))


def flush_stdout() -> None:
    """Flush C stdio (where oneDNN prints) and Python's stdout."""
    ctypes.CDLL(None).fflush(None)
    sys.stdout.flush()


def write_line(text: str) -> None:
    """Write ``text`` as one line to file descriptor 1, after all that was printed before."""
    flush_stdout()
    os.write(1, f"{text}\n".encode())


def probe_in_process(step: Callable[[], object],
                     verbose: Callable[[], AbstractContextManager]) -> dict:
    """Evidence from ONE more ``step`` of this process with oneDNN's verbose mode on around
    it (``verbose()``: the framework's run-time switch), its output caught from file
    descriptor 1; the runtimes mapped into this process. A failure gives
    :func:`failed_evidence`; it never fails the run."""
    saved = os.dup(1)
    try:
        with tempfile.TemporaryFile() as sink:
            flush_stdout()  # what this process printed before goes where it went
            os.dup2(sink.fileno(), 1)
            try:
                write_line(PROBE_BEGIN)
                with verbose():
                    step()
                write_line(PROBE_END)
            finally:
                flush_stdout()
                os.dup2(saved, 1)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
    except Exception as exc:  # noqa: BLE001 - the probe never fails the run
        return failed_evidence(f"probe step failed: {exc!r}")
    finally:
        os.close(saved)
    return parse_verbose(text, loaded_runtimes())


def gathered(record: dict) -> bool:
    """Whether ``record`` holds evidence its own probe gathered (a library, no ``source``)."""
    evidence = record.get("vendor_evidence")
    return (isinstance(evidence, dict) and evidence.get("library") is not None
            and not evidence.get("source"))


def _repetition(path: Path) -> int:
    digits = path.stem[len("rep"):]
    return int(digits) if digits.isdigit() else sys.maxsize


def earlier_record(output: str | os.PathLike, config_hash: str) -> Path | None:
    """The record beside ``output`` (another repetition in its configuration directory,
    the lowest first) whose own probe gave evidence for the configuration hashed
    ``config_hash``; None when there is none. Unreadable files are passed over: the worker
    checks the record it is given (:func:`shared_evidence`)."""
    output = Path(output)
    for path in sorted(output.parent.glob("rep*.json"), key=_repetition):
        if path.name == output.name:
            continue
        try:  # a regular file: a FIFO or device beside the record would hang the worker
            record = json.loads(read_regular(path, MAX_RECORD_BYTES))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("config_hash") == config_hash and gathered(record):
            return path
    return None


def probe_env(env: dict | None, intra_threads: int | None = 0) -> dict:
    """The performance settings of a record's environment that reach the probe: Slurm's
    and Horovod's left out (the probe is one process without either), the thread counts
    too where the run sets ``intra_threads``."""
    told = THREAD_COUNT_ENV if intra_threads else ()
    return {k: v for k, v in (env or {}).items()
            if k in PERFORMANCE_ENV and not k.startswith(("SLURM_", "HOROVOD_")) and k not in told}


def probe_settings(config) -> str:
    """The settings the probe of training run ``config`` (a TrainRun) takes, as the
    evidence it gathers states them (``settings``)."""
    return " ".join(command_line(config, probe=True))


def why_not_shared(earlier: dict, fields: dict, data_format: str = "NHWC", *,
                   settings: str | None = None) -> str:
    """Why this run (its record ``fields`` so far, its ``data_format``, its probe's
    ``settings``) may not state the evidence of record ``earlier``; "" when it may."""
    if not gathered(earlier):
        return "it holds no evidence of its own probe"
    if not earlier.get("run_id"):
        return "it names no run id"
    theirs = earlier["vendor_evidence"].get("settings")
    if settings is not None and theirs is not None and theirs != settings:
        return f"its probe's settings '{theirs}' are not this run's '{settings}'"
    for key in SAME_FOR_EVIDENCE:
        if earlier.get(key) != fields.get(key):
            return f"its {key} {earlier.get(key)!r} is not this run's {fields.get(key)!r}"
    for key, default in REQUEST_FIELDS.items():  # the numerics asked for (absent: the default)
        theirs, mine = earlier.get(key) or default, fields.get(key) or default
        if theirs != mine:
            return f"its {key} {theirs!r} is not this run's {mine!r}"
    threads = fields.get("intra_threads")
    if probe_env(earlier.get("env"), threads) != probe_env(fields.get("env"), threads):
        return (f"its environment {probe_env(earlier.get('env'), threads)} is not this run's "
                f"{probe_env(fields.get('env'), threads)}")
    theirs = ((earlier.get("metrics") or {}).get("data_format") or {}).get("value", "NHWC")
    if theirs != data_format:
        return f"its data format {theirs} is not this run's {data_format}"
    return ""


def source_name(path: str | os.PathLike, record: dict, output: str | os.PathLike | None) -> str:
    """How a run writing ``output`` names ``record`` (at ``path``) as its evidence's
    source: its run id within the run's own experiment folder, ``<experiment>/<run id>``
    from another one."""
    same = output is None or Path(output).resolve().parent.parent == Path(path).resolve().parent.parent
    return record["run_id"] if same else f"{record.get('experiment')}/{record['run_id']}"


def shared_evidence(path: str | os.PathLike, fields: dict, data_format: str = "NHWC", *,
                    settings: str | None = None, output: str | os.PathLike | None = None) -> dict | None:
    """The evidence of record ``path`` for the run writing ``output`` (its ``fields`` so
    far, its ``data_format`` and probe ``settings``), with ``source`` naming that record
    (:func:`source_name`), when it may state it (:func:`why_not_shared`); None (and why,
    on stderr) otherwise. The evidence is copied: it stays this record's if that record is
    rerun."""
    from archbench.core.record import RecordError, read_record
    try:
        earlier = read_record(path)
    except RecordError as exc:
        why = str(exc)
    else:
        why = why_not_shared(earlier, fields, data_format, settings=settings)
    if why:
        print(f"vendor evidence of {path} not stated: {why}; probing", file=sys.stderr)
        return None
    return {**earlier["vendor_evidence"], "source": source_name(path, earlier, output)}


def probe_key(settings_argv: Sequence[str], env: dict | None, intra_threads: int | None) -> str:
    """The name under which a system's runs find the last record that probed with the
    probe settings ``settings_argv`` (as planned) in environment ``env``."""
    text = json.dumps([list(settings_argv), probe_env(env, intra_threads)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def index_path(output: str | os.PathLike, key: str) -> Path | None:
    """Where the system of record ``output`` (``.../raw/<system>/<experiment>/<config>/
    rep<k>.json``) names the last record that probed under ``key``; None for a record
    outside that layout."""
    from archbench.core.record import RAW_LAYOUT
    output = Path(output)
    if not RAW_LAYOUT.search(output.as_posix()):
        return None
    return output.parents[2] / PROBES_DIR / f"{key}.json"


def indexed_record(output: str | os.PathLike, key: str) -> Path | None:
    """The record another run of ``output``'s system wrote whose own probe, under ``key``,
    gave evidence (:func:`remember`); None when there is none, or it is ``output`` itself.
    The worker checks the record it is given (:func:`shared_evidence`)."""
    index = index_path(output, key)
    if index is None:
        return None
    try:
        path = index.parent.parent / json.loads(read_regular(index, MAX_RECORD_BYTES))["record"]
        record = json.loads(read_regular(path, MAX_RECORD_BYTES, within=index.parent.parent))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if path.resolve() == Path(output).resolve() or not isinstance(record, dict) or not gathered(record):
        return None
    return path


def remember(output: str | os.PathLike, key: str, record: dict) -> None:
    """Name record ``output`` as the last one of its system whose own probe, under
    ``key``, gave evidence, if it is one (:func:`indexed_record`). A file system that
    refuses only costs the later runs a probe: the run's record is written."""
    index = index_path(output, key)
    if index is not None and gathered(record) and record["vendor_evidence"].get("settings"):
        relative = Path(output).resolve().relative_to(index.parent.parent.resolve())
        try:
            atomic_write_text(index, json.dumps({"record": relative.as_posix()}) + "\n")
        except OSError as exc:
            print(f"{index}: not written ({exc}); later runs probe for themselves", file=sys.stderr)
