"""Reading oneDNN's verbose log into vendor evidence.

:func:`parse_verbose` reads the verbose lines of a probe (those between the probe step's
two markers, :data:`PROBE_BEGIN` and :data:`PROBE_END`, count; a log without markers
counts whole): oneDNN's ``version`` and ``isa`` from its info lines, calls, ms and share of
the step's oneDNN time per executed implementation, the library they show
(:func:`~archbench.workloads.training.vendor_evidence.library.library_of`), and what
precision the computing primitives ran in (:func:`precision_evidence`): their data types in
either syntax of the oneDNN versions the frameworks bundle (``src:bf16:...`` in 3.6+,
``src_bf16:...`` in 3.5), the ISA of their implementations and their ``attr-fpmath:``
attribute, as ``kernels``, ``kernel_dtypes``, ``kernel_isa``, ``fpmath``,
``external_kernels``, ``compute_share`` and ``executed_precision``, each kernel classed by
:mod:`archbench.workloads.training.vendor_evidence.precision`.
"""

from __future__ import annotations

import re
from typing import Sequence

from archbench.workloads.training.vendor_evidence.library import classify, library_of
from archbench.workloads.training.vendor_evidence.precision import (
    EXECUTED,
    NOT_RECORDED,
    compute_class,
    dtype_name,
    isa_tokens,
)

PROBE_BEGIN = "archbench-vendor-probe-begin"
PROBE_END = "archbench-vendor-probe-end"

_VERSION = re.compile(r"(?:oneDNN|DNNL|MKL-DNN)\s+v(\d[\w.]*)")
_TIMESTAMP = re.compile(r"^(v\d+|\d+(\.\d+)?)$")

# oneDNN primitives that compute (their tensors' data types and the ISA of their
# implementation say in what precision the step's arithmetic ran); reorders, pooling,
# eltwise and the like only move or map values
COMPUTE_KINDS = ("convolution", "deconvolution", "matmul", "inner_product", "rnn")
# one memory descriptor of a primitive line: ``src:bf16::blocked:ab::f0`` (oneDNN >= 3.6,
# PyTorch's) or ``src_bf16::blocked:ab::f0`` (oneDNN 3.5, TensorFlow's)
_DESCRIPTOR = re.compile(
    r"^(?P<arg>(?:diff_)?(?:src|wei|bia|dst|ws)(?:_iter_c|_iter|_layer|_c)?)[:_]"
    r"(?P<dt>f32|bf16|f16|tf32|f64|s32|s8|u8|s4|u4|f8_e5m2|f8_e4m3|e8m0|f4_e2m1|f4_e3m0|undef)(?::|$)")


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
