"""Importing published results: the CESGA 2018 Table 3 through its mapping sidecar, and
malformed files rejected with one line naming file, row and column."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from archbench.results.imports import (
    ImportFormatError,
    find_mapping,
    import_files,
    load_mapping,
    read_import,
)
from archbench.results.tables import node_scaling, summarise

REPO = Path(__file__).resolve().parents[1]
MAPPINGS = REPO / "data" / "published" / "cesga-2018"  # the sidecar sits beside its CSV
REFERENCE = MAPPINGS / "cesga-2018-table3.csv"


def test_cesga_table3_speedups_match_published():
    reference = REFERENCE
    sidecar = find_mapping(reference)
    assert sidecar == MAPPINGS / "cesga-2018-table3.yaml"
    rows = read_import(reference, load_mapping(sidecar))
    published = {int(r["workers"]): float(r["speedup_published"])
                 for r in csv.DictReader(reference.open())}
    assert len(rows) == len(published) == 9
    assert set(rows["status"]) == {"ok"} and set(rows["kind"]) == {"train"}

    table = node_scaling(rows)
    assert set(table["scaling_unit"]) == {"workers"}  # 1 PS + n workers: the unit is workers
    assert table["baseline_count"].tolist() == [1] * 9
    computed = dict(zip(table["count"].astype(int), table["speedup"]))
    assert sorted(computed) == sorted(published)
    for workers, value in published.items():
        assert computed[workers] == pytest.approx(value, abs=0.01), workers
    assert (table["status"] == "ok").all()


def test_cesga_table3_keeps_published_error():
    rows = import_files([REFERENCE])
    summary = summarise(rows).sort_values("workers")
    assert summary["n"].tolist() == [1] * 9
    assert summary["mean"].iloc[0] == pytest.approx(31.0)
    assert summary["error"].iloc[0] == pytest.approx(0.6)  # published max - min, not 0
    assert set(summary["source"]) == {"CESGA 2018, Table 3"}


def test_cesga_table3_without_mapping_is_rejected():
    with pytest.raises(ImportFormatError, match="tasks_nodes"):
        read_import(REFERENCE)


GOOD = "system,model,throughput,unit,nodes,data\nsysa,resnet50,10.5,img/s,1,synthetic\n" \
       "sysa,resnet50,19.0,img/s,2,real\n"


def test_well_formed_file_imports(tmp_path):
    path = tmp_path / "good.csv"
    path.write_text(GOOD)
    rows = read_import(path)
    assert rows["throughput"].tolist() == [10.5, 19.0]
    assert rows["nodes"].tolist() == [1, 2]
    assert rows["source"].tolist() == ["good.csv", "good.csv"]
    assert rows["experiment"].tolist() == ["good", "good"]


@pytest.mark.parametrize("text, row, column", [
    ("system,model,throughput,nodes\nsysa,resnet50,10,1\n", "row 0", "unit"),
    ("system,model,throughput,unit\nsysa,resnet50,10,img/s\nsysa,resnet50,fast,img/s\n",
     "row 2", "throughput"),
    ("system,model,throughput,unit\nsysa,resnet50,-3.5,img/s\n", "row 1", "throughput"),
    ("system,model,throughput,unit,colour\nsysa,resnet50,10,img/s,red\n", "row 0", "colour"),
    ("system,model,throughput,unit,data\nsysa,resnet50,10,img/s,synthetic\n"
     "sysa,resnet50,10,img/s,imaginary\n", "row 2", "data"),
    ("system,model,throughput,unit,nodes\nsysa,resnet50,10,img/s,1.5\n", "row 1", "nodes"),
    ("system,throughput,unit\nsysa,10,img/s\n", "row 0", "model"),
    ("system,model,throughput,unit,scaling_unit\nsysa,resnet50,10,img/s,gpus\n", "row 1", "gpus"),
    ("system,model,throughput,unit,scaling_unit\nsysa,resnet50,10,img/s,cores\n", "row 1",
     "scaling_unit"),
    ("system,model,throughput,unit,gpus,parameter_servers\nsysa,resnet50,10,img/s,4,-1\n",
     "row 1", "parameter_servers"),
], ids=["missing-column", "non-numeric", "negative", "unknown-column", "bad-choice",
        "fractional-nodes", "no-model-or-kernel", "gpu-unit-without-gpus", "unknown-unit",
        "negative-parameter-servers"])
def test_malformed_file_names_file_row_and_column(tmp_path, text, row, column):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ImportFormatError) as info:
        read_import(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    assert f"{row} " in message or message.endswith(row)
    assert f"'{column}'" in message


@pytest.mark.parametrize("text", ["", "\n\n  \n"], ids=["empty", "blank-lines"])
def test_empty_file_is_rejected(tmp_path, text):
    path = tmp_path / "empty.csv"
    path.write_text(text)
    with pytest.raises(ImportFormatError) as info:
        read_import(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and "row 0" in message


def test_mapping_to_unknown_column_is_rejected(tmp_path):
    path = tmp_path / "good.csv"
    path.write_text(GOOD)
    with pytest.raises(ImportFormatError, match="speed"):
        read_import(path, {"columns": {"throughput": "speed"}})


def test_value_map_translates_file_text(tmp_path):
    path = tmp_path / "daint.csv"
    path.write_text("system,model,throughput,unit,gpus,Real Data\n"
                    "d,inception_v3,138.23,img/s,1,FALSE\nd,inception_v3,137.03,img/s,1,TRUE\n")
    mapping = {"columns": {"Real Data": "data"},
               "values": {"data": {"TRUE": "real", "FALSE": "synthetic"}}}
    rows = read_import(path, mapping)
    assert rows["data"].tolist() == ["synthetic", "real"]
    assert rows["scaling_unit"].tolist() == ["gpus", "gpus"] and rows["gpus"].tolist() == [1, 1]
    with pytest.raises(ImportFormatError, match="values.colour"):
        read_import(path, {**mapping, "values": {"colour": {"a": "b"}}})
