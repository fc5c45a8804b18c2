"""Evidence of the precision that executed, not the one asked for: oneDNN verbose lines of
both descriptor syntaxes (PyTorch's oneDNN 3.12 ``src:bf16:...``, TensorFlow's 3.5
``src_bf16:...``) classified per computing primitive, the executed precision and the label
comparing it with the request, the node's ISA in the provenance, both in the tables, and a
real probe of a bf16 matmul under PyTorch's autocast."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from archbench.core import provenance
from archbench.core.record import make_record, read_record, validate, write_record
from archbench.results.collect import flatten, records_to_frame
from archbench.results.tables import build_table
from archbench.results.tables.common import summarise
from archbench.workloads.training.vendor_evidence import probing, reuse
from archbench.workloads.training.vendor_evidence.onednn_verbose import (
    _fields,
    compute_entry,
    descriptors,
    fpmath_of,
    parse_verbose,
    precision_evidence,
)
from archbench.workloads.training.vendor_evidence.precision import (
    GRAPH_FIELD,
    MATH_MODE_FIELD,
    PRECISION_FIELD,
    compute_class,
    isa_tokens,
    precision_label,
    requested_precision,
)

DATA = Path(__file__).parent / "data"


def section(name: str) -> str:
    """One ``## <name>`` section of the captured verbose lines (tests/data/onednn-precision.txt)."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in (DATA / "onednn-precision.txt").read_text().splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
    return "\n".join(sections[name]) + "\n"


def evidence(name: str) -> dict:
    return parse_verbose(section(name))


# ------------------------------------------------------------------ one line
def test_descriptors_of_both_onednn_syntaxes():
    torch_line = "src:bf16:a:blocked:abcd::f0 wei:bf16:ap:blocked:AcdB16a2b::f0 bia:bf16:a:blocked:a::f0 dst:bf16:ap:blocked:aBcd16b::f0"
    tf_line = "src_bf16::blocked:acdb::f0 wei_bf16:ap:blocked:AcdB16a2b::f0 bia_undef::undef::: dst_bf16::blocked:acdb::f0"
    assert descriptors(torch_line) == {"src": "bf16", "wei": "bf16", "bia": "bf16", "dst": "bf16"}
    assert descriptors(tf_line) == {"src": "bf16", "wei": "bf16", "bia": "undef", "dst": "bf16"}
    assert descriptors("diff_src_f32::blocked:acdb::f0 src_layer:f16::blocked:abc::f0") == {
        "diff_src": "f32", "src_layer": "f16"}
    assert fpmath_of("attr-scratchpad:user attr-fpmath:bf16 attr-post-ops:sum") == "bf16"
    assert fpmath_of("attr-fpmath:bf16:true") == "bf16" and fpmath_of("attr-scratchpad:user") == ""


@pytest.mark.parametrize("impl, isas", [
    ("brg_matmul:avx512_core_bf16", ["avx512_core_bf16"]),
    ("brg_conv_bwd:avx512_core_bf16+brg_conv_fwd:avx512_core_bf16", ["avx512_core_bf16"]),
    ("jit_bf16:avx512_core", ["avx512_core"]), ("gemm:jit:bf16", []), ("x64:gemm:jit", []),
    ("gemm:acl", ["acl"]), ("brg:sve_256", ["sve_256"]), ("jit:uni", ["uni"]),
    ("brg_matmul:avx512_core_amx", ["avx512_core_amx"])])
def test_isa_of_an_implementation(impl, isas):
    assert isa_tokens(impl) == isas


