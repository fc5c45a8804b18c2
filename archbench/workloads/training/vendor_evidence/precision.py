"""What precision a run's computing primitives executed in, against what it asked for.

A computing primitive of the probe step (convolution, matmul, inner_product, ...) is classed
by its tensors' data types, the ISA of its implementation and its fpmath attribute
(:func:`compute_class`): bf16, bf16 fast math, bf16 emulated, fp16, fp32, int8 or other
(:data:`EXECUTED`); a probe step in which none ran in oneDNN gives "not recorded".
:func:`precision_label` compares the evidence's ``executed_precision`` with the precision
and fp32 math mode a run asked for ("bf16 requested, fp32 executed"), and
:func:`precision_columns` gives both as tidy-table columns. The probe must run with the
run's numerics: the child builds its run from every probe setting it is given
(``Setting.probe``), and evidence is never stated across requested numerics
(:func:`~archbench.workloads.training.vendor_evidence.reuse.why_not_shared` compares
:data:`REQUEST_FIELDS`, absent ones as their defaults).
"""

from __future__ import annotations

import re
from typing import Sequence

from archbench.core.fields import NUMERICS_DEFAULTS

# ISA tokens of an implementation name (``brg_matmul:avx512_core_bf16``, ``jit:sve_256``,
# ``gemm:acl``): oneDNN's cpu_isa_t names as its verbose lines print them
_ISA_TOKEN = re.compile(r"^(sse41|avx|avx2(_vnni(_2)?)?|avx512_core\w*|avx10\w*|amx\w*|uni|any"
                        r"|asimd|sve(_\d+)?|acl)$")
# ISAs whose bf16 kernels use bf16 instructions (AVX512_BF16, AMX-BF16, AVX-NE-CONVERT,
# AVX10); a bf16 primitive on another ISA (avx512_core, avx2, uni) converts in software
BF16_NATIVE_ISA = re.compile(r"^(avx512_core_bf16|avx512_core_fp16|avx512_core_amx\w*|avx2_vnni_2"
                             r"|avx10\w*|acl)$")
# ISAs on which oneDNN computes f32 tensors in bf16 when the fpmath attribute allows it
# (x86: only AMX, "bf32", named avx10_1_512_amx... on AVX10 CPUs since oneDNN 3.6; aarch64:
# ACL fast math, proven by its external kernel's name)
BF16_FASTMATH_ISA = re.compile(r"^(avx512_core_amx\w*|avx10_\d+_512_amx\w*)$")
# executed precisions (evidence ``executed_precision``; docs/metrics.md)
EXECUTED = ("bf16", "bf16 fast math", "bf16 emulated", "fp16", "fp32", "int8", "other")
NOT_RECORDED = "not recorded"
_DT_CLASS = {"f32": "fp32", "f64": "fp32", "tf32": "fp32", "f16": "fp16", "s8": "int8", "u8": "int8"}
# oneDNN's data type names in archbench's vocabulary (the precision setting's: fp32, bf16,
# fp16), so that a record names a data type one way; others keep oneDNN's name
DTYPE_NAMES = {"f32": "fp32", "f64": "fp64", "f16": "fp16", "s8": "int8", "u8": "uint8",
               "s32": "int32"}

# the record fields that state what precision a run asked for, and their defaults (records
# written before them ran fp32, strict, eager): core.fields' NUMERICS_DEFAULTS
PRECISION_FIELD, MATH_MODE_FIELD, GRAPH_FIELD = NUMERICS_DEFAULTS
DEFAULT_PRECISION, DEFAULT_MATH_MODE, DEFAULT_GRAPH = NUMERICS_DEFAULTS.values()
# the record fields a numerics configuration is told apart by, each with what its absence means
REQUEST_FIELDS = dict(NUMERICS_DEFAULTS)


def dtype_name(onednn: str) -> str:
    """A oneDNN data type (``f32``) in archbench's vocabulary (``fp32``)."""
    return DTYPE_NAMES.get(onednn, onednn)


def isa_tokens(implementation: str) -> list[str]:
    """The ISA names in an implementation name (``brg_conv_bwd:avx512_core_bf16+
    brg_conv_fwd:avx512_core_bf16`` -> [avx512_core_bf16]; ``gemm:jit:bf16`` -> [])."""
    tokens = []
    for piece in implementation.split("+"):
        for part in piece.split(":"):
            if _ISA_TOKEN.match(part) and part not in tokens:
                tokens.append(part)
    return tokens


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
