"""Import columns derive from the training settings registry: every identity setting is a
column (the framework among them), a row without it means what an import meant before the
column existed, a bad value is refused in one line, and the module docstring's column
table lists exactly the columns the importer takes. OSU 2019's published PyTorch values
reach its campaign's vs_published table.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from archbench.core.fields import DEFAULT_FRAMEWORK
from archbench.plan.campaign import load_campaign_file
from archbench.results import claims as published
from archbench.results import imports as importer
from archbench.results.claims_vs_plan import planned_runs
from archbench.results.imports import ImportFormatError, read_import
from archbench.results.tables import build_table
from archbench.workloads.training import settings as training_settings
from archbench.workloads.training.settings import Setting

REPO = Path(__file__).resolve().parents[1]
HEADER = "system,model,batch,nodes,throughput,unit"


def import_file(tmp_path: Path, header: str, *rows: str, name: str = "site.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_every_identity_setting_planned_as_a_key_is_a_column():
    columns = importer.setting_columns()
    planned = {s.planned for s in training_settings.SETTINGS
               if s.identity and s.planned and not s.planned.startswith(training_settings.TUNING)
               and not s.omit_default}  # precision, math_mode, graph: a row states none (fp32 strict eager)
    fields = {importer.RECORD_FIELD.get(c, c) for c in columns}
    assert fields == planned - {"device"}  # the device follows from gpus
    assert {"framework", "model", "batch", "threads", "vendor_library_enabled"} <= set(columns)
    assert set(columns) <= importer.known_columns()
    assert set(importer.UNSTATED) <= set(columns)  # each names a setting column


def test_a_framework_column_reads_as_that_frameworks_row(tmp_path):
    path = import_file(tmp_path, HEADER + ",framework",
                       "s,resnet50,32,1,10,img/s,pytorch", "s,resnet50,32,2,19,img/s,")
    frame = read_import(path)
    assert frame["framework"].tolist() == ["pytorch", DEFAULT_FRAMEWORK]
    claims = published.import_claims(path)
    assert claims["framework"].tolist() == ["pytorch", DEFAULT_FRAMEWORK]


def test_a_row_without_a_framework_is_the_registrys_default(tmp_path):
    frame = read_import(import_file(tmp_path, HEADER, "s,resnet50,32,1,10,img/s"))
    assert frame["framework"].tolist() == [DEFAULT_FRAMEWORK] == ["tensorflow"]
    assert importer.default_of("framework") == DEFAULT_FRAMEWORK
    # the columns a paper may leave unstated stay unstated, not the training defaults
    assert frame[["intra_threads", "inter_threads", "vendor_library_enabled", "data"]].isna().all().all()


@pytest.mark.parametrize("cell, reason", [
    ("mxnet", "'mxnet' is not one of tensorflow, pytorch"),
    ("PyTorch", "'PyTorch' is not one of tensorflow, pytorch"),
])
def test_an_unknown_framework_is_refused_naming_file_and_column(tmp_path, cell, reason):
    path = import_file(tmp_path, HEADER + ",framework", f"s,resnet50,32,1,10,img/s,{cell}")
    with pytest.raises(ImportFormatError) as info:
        read_import(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: row 1 (line 2): column 'framework': ")
    assert reason in message


@pytest.fixture
def precision(monkeypatch):
    """A throwaway identity setting, declared as a later one would be."""
    setting = Setting(name="precision", default="fp32", choices=("fp32", "bf16"),
                      help="arithmetic precision", planned="precision", recorded=True,
                      identity=True)
    cores = Setting(name="spare_cores", type=int, default=2, minimum=0, help="cores left idle",
                    planned="spare_cores", recorded=True, identity=True)
    monkeypatch.setattr(training_settings, "SETTINGS",
                        (*training_settings.SETTINGS, setting, cores))
    return setting


def test_a_new_identity_setting_is_an_import_column_with_its_default(tmp_path, precision):
    assert {"precision", "spare_cores"} <= importer.known_columns()
    assert importer.default_of("precision") == "fp32"
    path = import_file(tmp_path, HEADER + ",precision,spare_cores",
                       "s,resnet50,32,1,10,img/s,bf16,4", "s,resnet50,32,1,12,img/s,,")
    frame = read_import(path)
    assert frame["precision"].tolist() == ["bf16", "fp32"]
    assert frame["spare_cores"].tolist() == [4, 2]
    # a mapping may set it as a constant too, and claims name it as an identity column
    other = import_file(tmp_path, HEADER, "s,resnet50,32,1,10,img/s", name="other.csv")
    assert read_import(other, {"constants": {"precision": "bf16"}})["precision"].tolist() == ["bf16"]
    assert "precision" in published.identity_columns()
    claims = published.import_claims(path)
    assert claims["precision"].tolist() == ["bf16", "fp32"]


@pytest.mark.parametrize("column, cell, reason", [
    ("precision", "fp64", "'fp64' is not one of fp32, bf16"),
    ("spare_cores", "-1", "'-1' is not between 0 and 1,000,000"),
    ("spare_cores", "1.5", "'1.5' is not an integer"),
])
def test_a_bad_value_of_a_new_setting_is_refused_in_one_line(tmp_path, precision, column, cell, reason):
    path = import_file(tmp_path, f"{HEADER},{column}", f"s,resnet50,32,1,10,img/s,{cell}")
    with pytest.raises(ImportFormatError) as info:
        read_import(path)
    message = str(info.value)
    assert "\n" not in message
    assert message == f"{path}: row 1 (line 2): column '{column}': {reason}"


def test_a_claims_file_names_a_new_setting_as_the_importer_reads_it(tmp_path, precision):
    path = tmp_path / "x-claims.csv"
    path.write_text("metric,system,model,precision,value,unit,source\n"
                    "throughput,s,resnet50,bf16,10,img/s,p\n"
                    "throughput,s,resnet50,,12,img/s,p\n")
    claims = published.read_claims(path)
    assert claims["precision"].tolist() == ["bf16", "fp32"]
    assert claims["framework"].tolist() == ["tensorflow", "tensorflow"]
    path.write_text("metric,system,model,precision,value,unit,source\n"
                    "throughput,s,resnet50,fp8,10,img/s,p\n")
    with pytest.raises(ImportFormatError) as info:
        published.read_claims(path)
    assert str(info.value) == (f"{path}: row 1 (line 2): column 'precision': "
                               "'fp8' is not one of fp32, bf16")


def test_without_the_setting_its_column_is_unknown(tmp_path):
    path = import_file(tmp_path, HEADER + ",precision", "s,resnet50,32,1,10,img/s,bf16")
    with pytest.raises(ImportFormatError, match=r"column 'precision': unknown column"):
        read_import(path)


def documented_columns() -> set[str]:
    """The import columns the module docstring's table lists (its first column)."""
    lines = importer.__doc__.splitlines()
    rules = [i for i, line in enumerate(lines) if re.fullmatch(r"=+  =+  =+", line)]
    names = set()
    for line in lines[rules[1] + 1:rules[2]]:
        if line and not line.startswith(" "):
            names.update(re.split(r"\s*/\s*", re.split(r"\s{2,}", line)[0]))
    return names