def test_a_torch_and_a_tf_line_give_the_same_entry():
    torch_line = ("onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx512_core_bf16,undef,"
                  "src:bf16::blocked:ab::f0 wei:bf16::blocked:ba::f0 dst:bf16::blocked:ab::f0,"
                  "attr-scratchpad:user attr-fpmath:bf16,,8x64:64x64,0.25")
    tf_line = ("onednn_verbose,primitive,exec,cpu,matmul,brg_matmul:avx512_core_bf16,undef,"
               "src_bf16::blocked:ab::f0 wei_bf16::blocked:ba::f0 dst_bf16::blocked:ab::f0,"
               "attr-scratchpad:user attr-fpmath:bf16,,8x64:64x64,0.25")
    want = {"kind": "matmul", "implementation": "brg_matmul:avx512_core_bf16", "src": "bf16",
            "wei": "bf16", "dst": "bf16", "fpmath": "bf16", "ms": 0.25}
    assert compute_entry(_fields(torch_line)) == want == compute_entry(_fields(tf_line))
    reorder = "onednn_verbose,v1,primitive,exec,cpu,reorder,jit:uni,undef,src:bf16::blocked:a::f0 dst:bf16::blocked:a::f0,,,8,0.1"
    gemm_api = "onednn_verbose,primitive,exec,cpu,gemm_api,,undef,src_f32::blocked:ab:f0 wei_f32::blocked:ab:f0 dst_f32::blocked:ab:f0,,,64x64:64x64,4.0"
    assert compute_entry(_fields(reorder)) is None and compute_entry(_fields(gemm_api)) is None


@pytest.mark.parametrize("entry, info, external, cls", [
    ({"implementation": "brg_matmul:avx512_core_bf16", "src": "bf16", "wei": "bf16"}, None, (), "bf16"),
    ({"implementation": "jit_bf16:avx512_core", "src": "bf16", "wei": "bf16"}, None, (), "bf16 emulated"),
    ({"implementation": "gemm:jit:bf16", "src": "bf16", "wei": "bf16"},
     "Intel AVX-512 with AVX512BW, AVX512VL, and AVX512DQ extensions", (), "bf16 emulated"),
    ({"implementation": "gemm:jit:bf16", "src": "bf16", "wei": "bf16"},
     "Intel AVX-512 with Intel DL Boost and bfloat16 support", (), "bf16"),
    ({"implementation": "brg_matmul:avx512_core", "src": "f32", "wei": "f32", "fpmath": "bf16"}, None, (), "fp32"),
    ({"implementation": "brg_matmul:avx512_core_amx", "src": "f32", "wei": "f32", "fpmath": "bf16"}, None, (),
     "bf16 fast math"),
    ({"implementation": "brg_matmul:avx512_core_amx", "src": "f32", "wei": "f32", "fpmath": ""}, None, (), "fp32"),
    # oneDNN 3.6+ on an AVX10 CPU (Granite Rapids) names AMX avx10_1_512_amx: bf32 all the same
    ({"implementation": "brg_conv_fwd:avx10_1_512_amx", "src": "f32", "wei": "f32", "fpmath": "bf16"}, None, (),
     "bf16 fast math"),
    ({"implementation": "brg_conv_fwd:avx10_1_512_amx", "src": "f32", "wei": "f32", "fpmath": ""}, None, (), "fp32"),
    ({"implementation": "brg_matmul:avx10_1_512", "src": "f32", "wei": "f32", "fpmath": "bf16"}, None, (), "fp32"),
    ({"implementation": "gemm:acl", "src": "f32", "wei": "f32", "fpmath": "bf16"}, None,
     ("CpuGemmAssemblyWrapperKernel/sve_ffhybrid_bf16fp32_mmla_6x4VL",), "bf16 fast math"),
    ({"implementation": "gemm:acl", "src": "f32", "wei": "f32", "fpmath": "bf16"}, None,
     ("CpuGemmAssemblyWrapperKernel/sve_hybrid_fp32_mla_6x4VL",), "fp32"),
    # ACL with the hint, its kernels unnamed (no profile_externals): unseen, not fp32
    ({"implementation": "gemm:acl", "src": "f32", "wei": "f32", "fpmath": "bf16"}, None, (), "not recorded"),
    ({"implementation": "gemm:acl", "src": "f32", "wei": "f32", "fpmath": ""}, None, (), "fp32"),
    ({"implementation": "gemm:acl", "src": "bf16", "wei": "bf16"}, None, (), "bf16"),
    ({"implementation": "brg_matmul:avx512_core_fp16", "src": "f16", "wei": "f16"}, None, (), "fp16"),
    ({"implementation": "brg_matmul:avx512_core_vnni", "src": "u8", "wei": "s8"}, None, (), "int8"),
])
def test_compute_class(entry, info, external, cls):
    assert compute_class(entry, info_isa=info, external=external) == cls


