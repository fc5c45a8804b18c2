"""Which vendor library really ran, and in what precision (docs/metrics.md, "Vendor-library
speedup and its evidence": evidence, not a label): per system, framework, model, requested
numerics and vendor setting, the probe's library, oneDNN version and the shares of oneDNN
time in optimized and reference implementations, against the library the system declares
(:mod:`archbench.workloads.training.vendor_evidence`), which runs state the evidence of
another run's probe instead of their own, and the precision the computing primitives ran
in against the one asked for (``evidence_label``).
"""

from __future__ import annotations

import pandas as pd

from archbench.results.tables.common import empty, group_ids, of_kind, sort_rows
from archbench.workloads.training.vendor_evidence.precision import NOT_RECORDED, REQUEST_FIELDS

# the requested numerics (precision, fp32 math mode, graph) keep configurations apart: a
# bf16 and an fp32 run of one model are probed apart and labelled apart
GROUP = ("experiment", "system", "arch", "framework", "model", "vendor_library",
         "vendor_library_enabled", *REQUEST_FIELDS)
VENDOR_EVIDENCE_COLUMNS = (
    *GROUP, "library", "version", "n_runs", "n_probed", "n_shared", "shared", "optimized_share",
    "reference_share", "gemm_api_share", "implementations", "executed_precision",
    "kernel_dtypes", "kernel_isa", "fpmath", "evidence_label", "mismatch", "mismatch_reason",
    "status",
)
EVIDENCE_TEXT = ("vendor_evidence_library", "vendor_evidence_version", "vendor_implementations",
                 "vendor_probe_error", "vendor_mismatch", "vendor_evidence_source", "run_id",
                 "executed_precision", "evidence_label", "vendor_kernel_dtypes",
                 "vendor_kernel_isa", "vendor_fpmath")
EVIDENCE_SHARES = ("vendor_optimized_share", "vendor_reference_share", "vendor_gemm_api_share")
TOP_IMPLEMENTATIONS = 4


def _distinct(values: pd.Series) -> str | None:
    """The distinct non-empty texts of ``values``, sorted and joined by " | "."""
    texts = sorted({str(v) for v in values.dropna() if str(v).strip()})
    return " | ".join(texts) or None


def _top_implementations(texts: pd.Series) -> str | None:
    """The implementations with the largest mean share over the runs (``name=share`` texts
    of :func:`archbench.workloads.training.vendor_evidence.library.evidence_columns`), largest first."""
    shares: dict[str, list[float]] = {}
    runs = [t for t in texts.dropna() if str(t).strip()]
    for text in runs:
        for pair in str(text).split("; "):
            name, _, share = pair.rpartition("=")
            shares.setdefault(name, []).append(float(share))
    mean = {name: sum(v) / len(runs) for name, v in shares.items()}
    top = sorted(mean.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_IMPLEMENTATIONS]
    return "; ".join(f"{name}={share:.3f}" for name, share in top) or None


def _repetition(run_id: object) -> str:
    """The ``rep<k>`` part of a run id (``<config_id>/rep<k>``); "?" without one."""
    return str(run_id).rpartition("/")[2] if isinstance(run_id, str) and run_id else "?"


def _probe_name(source: object, experiment: object) -> str | None:
    """A run's ``vendor_evidence_source`` as ``<experiment>/<config_id>/rep<k>`` (a bare run
    id names a run of the record's own ``experiment``); None without one."""
    if not isinstance(source, str) or not source:
        return None
    return source if source.count("/") >= 2 else f"{experiment}/{source}"


def _shared(rows: pd.DataFrame) -> str | None:
    """Which runs of one experiment state another's evidence, per probing run: "rep1 rep2
    from rep0" (repetitions of one configuration), "c2/rep0 c2/rep1 from c1/rep0" (another
    configuration of the experiment), "c2/rep0 from other/c1/rep0" (another experiment's);
    the distinct texts joined by " | "."""
    home = str(rows["experiment"].iloc[0]) if len(rows) else ""
    runs: dict[tuple[str, str], list[str]] = {}  # (probe, shown as) -> the runs stating it
    for run_id, source in zip(rows["run_id"], rows["vendor_evidence_source"]):
        name = _probe_name(source, home) or "?"
        experiment, _, probe = name.partition("/")
        if experiment != home:
            runs.setdefault((name, name), []).append(str(run_id))
        elif str(run_id).rpartition("/")[0] == probe.rpartition("/")[0]:  # a repetition's
            runs.setdefault((name, _repetition(probe)), []).append(_repetition(run_id))
        else:
            runs.setdefault((name, probe), []).append(str(run_id))
    texts = {" ".join(sorted(mine, key=lambda r: (len(r), r))) + f" from {shown}"
             for (_, shown), mine in runs.items()}
    return " | ".join(sorted(texts)) or None


