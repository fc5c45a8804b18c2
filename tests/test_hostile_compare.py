"""`archbench compare` as a safe gate (docs/compare.md, exit status): each hostile input is
refused in one line naming the side and its file, with exit 2, and no results tree is
touched; `--fail-below` judges every configuration or says which it could not; the "What
changed" table names each framework's version by its framework and the CUDA stack of GPU
runs only."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pandas as pd
import pytest
import yaml
from conftest import copy_workflow, snakemake
from test_compare import configuration, run_record, write_set

from archbench.core import provenance
from archbench.core.fields import config_id
from archbench.core.record import raw_path, write_record
from archbench.results import compare_cli
from archbench.results.record_sets import read_side

TIGHT = [100.0, 101.0, 99.0]
SLOW = [90.0, 90.9, 89.1]


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> sha256): what a refusal must leave as it was."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def variant(**fields) -> dict:
    """The test configuration with ``fields`` changed (device, framework...), its id made again."""
    conf = {k: v for k, v in {**configuration(), **fields}.items() if k != "config_id"}
    return {**conf, "config_id": config_id(conf)}


def write_runs(root: Path, conf: dict, values: list[float], **provenance_fields) -> Path:
    """Records of ``conf`` with ``values`` under ``root/raw``."""
    for rep, value in enumerate(values):
        record = run_record(conf, rep, value, **provenance_fields)
        write_record(root / raw_path(record), record)
    return root


def tidy_csv(tmp: Path) -> Path:
    """A good collected table of the base set."""
    frame, _ = read_side(write_set(tmp / "tablesrc" / "results", {(1, 8): TIGHT}))
    path = tmp / "measurements.csv"
    frame.to_csv(path, index=False)
    return path


# --------------------------------------------------------------------- the cases
@dataclass(frozen=True)
class Case:
    """A hostile comparison: ``make(tmp)`` builds what it needs and returns the argv; the
    one stderr line must hold each of ``says`` (``{tmp}`` is the case's folder)."""

    name: str
    make: Callable[[Path], list[str]]
    says: tuple[str, ...]
    code: int = 2


def two(tmp: Path, base: dict, new: dict, *extra: str) -> list[str]:
    return [str(write_set(tmp / "a" / "results", base)), str(write_set(tmp / "b" / "results", new)),
            *extra]


def empty_side(tmp: Path, side: str) -> list[str]:
    full = write_set(tmp / "full" / "results", {(1, 8): TIGHT})
    (tmp / "empty" / "results" / "raw").mkdir(parents=True)
    empty = tmp / "empty" / "results"
    return [str(empty), str(full)] if side == "base" else [str(full), str(empty)]


def only_invalid(tmp: Path) -> list[str]:
    bad = tmp / "bad" / "results"
    record = run_record(configuration(), 0, 100.0)
    path = bad / raw_path(record)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    return [str(write_set(tmp / "good" / "results", {(1, 8): TIGHT})), str(bad)]


def one_folder_filtered_away(tmp: Path) -> list[str]:
    root = write_set(tmp / "one" / "results", {(1, 8): TIGHT})
    return [str(root), "--base-filter", "vendor_library_enabled=on", "--new-filter",
            "vendor_library_enabled=off"]


def csv_side(tmp: Path, text: str | bytes) -> list[str]:
    path = tmp / "other.csv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return [str(write_set(tmp / "a" / "results", {(1, 8): TIGHT})), str(path)]


def csv_without_config_id(tmp: Path) -> list[str]:
    table = pd.read_csv(tidy_csv(tmp))
    table.drop(columns=["config_id"]).to_csv(tmp / "noid.csv", index=False)
    return [str(tmp / "noid.csv"), str(write_set(tmp / "b" / "results", {(1, 8): SLOW}))]


def output_onto(tmp: Path, what: str) -> list[str]:
    argv = two(tmp, {(1, 8): TIGHT}, {(1, 8): SLOW})
    target = tmp / "out"
    if what == "file":
        target.write_text("keep me\n")
    elif what == "folder":
        target.mkdir()
        (target / "notes.txt").write_text("keep me\n")
    elif what == "results":
        target = tmp / "a" / "results"
    elif what == "inside raw":
        target = tmp / "b" / "results" / "raw" / "sysa" / "new"
    else:  # below a file
        target.write_text("keep me\n")
        target = target / "sub"
    return [*argv, "--output", str(target)]


NO_RATIO = "not a ratio (a number above 0, e.g. 0.95)"
SEE_HELP = "(see python -m archbench.results.compare_cli --help)"
# the parser's refusals: one line naming the argument, never argparse's usage block
USAGE = [
    Case("an unknown option", lambda t: two(t, {(1, 8): TIGHT}, {(1, 8): SLOW}, "--foo"),
         (f"archbench compare: unrecognized arguments: --foo {SEE_HELP}",)),
    Case("a third result set", lambda t: [*two(t, {(1, 8): TIGHT}, {(1, 8): SLOW}), str(t)],
         ("archbench compare: unrecognized arguments: {tmp} ",)),
    Case("a bad --statistic", lambda t: two(t, {(1, 8): TIGHT}, {(1, 8): SLOW}, "--statistic", "max"),
         ("archbench compare: argument --statistic: invalid choice: 'max' (choose from 'mean', "
          f"'median') {SEE_HELP}",)),
    Case("--statistic without a value", lambda t: [*two(t, {(1, 8): TIGHT}, {(1, 8): SLOW}), "--statistic"],
         ("archbench compare: argument --statistic: expected one argument",)),
    Case("no arguments", lambda t: [],
         (f"archbench compare: the following arguments are required: base {SEE_HELP}",)),
    Case("options only", lambda t: ["--fail-below", "0.95", "--allow-incomparable"],
         ("archbench compare: the following arguments are required: base",)),
]
CASES = [
    Case("base without records", lambda t: empty_side(t, "base"),
         ("archbench compare: base ({tmp}/empty/results): no records",)),
    Case("new without records", lambda t: empty_side(t, "new"),
         ("archbench compare: new ({tmp}/empty/results): no records",)),
    Case("a side whose only record is invalid", only_invalid,
         ("new ({tmp}/bad/results): no records (1 invalid, the first: ",)),
    Case("filters that leave a side empty", one_folder_filtered_away,
         ("new ({tmp}/one/results vendor_library_enabled=off): no records",)),
    Case("no configuration in common", lambda t: two(t, {(1, 8): TIGHT}, {(2, 16): TIGHT}),
         ("archbench compare: no configuration in common: base ({tmp}/a/results) has 1, "
          "new ({tmp}/b/results) has 1",)),
    Case("a CSV that is not a measurements table", lambda t: csv_side(t, "a,b\n1,2\n"),
         ("new ({tmp}/other.csv): not a measurements table: no experiment on line 2",)),
    Case("a measurements CSV without config_id", csv_without_config_id,
         ("base ({tmp}/noid.csv): not a measurements table: no config_id on line 2",)),
    Case("a malformed CSV", lambda t: csv_side(t, "a,b\n1,2\n1,2,3,4\n"),
         ("new ({tmp}/other.csv): not a readable measurements table: Error tokenizing data",)),
    Case("a CSV that is not text", lambda t: csv_side(t, b"\xff\xfe\x00\x81,\x90\n\x00\xff,1\n"),
         ("new ({tmp}/other.csv): not a readable measurements table",)),
    Case("a CSV with a non-number throughput", lambda t: csv_side(
        t, tidy_csv(t).read_text().replace("100.0", "fast", 1)),
         ("new ({tmp}/other.csv): not a readable measurements table",)),
    *[Case(f"--fail-below {value}", lambda t, v=value: two(t, {(1, 8): TIGHT}, {(1, 8): SLOW},
                                                          f"--fail-below={v}"),
           (f"archbench compare: --fail-below {value}: {NO_RATIO}",))
      for value in ("nan", "-1", "0", "inf", "-inf", "abc", "", "1e999")],
    *[Case(f"a CSV with throughput {value}", lambda t, v=value: csv_side(
        t, tidy_csv(t).read_text().replace("100.0", v, 1)),
           (f"new ({{tmp}}/other.csv): line 2: throughput {value} is not a positive finite number",))
      for value in ("-100.0", "inf", "0.0")],
    Case("a throughput hundreds of orders of magnitude off, under --fail-below", lambda t: [
        *csv_side(t, tidy_csv(t).read_text().replace("100.0", "1e300", 1)), "--fail-below", "0.9"],
         ("archbench compare: new ({tmp}/other.csv): line 2: throughput: 1e+300 img/s x ",
          "physically impossible")),
    Case("the same records on both sides", lambda t: [str(write_set(t / "a" / "results", {(1, 8): TIGHT}))] * 2,
         ("archbench compare: base and new are the same records ({tmp}/a/results): name two result sets",)),
    *[Case(f"--threshold {value}", lambda t, v=value: two(t, {(1, 8): TIGHT}, {(1, 8): SLOW},
                                                         f"--threshold={v}"),
           (f"archbench compare: --threshold {value}: not a number >= 0",))
      for value in ("nan", "-0.1", "inf", "abc")],
    Case("--fail-below with every configuration one run a side",
         lambda t: two(t, {(1, 8): [100.0]}, {(1, 8): [90.0]}, "--fail-below", "0.95"),
         ("--fail-below 0.95 cannot judge 1 of 1 configuration(s), not comparable "
          "(--allow-incomparable accepts them): sysa/threads/", "base: 1 ok run(s); new: 1 ok run(s)")),
    Case("--fail-below with a configuration on one side only",
         lambda t: two(t, {(1, 8): TIGHT, (2, 8): TIGHT}, {(1, 8): TIGHT}, "--fail-below", "0.95"),
         ("cannot judge 1 of 2 configuration(s)", "(only in base)")),
    Case("--output onto a file", lambda t: output_onto(t, "file"),
         ("archbench compare: --output {tmp}/out: an existing file, not a folder",)),
    Case("--output onto a folder of other files", lambda t: output_onto(t, "folder"),
         ("--output {tmp}/out: a folder holding other files (notes.txt); name a new or empty folder",)),
    Case("--output onto a results folder", lambda t: output_onto(t, "results"),
         ("--output {tmp}/a/results: a folder holding other files (raw)",)),
    Case("--output inside a side's records", lambda t: output_onto(t, "inside raw"),
         ("--output {tmp}/b/results/raw/sysa/new: inside the records of {tmp}/b/results",)),
    Case("--output below a file", lambda t: output_onto(t, "below a file"),
         ("archbench compare: --output {tmp}/out/sub: Not a directory",)),
    *USAGE,
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_hostile_comparison_is_refused_in_one_line(case, tmp_path, capsys):
    argv = case.make(tmp_path)
    before = tree_digest(tmp_path)
    assert compare_cli.main(argv) == case.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "excluded invalid record" not in line]
    assert len(lines) == 1 and lines[0].startswith("archbench compare: "), err
    for part in case.says:
        assert part.format(tmp=tmp_path) in lines[0], err
    assert tree_digest(tmp_path) == before, "a refusal changed a file"


@pytest.mark.parametrize("case", USAGE, ids=[c.name for c in USAGE])
def test_archbench_compare_refuses_a_bad_command_line_in_one_line(case, tmp_path, capsys):
    """The same refusals under ``archbench compare``, which names itself for --help; the
    other subcommands keep argparse's usage block."""
    from archbench import cli
    argv = case.make(tmp_path)
    before = tree_digest(tmp_path)
    assert cli.main(["compare", *argv]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].endswith("(see archbench compare --help)"), lines
    for part in case.says:
        assert part.format(tmp=tmp_path).replace(SEE_HELP, "") in lines[0], lines
    assert tree_digest(tmp_path) == before, "a refusal changed a file"
    with pytest.raises(SystemExit):
        cli.main(["schema", "--foo"])
    assert capsys.readouterr().err.startswith("usage: archbench ")


def test_allow_incomparable_lets_the_gate_judge_the_rest(tmp_path, capsys):
    argv = two(tmp_path, {(1, 8): SLOW, (2, 8): [100.0]}, {(1, 8): TIGHT, (2, 8): [90.0]},
               "--fail-below", "0.95")
    assert compare_cli.main(argv) == 2
    assert compare_cli.main([*argv, "--allow-incomparable"]) == 0
    swapped = [argv[1], argv[0], *argv[2:], "--allow-incomparable"]
    assert compare_cli.main(swapped) == 1  # a regression still fails, whatever is allowed
    err = capsys.readouterr().err
    assert "1 significant slowdown(s) below ratio 0.95" in err


def test_an_earlier_comparison_folder_is_rewritten(tmp_path, capsys):
    argv = two(tmp_path, {(1, 8): TIGHT}, {(1, 8): SLOW}, "--output", str(tmp_path / "out"))
    assert compare_cli.main(argv) == 0
    assert compare_cli.main(argv) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(compare_cli.FILES)


# ------------------------------------------------------------ what changed, by framework
def changes(tmp: Path, capsys, base: list[tuple[dict, dict]], new: list[tuple[dict, dict]]) -> pd.DataFrame:
    """The "What changed" table of two sets of (configuration, provenance) with TIGHT runs."""
    for name, side in (("a", base), ("b", new)):
        for conf, fields in side:
            write_runs(tmp / name / "results", conf, TIGHT, **fields)
    out = tmp / "out"
    assert compare_cli.main([str(tmp / "a" / "results"), str(tmp / "b" / "results"),
                             "--output", str(out)]) == 0
    capsys.readouterr()
    return pd.read_csv(out / "changes.csv", dtype=str, keep_default_na=False)


def test_a_pytorch_version_is_called_the_pytorch_version(tmp_path, capsys):
    torch = variant(framework="pytorch")
    table = changes(tmp_path, capsys, [(torch, {"framework_version": "2.5.1"})],
                    [(torch, {"framework_version": "2.6.0"})])
    row = table[table["field"] == "framework_version"].iloc[0]
    assert (row["what"], row["base"], row["new"], row["changed"]) == (
        "PyTorch version", "2.5.1", "2.6.0", "True")
    assert "TensorFlow" not in set(table["what"])


def test_each_framework_version_is_named_by_its_framework(tmp_path, capsys):
    torch, tf = variant(framework="pytorch"), configuration()
    table = changes(tmp_path, capsys,
                    [(torch, {"framework_version": "2.5.1"}), (tf, {"framework_version": "2.18.1"})],
                    [(torch, {"framework_version": "2.5.1"}), (tf, {"framework_version": "2.19.0"})])
    versions = table[table["field"] == "framework_version"].set_index("what")
    assert versions.loc["PyTorch version", ["base", "new", "changed", "configurations"]].tolist() == [
        "2.5.1", "2.5.1", "False", "0 of 2"]
    assert versions.loc["TensorFlow version", ["base", "new", "changed", "configurations"]].tolist() == [
        "2.18.1", "2.19.0", "True", "1 of 2"]


GPU_STACK = {"cuda_version": "12.4", "cudnn_version": "9.1.0", "nccl_version": "2.21.5",
             "gpu_models": ["NVIDIA H100"]}


def test_a_cpu_run_reports_no_cuda_change(tmp_path, capsys):
    """CPU records written before the fix carry the CUDA build's versions: never a change."""
    cpu = configuration()
    table = changes(tmp_path, capsys, [(cpu, {})], [(cpu, GPU_STACK)])
    assert not {"cuda_version", "cudnn_version", "nccl_version", "gpu_models"} & set(table["field"])


def test_a_gpu_run_reports_its_cuda_change(tmp_path, capsys):
    gpu = variant(device="gpu", gpus=1, gpus_per_node=1)
    table = changes(tmp_path, capsys, [(gpu, {**GPU_STACK, "cuda_version": "12.1"})], [(gpu, GPU_STACK)])
    row = table.set_index("field").loc["cuda_version"]
    assert (row["base"], row["new"], row["changed"]) == ("12.1", "12.4", "True")
    assert table.set_index("field").loc["gpu_models", "new"] == "NVIDIA H100"


def fake_cuda_torch() -> SimpleNamespace:
    """A CUDA build of PyTorch as ``accelerator_fields`` reads it (one GPU)."""
    return SimpleNamespace(
        version=SimpleNamespace(cuda="12.4"),
        backends=SimpleNamespace(cudnn=SimpleNamespace(is_available=lambda: True, version=lambda: 90100)),
        distributed=SimpleNamespace(is_nccl_available=lambda: True),
        cuda=SimpleNamespace(nccl=SimpleNamespace(version=lambda: (2, 21, 5)), is_available=lambda: True,
                             device_count=lambda: 1, get_device_name=lambda i: "NVIDIA H100"))


@pytest.mark.parametrize("device, stack", [
    ("cpu", provenance.no_accelerator()), (None, provenance.no_accelerator()),
    ("gpu", {"cuda_version": "12.4", "cudnn_version": "9.1.0", "nccl_version": "2.21.5",
             "gpu_models": ["NVIDIA H100"]})])
def test_a_record_states_a_cuda_stack_only_for_a_gpu_run(device, stack, monkeypatch):
    """A CUDA build of PyTorch training on the CPU: its record says no CUDA, cuDNN, NCCL."""
    monkeypatch.setitem(sys.modules, "torch", fake_cuda_torch())
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)  # a PyTorch run's process
    fields = provenance.host_fields(device)
    assert {k: fields[k] for k in stack} == stack