# ------------------------------------------------------------------ captured steps
@pytest.mark.parametrize("name, executed, dtypes, isa, fpmath", [
    ("torch-bf16", "bf16", {"bf16": 4}, ["avx512_core_bf16"], []),
    ("torch-fpmath-bf16", "fp32", {"fp32": 3}, ["avx512_core"], ["bf16"]),
    ("torch-fp32-strict", "fp32", {"fp32": 1}, ["avx512_core"], []),
    ("torch-bf16-without-bf16-instructions", "bf16 emulated", {"bf16": 5}, ["avx512_core"], []),
    ("tf-bf16", "bf16", {"bf16": 6}, ["avx512_core_bf16"], ["bf16"]),
    ("tf-fpmath-bf16", "fp32", {"fp32": 1}, ["avx512_core"], ["bf16"]),
    ("tf-xla", "not recorded", {}, [], []),
    ("amx-fpmath-bf16", "bf16 fast math", {"fp32": 2}, ["avx512_core_amx"], ["bf16"]),
    ("acl-fastmath-bf16", "bf16 fast math", {"fp32": 1}, ["acl"], ["bf16"]),
    ("acl-fastmath-fp32", "fp32", {"fp32": 1}, ["acl"], ["bf16"]),
])
def test_captured_steps(name, executed, dtypes, isa, fpmath):
    e = evidence(name)
    assert e["executed_precision"] == executed
    assert e["kernel_dtypes"] == dtypes and e["kernel_isa"] == isa and e["fpmath"] == fpmath
    if e["kernels"]:
        assert sum(e["compute_share"].values()) == pytest.approx(1.0)
        assert e["compute_share"][executed] > 0.5
    else:
        assert e["compute_share"] == {}


def test_the_oneDNN_version_and_the_kernels_of_each_syntax():
    torch_, tf = evidence("torch-bf16"), evidence("tf-bf16")
    assert torch_["version"] == "3.12.0" and tf["version"] == "3.5.0"
    assert {(k["kind"], k["implementation"]) for k in tf["kernels"]} == {
        ("convolution", "brg_conv_fwd:avx512_core_bf16"), ("matmul", "brg_matmul:avx512_core_bf16"),
        ("convolution", "brg_conv_bwd:avx512_core_bf16+brg_conv_fwd:avx512_core_bf16"),
        ("convolution", "jit_bf16:avx512_core_bf16")}
    assert all(k["class"] == "bf16" and k["src"] == k["wei"] == k["dst"] == "bf16" for k in tf["kernels"])
    matmuls = [k for k in tf["kernels"] if k["kind"] == "matmul"]
    assert len(matmuls) == 1 and matmuls[0]["calls"] == 3  # one entry per distinct kernel
    acl = evidence("acl-fastmath-bf16")
    assert acl["library"] == "onednn+acl" and acl["external_kernels"] == {
        "CpuGemmAssemblyWrapperKernel/sve_ffhybrid_bf16fp32_mmla_6x4VL": 1}


# ------------------------------------------------------------------ request vs evidence
@pytest.mark.parametrize("precision, mode, name, label", [
    ("bf16", "strict", "torch-bf16", ""),
    ("bf16", None, "tf-bf16", ""),
    ("fp32", "bf16", "torch-fpmath-bf16", "bf16 requested, fp32 executed"),
    ("fp32", "bf16", "tf-fpmath-bf16", "bf16 requested, fp32 executed"),
    ("bf16", "strict", "torch-bf16-without-bf16-instructions", "bf16 requested, bf16 emulated"),
    ("bf16", "strict", "tf-xla", "bf16 requested, not recorded"),
    ("fp32", "bf16", "amx-fpmath-bf16", ""),
    ("fp32", "bf16", "acl-fastmath-bf16", ""),
    ("fp32", "bf16", "acl-fastmath-fp32", "bf16 requested, fp32 executed"),
    ("fp32", "strict", "torch-fp32-strict", ""),
    (None, None, "torch-fp32-strict", ""),
    ("fp32", "strict", "tf-xla", ""),  # nothing to prove: fp32 is what runs unasked
    ("fp32", "strict", "torch-bf16", "fp32 requested, bf16 executed"),
])
def test_precision_label(precision, mode, name, label):
    assert precision_label(precision, mode, evidence(name)) == label