def test_the_docstring_table_lists_exactly_the_import_columns():
    todo = "give every import column a row of the column table of archbench/results/imports.py"
    assert documented_columns() == importer.known_columns(), todo
    listed = re.search(r"The setting columns \(([^)]*)\)", importer.__doc__).group(1)
    assert set(re.split(r",\s*", listed)) == set(importer.setting_columns()), todo
    # every setting column with a default says it
    for column, value in importer.setting_defaults().items():
        line = next(line for line in importer.__doc__.splitlines() if line.startswith(column + " "))
        block = importer.__doc__[importer.__doc__.index(line):].split("\n", 2)
        assert f"default {value}" in " ".join(block[:2])


# ----------------------------------------------- OSU 2019's PyTorch values
def test_osu_2019_imports_its_pytorch_values_and_vs_published_lists_them():
    """The paper prints PyTorch values only in its text (Figs. 12, 14, 16 and 19 are plots
    without printed numbers): Sec. VI-D's 2.1 img/s and Sec. VI-E's 7.98x. Both are imported
    as PyTorch rows and held against the campaign's planned PyTorch configurations."""
    campaign = load_campaign_file(REPO / "config" / "campaigns" / "osu-2019.yaml")
    files = [REPO / f for f in campaign.config["imports"]]
    claims = published.load_published(files)
    pytorch = claims[claims["framework"] == "pytorch"]
    assert sorted(zip(pytorch["metric"], pytorch["value"])) == [("speedup", 7.98), ("throughput", 2.1)]
    assert pytorch["source"].str.contains(r"OSU 2019, Sect\. VI-[DE]").all()
    table = build_table("vs_published", planned_runs(campaign.measurements), published=claims)
    rows = table[table["configuration"].str.contains("framework=pytorch")]
    assert set(rows["source"]) == set(pytorch["source"])
    assert set(table.loc[table["configuration"].str.contains("framework=tensorflow"), "source"]) \
        == set(claims.loc[claims["framework"] == "tensorflow", "source"])