# --------------------------------------------------------------------------- the workflow
def campaign_with_baseline(work: Path, baseline: str) -> None:
    campaign = yaml.safe_load((work / "tiny.yaml").read_text())
    campaign["compare_with"] = baseline
    (work / "c.yaml").write_text(yaml.safe_dump(campaign))


@pytest.mark.workflow
@pytest.mark.parametrize("what, says", [
    ("empty", "archbench: compare_with: base (before/results): no records"),
    ("malformed", "archbench: invalid configuration: c.yaml: compare_with: base (before.csv): not a "
                  "readable measurements table: Error tokenizing data"),
])
def test_a_campaign_baseline_that_cannot_be_compared_stops_in_one_line(what, says, tmp_path):
    work = copy_workflow(tmp_path / "wf")
    if what == "empty":
        (work / "before" / "results" / "raw").mkdir(parents=True)
        campaign_with_baseline(work, "before/results")
    else:
        (work / "before.csv").write_text("a,b\n1,2\n1,2,3\n")
        campaign_with_baseline(work, "before.csv")
    proc = snakemake(work, "--profile", "profiles/local", "--configfile", "c.yaml", "-n",
                     check=False, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("archbench")]  # after the dry run's plan
    assert proc.returncode == 1 and ours == lines[-1:] and ours[0].startswith(says), proc.stderr
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr.replace("Error tokenizing", "")
    assert not (work / "results").exists()