def test_label_without_evidence():
    assert precision_label("bf16", "strict", None) == "bf16 requested, not recorded"
    assert precision_label("bf16", "strict", probing.failed_evidence("probe exited 1")) == \
        "bf16 requested, not recorded"
    assert precision_label("fp16", "strict", None) == "fp16 requested, not recorded"  # a GPU run
    assert precision_label("fp32", "tf32", None) == "tf32 requested, not recorded"
    assert precision_label("fp32", "strict", None) == ""
    # evidence from before the precision was kept: not recorded, never "fp32 executed"
    old = {k: v for k, v in evidence("torch-fpmath-bf16").items() if k not in precision_evidence([])}
    assert precision_label("fp32", "bf16", old) == "bf16 requested, not recorded"


def test_requested_precision_of_a_record():
    assert requested_precision({}) == "fp32"  # records from before the fields
    assert requested_precision({PRECISION_FIELD: "bf16"}) == "bf16"
    assert requested_precision({MATH_MODE_FIELD: "bf16"}) == "bf16"
    assert requested_precision({PRECISION_FIELD: "fp16", MATH_MODE_FIELD: "strict"}) == "fp16"
    assert requested_precision({PRECISION_FIELD: "fp32", MATH_MODE_FIELD: "tf32"}) == "tf32"


# ------------------------------------------------------------------ the node's ISA
ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9654 96-Core Processor
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl cpuid extd_apicid pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext fsgsbase bmi1 avx2 smep bmi2 erms invpcid avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx512_bf16 clzero xsaveerptr wbnoinvd arat avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg avx512_vpopcntdq rdpid fsrm
bugs\t\t: sysret_ss_attrs null_seg spectre_v1 spectre_v2 spec_store_bypass srso
"""
ZEN3 = """processor\t: 0
model name\t: AMD EPYC 7763 64-Core Processor
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c bmi1 avx2 bmi2 sha_ni vaes vpclmulqdq
"""
SAPPHIRE_RAPIDS = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni avx512_bf16 avx_vnni avx512_fp16 amx_bf16 amx_tile amx_int8 avx512_vbmi2
vmx flags\t: vnmi preemption_timer posted_intr
"""
GRAVITON3 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng
CPU implementer\t: 0x41
CPU part\t: 0xd40
"""
A64FX = """processor\t: 0
Features\t: fp asimd evtstrm sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm fcma dcpop sve
CPU implementer\t: 0x46
"""


@pytest.mark.parametrize("text, isa", [
    (ZEN4, ["avx2", "avx512_bf16", "avx512f"]),
    (ZEN3, ["avx2"]),
    (SAPPHIRE_RAPIDS, ["amx_bf16", "amx_tile", "avx2", "avx512_bf16", "avx512_fp16", "avx512f"]),
    (GRAVITON3, ["asimd", "bf16", "i8mm", "sve", "svebf16"]),
    (A64FX, ["asimd", "sve"]),
    ("processor\t: 0\nmodel name\t: something\n", None),
])
def test_cpu_isa_of_cpuinfo(text, isa):
    assert provenance.cpu_isa_of(text) == isa


@pytest.mark.parametrize("hwcap, hwcap2, isa", [
    # Graviton3 (Neoverse V1): asimd, sve; bf16, svebf16, i8mm in HWCAP2
    (1 << 1 | 1 << 22, 1 << 12 | 1 << 13 | 1 << 14, ["asimd", "bf16", "i8mm", "sve", "svebf16"]),
    (1 << 1 | 1 << 22, 0, ["asimd", "sve"]),  # A64FX: SVE, no BF16
    (1 << 1, 1 << 1, ["asimd", "sve2"]),
    (0, 0, []),
])
def test_cpu_isa_of_aarch64_hwcaps(hwcap, hwcap2, isa):
    """On aarch64 the ISA comes from the process's hwcaps (what qemu-user offers an
    emulated process), not from /proc/cpuinfo (which would describe an x86 host)."""
    assert provenance.cpu_isa_of_hwcaps(hwcap, hwcap2) == isa


def test_this_nodes_isa_is_in_its_records_provenance():
    isa = provenance.cpu_isa()
    if not Path("/proc/cpuinfo").exists():
        assert isa is None
        return
    if platform.machine() != "aarch64":
        assert isa == provenance.cpu_isa_of(Path("/proc/cpuinfo").read_text())
    if platform.machine() == "x86_64":
        assert isa and "avx2" in isa  # every x86 CPU archbench targets has AVX2
    fields = provenance.host_fields()
    assert fields["cpu_isa"] == isa
    assert provenance.cpu_isa("/nonexistent/cpuinfo") is None


def test_an_emulated_ppc64le_process_states_no_isa_of_the_host(tmp_path, monkeypatch):
    """Under qemu-user a ppc64le process reads the x86 host's /proc/cpuinfo: its AVX flags
    are not the emulated CPU's, so a ppc64le record states no ISA (Power lists none there)."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    provenance.cpu_isa.cache_clear()
    assert provenance.cpu_isa(str(cpuinfo)) == ["avx2", "avx512_bf16", "avx512f"]
    monkeypatch.setattr(platform, "machine", lambda: "ppc64le")
    provenance.cpu_isa.cache_clear()
    try:
        assert provenance.cpu_isa(str(cpuinfo)) is None
    finally:
        provenance.cpu_isa.cache_clear()