def _distinct_evidence(evidence: pd.DataFrame) -> pd.DataFrame:
    """One row per probe: the runs that probed, and one of the runs stating each probe
    whose own record is not among them (its evidence counts once)."""
    names = [_probe_name(source, experiment) or _probe_name(run_id, experiment) or str(index)
             for index, experiment, run_id, source in zip(
                 evidence.index, evidence["experiment"], evidence["run_id"],
                 evidence["vendor_evidence_source"])]
    return evidence[~pd.Series(names, index=evidence.index).duplicated()]


def _status(n_evidence: int, mismatch: bool, errors: str | None) -> str:
    if mismatch:
        return "mismatch"
    if n_evidence == 0:
        return f"probe failed: {errors}" if errors else "not probed"
    return "ok"


def vendor_evidence(df: pd.DataFrame) -> pd.DataFrame:
    """Vendor library evidence per experiment, system, framework (each its own oneDNN),
    model and vendor setting (declared ``vendor_library``, flag on/off): ``library`` the
    probe step saw (onednn, onednn+acl, armpl, none; runs that disagree joined by " | "),
    oneDNN ``version``, runs, runs that probed themselves (``n_probed``) and runs that
    state the evidence of another run's probe (``n_shared``; ``shared`` says which:
    "rep1 rep2 from rep0", "c2/rep0 from c1/rep0"), mean ``optimized_share`` / ``reference_share`` /
    ``gemm_api_share`` of the probe step's oneDNN time over the distinct probes (a shared
    probe counts once; reference = ``gemm:ref``-like implementations; gemm_api = oneDNN's
    sgemm as Eigen calls it, flag on or off), the top implementations, and ``mismatch``
    when any run's evidence contradicts the declaration (``mismatch_reason``). Status:
    ok, mismatch, not probed (no evidence: imported or older records) or probe failed.

    Per requested precision, fp32 math mode and graph (absent: fp32, strict, eager), what
    precision the probe saw the computing primitives run in (``executed_precision``: bf16,
    bf16 fast math, bf16 emulated, fp32, ...; "not recorded" when none ran in oneDNN), their
    data types (``kernel_dtypes``: "bf16=7; f32=1"), implementation ISAs (``kernel_isa``)
    and fpmath attributes (``fpmath``), and ``evidence_label``, which compares what ran
    with what was asked ("bf16 requested, fp32 executed"; empty when they agree)."""
    runs = of_kind(df, "train")
    if "source" in runs:  # published numbers carry no evidence of ours
        runs = runs[runs["source"].isna()]
    if runs.empty:
        return empty(VENDOR_EVIDENCE_COLUMNS)
    for name in EVIDENCE_TEXT:
        if name not in runs:
            runs[name] = pd.NA
    for name, default in REQUEST_FIELDS.items():  # records from before the field: the default
        runs[name] = (runs[name].astype(object).where(runs[name].notna(), default)
                      if name in runs else default)
    for name in EVIDENCE_SHARES:
        runs[name] = pd.to_numeric(runs[name], errors="coerce") if name in runs else float("nan")
    runs["_gid"] = group_ids(runs, GROUP)
    rows = []
    for _, g in runs.groupby("_gid", sort=True):
        evidence = g[g["vendor_evidence_library"].notna()
                     & g["vendor_evidence_library"].astype(str).str.strip().ne("")]
        stated = evidence["vendor_evidence_source"].notna()
        shared = evidence[stated]
        probes = _distinct_evidence(evidence)
        reasons = _distinct(g["vendor_mismatch"])
        library = _distinct(probes["vendor_evidence_library"])
        rows.append({
            **{k: g[k].iloc[0] for k in GROUP},
            "library": library, "version": _distinct(probes["vendor_evidence_version"]),
            "n_runs": len(g), "n_probed": int((~stated).sum()), "n_shared": len(shared),
            "shared": _shared(shared),
            "optimized_share": probes["vendor_optimized_share"].mean(),
            "reference_share": probes["vendor_reference_share"].mean(),
            "gemm_api_share": probes["vendor_gemm_api_share"].mean(),
            "implementations": _top_implementations(probes["vendor_implementations"]),
            "executed_precision": _distinct(probes["executed_precision"]) or NOT_RECORDED,
            "kernel_dtypes": _distinct(probes["vendor_kernel_dtypes"]),
            "kernel_isa": _distinct(probes["vendor_kernel_isa"]),
            "fpmath": _distinct(probes["vendor_fpmath"]),
            "evidence_label": _distinct(g["evidence_label"]) or "",
            "mismatch": reasons is not None, "mismatch_reason": reasons,
            "status": _status(len(evidence), reasons is not None,
                              _distinct(g["vendor_probe_error"])),
        })
    table = pd.DataFrame(rows)
    return sort_rows(table[list(VENDOR_EVIDENCE_COLUMNS)], GROUP)
