"""Which vendor library the evidence shows, against the one a system file declares.

:func:`library_of` names the library the executed implementations show: onednn,
onednn+acl (an ACL implementation), armpl or none. ArmPL counts as evidence only when oneDNN
reports an external-BLAS implementation (``gemm:blas``) while libarmpl is loaded: an ArmPL
build of TensorFlow that calls ArmPL outside oneDNN leaves no trace here (its records say
library none with libarmpl among the loaded libraries, and are flagged when declared
armpl). A vendor-off run is probed the same way, with the flag off: TensorFlow's own
kernels then run, and any oneDNN *primitive* that still executes contradicts the flag
(:func:`mismatch`). The oneDNN ``gemm_api`` lines are not primitives: on x86_64
TensorFlow's Eigen contraction kernel calls oneDNN's sgemm with the flag on or off; they
are reported as ``gemm_api_share`` and counted neither as optimized nor as reference
implementations (:func:`classify`). :func:`recorded_library` is the ``vendor_library`` a
record states, :func:`evidence_columns` the evidence as tidy-table columns.
"""

from __future__ import annotations

import re
from typing import Sequence

GEMM_API = "gemm_api"  # oneDNN's sgemm entry point (Eigen's contraction kernel on x86_64)
LIBRARIES = ("onednn", "onednn+acl", "armpl", "none")
# what each declared vendor_library (config/systems/*.yaml) must show when enabled
EXPECTED = {"onednn": "onednn", "mkl": "onednn", "onednn-acl": "onednn+acl",
            "acl": "onednn+acl", "armpl": "armpl", "none": "none"}

# evidence library -> the system-schema name a record states
RECORDED_NAMES = {"onednn": "onednn", "onednn+acl": "onednn-acl", "armpl": "armpl"}

# OpenMP runtimes that read KMP_BLOCKTIME / KMP_AFFINITY (Intel's, and LLVM's, which shares
# its code); GNU libgomp and TensorFlow's own thread pool ignore them
KMP_READERS = ("libiomp5", "libomp")


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