def test_records_with_and_without_cpu_isa_are_valid(tmp_path):
    from test_sense import train_record
    new = train_record(cpu_isa=["avx2", "avx512_bf16", "avx512f"])
    validate(new)
    old = train_record()
    old.pop("cpu_isa", None)
    write_record(tmp_path / "old.json", old)
    assert "cpu_isa" not in read_record(tmp_path / "old.json")
    assert flatten(old)["cpu_isa"] is None and flatten(new)["cpu_isa"] == "avx2 avx512_bf16 avx512f"
    with pytest.raises(ValueError):
        make_record(**{**new, "cpu_isa": "avx2"})


# ------------------------------------------------------------------ records and tables
def record(k: int, name: str | None, *, config: str = "c", **fields) -> dict:
    """A valid train record of repetition ``k`` whose probe saw section ``name``."""
    from test_sense import train_record
    e = evidence(name) if name else None
    r = train_record(run_id=f"{config}/rep{k}", config_id=config, repetition=k, vendor_evidence=e,
                     cpu_isa=["avx2", "avx512_bf16", "avx512f"])
    r.update(fields)  # the requested precision fields are the merge's: not validated here
    return r


def test_a_record_with_precision_evidence_is_valid_and_flattens():
    r = record(0, "tf-bf16")
    validate(r)
    row = flatten({**r, PRECISION_FIELD: "fp32", MATH_MODE_FIELD: "bf16"})
    assert row["executed_precision"] == "bf16" and row["evidence_label"] is None
    assert row["vendor_kernel_dtypes"] == "bf16=6" and row["vendor_kernel_isa"] == "avx512_core_bf16"
    row = flatten(record(0, "torch-fpmath-bf16", **{MATH_MODE_FIELD: "bf16"}))
    assert (row["requested_precision"], row["executed_precision"], row["evidence_label"]) == (
        "bf16", "fp32", "bf16 requested, fp32 executed")
    assert row["vendor_fpmath"] == "bf16"
    old = flatten(record(0, None))
    assert old["executed_precision"] == "not recorded" and old["evidence_label"] is None


def test_the_summary_carries_the_label_per_configuration():
    rows = [record(k, "torch-fpmath-bf16", config="bf", **{MATH_MODE_FIELD: "bf16"}) for k in range(2)]
    rows += [record(k, "torch-fp32-strict", config="fp") for k in range(2)]
    rows = [{**r, "model": "resnet50" if r["config_id"] == "bf" else "alexnet"} for r in rows]
    summary = summarise(records_to_frame(rows))
    by = summary.set_index("model")
    assert by.loc["resnet50", "evidence_label"] == "bf16 requested, fp32 executed"
    assert by.loc["resnet50", "executed_precision"] == "fp32"
    other = by.drop(index="resnet50")
    assert other["evidence_label"].isna().all()  # consistent: nothing to say