@pytest.mark.workflow
def test_a_campaign_sharing_no_configuration_with_its_baseline_fails_its_rule_in_one_line(tmp_path):
    """Known only once the campaign's records are collected: rule compare_results fails with
    the one line (in Snakemake's job report and in its log), the records untouched."""
    from archbench.core.record import make_record, schema
    from archbench.plan.campaign import load_campaign
    work = copy_workflow(tmp_path / "wf")
    campaign_with_baseline(work, "before/results")
    campaign = yaml.safe_load((work / "c.yaml").read_text())
    properties = schema()["properties"]
    for m in load_campaign(campaign, work / "config" / "systems").measurements:
        images = m["global_batch"] * m["measured_steps"]
        write_record(work / "results" / raw_path(m), make_record(
            **{k: v for k, v in m.items() if k in properties}, start_time="2024-01-01T00:00:00Z",
            end_time="2024-01-01T00:01:00Z", throughput=100.0, throughput_unit="img/s",
            metrics={"images": {"value": images, "unit": "img"},
                     "window_s": {"value": images / 100.0, "unit": "s"}}))
    write_set(work / "before" / "results", {(1, 8): TIGHT})  # system sysa: not the campaign's
    raw = tree_digest(work / "results" / "raw")
    proc = snakemake(work, "--profile", "profiles/local", "--configfile", "c.yaml", "--config",
                     "regenerate_only=True", "--", "results/compare/report.md", check=False)
    line = ("archbench: compare_with: no configuration in common: base (before/results) has 1, "
            "new (results/tables/measurements.csv) has ")
    assert proc.returncode == 1
    assert [x for x in proc.stderr.splitlines() if x.startswith(line)] == [
        x for x in proc.stderr.splitlines() if x.startswith("archbench")], proc.stderr
    assert "Traceback" not in proc.stderr
    assert (work / "logs" / "compare_results" / "compare.log").read_text().startswith(line)
    assert tree_digest(work / "results" / "raw") == raw