def test_the_vendor_evidence_table_shows_what_precision_ran():
    rows = [record(0, "torch-bf16", config="b", **{PRECISION_FIELD: "bf16"}),
            record(1, "torch-bf16", config="b", **{PRECISION_FIELD: "bf16"}),
            record(0, "torch-fpmath-bf16", config="m", **{MATH_MODE_FIELD: "bf16"}),
            record(0, "torch-fp32-strict", config="f"),
            record(0, None, config="n", **{PRECISION_FIELD: "bf16", "model": "old"})]
    t = build_table("vendor_evidence", records_to_frame(rows))
    assert len(t) == 4  # each requested precision its own row (the old one another model)
    got = {(r.model, r.precision, r.math_mode): r for r in t.itertuples()}
    b = next(r for k, r in got.items() if k[1] == "bf16" and k[0] != "old")
    assert (b.executed_precision, b.evidence_label, b.kernel_isa) == ("bf16", "", "avx512_core_bf16")
    m = next(r for k, r in got.items() if k[2] == "bf16")
    assert (m.executed_precision, m.evidence_label, m.fpmath) == (
        "fp32", "bf16 requested, fp32 executed", "bf16")
    f = next(r for k, r in got.items() if k[1:] == ("fp32", "strict"))
    assert (f.executed_precision, f.evidence_label) == ("fp32", "")
    n = next(r for k, r in got.items() if k[0] == "old")
    assert (n.executed_precision, n.evidence_label, n.status) == (
        "not recorded", "bf16 requested, not recorded", "not probed")


# ------------------------------------------------------------------ a real probe
def test_a_real_probe_of_a_bf16_matmul_under_autocast():
    """One PyTorch step of a bf16 Linear under CPU autocast, probed as a one-process run
    probes: bf16 kernels where the CPU has AVX512_BF16 (or AMX), emulated on AVX-512
    without it, nothing from oneDNN on AVX2 only (ATen's own bf16 kernels run)."""
    torch = pytest.importorskip("torch")
    layer = torch.nn.Linear(64, 64)
    x = torch.randn(16, 64)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = layer(x)
        out.float().sum().backward()

    step()  # creates the primitives
    e = probing.probe_in_process(step, lambda: torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON))
    assert e["error"] == ""
    isa = provenance.cpu_isa() or []
    if platform.machine() != "x86_64" or "avx512f" not in isa:
        assert e["executed_precision"] in ("bf16", "bf16 emulated", "not recorded")
        return
    if "avx512_bf16" in isa or "amx_bf16" in isa:
        assert e["executed_precision"] == "bf16", e
        assert any("bf16" in i or "amx" in i for i in e["kernel_isa"])
        assert precision_label("bf16", "strict", e) == ""
    else:
        assert e["executed_precision"] == "bf16 emulated", e
    assert e["kernel_dtypes"].get("bf16", 0) >= 1


# ------------------------------------------------------------------ the probe takes the run's numerics
def test_the_probe_child_takes_every_probe_setting_it_is_given():
    """The child's run is built from every setting the probe takes (``Setting.probe``):
    whatever the run's numerics are, declared as probe settings, reach the probe step."""
    from archbench.workloads.training import benchmark as train
    from archbench.workloads.training.settings import command_line
    from archbench.workloads.training.vendor_probe_child import parse_probe_args
    run = train.parse_args(["--model", "small_cnn", "--batch-per-process", "4", "--image-size", "32",
                            "--num-classes", "10", "--intra-threads", "1", "--output", "x"])
    argv = command_line(run, probe=True)
    child = parse_probe_args(argv)
    assert command_line(child, probe=True) == argv
    assert probing.probe_settings(child) == probing.probe_settings(run)


def test_evidence_is_not_stated_across_requested_numerics(tmp_path):
    from test_sense import train_record
    earlier = train_record(run_id="c/rep0", vendor_evidence=evidence("torch-bf16"))
    path = tmp_path / "rep0.json"
    write_record(path, earlier)
    fields = {k: earlier.get(k) for k in reuse.SAME_FOR_EVIDENCE} | {"env": dict(earlier["env"])}
    assert reuse.shared_evidence(path, fields) is not None
    # fields a run states as their defaults read the same as absent ones (older records)
    assert reuse.why_not_shared(earlier, {**fields, PRECISION_FIELD: "fp32",
                                       MATH_MODE_FIELD: "strict", GRAPH_FIELD: "eager"}) == ""
    why = reuse.why_not_shared(earlier, {**fields, MATH_MODE_FIELD: "bf16"})
    assert why == "its math_mode 'strict' is not this run's 'bf16'"
    assert reuse.why_not_shared({**earlier, PRECISION_FIELD: "bf16"}, fields).startswith("its precision")


def test_a_kernel_record_has_no_precision_columns():
    from test_sense import kernel_record
    row = flatten(kernel_record())
    assert row["executed_precision"] is None and row["evidence_label"] is None
