"""Scaling series as data: units, baselines, best configuration per size, I/O overhead.

The published numbers are CSCS 2017 (Tables 1-3 and the efficiencies its Section 5.3
prints), imported through the documented format from data/published/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archbench.results import imports as importer
from archbench.results import tables

ROOT = Path(__file__).resolve().parents[1]
CSCS = ROOT / "data" / "published" / "cscs-2017" / "cscs-2017-tables.csv"


def run(throughput: float, **fields) -> dict:
    """One tidy-table row of a successful training run."""
    return {"experiment": "e", "system": "sysa", "arch": "x86_64", "kind": "train",
            "model": "resnet50", "data": "synthetic", "processes_per_node": 1,
            "intra_threads": 4, "inter_threads": 1, "batch_per_process": 32,
            "throughput": throughput, "throughput_unit": "img/s", "status": "ok",
            "config_id": None} | fields


@pytest.fixture(scope="module")
def cscs() -> pd.DataFrame:
    return importer.import_files([CSCS])


def efficiency(table: pd.DataFrame, system: str, data: str, count: int) -> float:
    rows = table[table["system"].eq(system) & table["data"].eq(data) & table["count"].eq(count)]
    assert len(rows) == 1, rows
    return float(rows["efficiency"].iloc[0])


# Section 5.3 of CSCS 2017: "speedup efficiency" / "scalability efficiency" in percent
PUBLISHED_EFFICIENCY = [
    ("piz-daint", 8, 92.07),
    ("aws-p2-8xlarge", 8, 94.44), ("aws-p2-xlarge", 8, 93.45),
    ("aws-p2-xlarge", 16, 88.31), ("aws-p2-8xlarge", 16, 91.77),
    ("aws-p2-8xlarge", 32, 88.35), ("aws-p2-xlarge", 32, 84.45),
    ("aws-p2-xlarge", 64, 50.96), ("aws-p2-8xlarge", 64, 88.55),
]


@pytest.mark.parametrize(("system", "gpus", "percent"), PUBLISHED_EFFICIENCY)
def test_cscs_2017_efficiencies_match_the_paper(cscs, system, gpus, percent):
    table = tables.node_scaling(cscs)
    assert set(table["scaling_unit"]) == {"gpus"}
    assert efficiency(table, system, "synthetic", gpus) * 100 == pytest.approx(percent, abs=0.1)


def test_cscs_2017_baseline_is_one_gpu_even_where_the_packing_changes(cscs):
    table = tables.node_scaling(cscs)
    assert set(table["baseline_count"]) == {1}
    # p2.8xlarge: 1..8 GPUs on one node, then 8 per node: still one series per data input
    p2 = table[table["system"].eq("aws-p2-8xlarge")]
    assert p2.groupby("data")["count"].apply(list).map(len).tolist() == [8, 8]
    assert p2["series"].nunique() == 2 and not p2.duplicated(["series", "count"]).any()
    # 1018.18 / (8 x 138.23), speedup 1018.18 / 138.23
    daint = table[table["system"].eq("piz-daint") & table["data"].eq("synthetic")].set_index("count")
    assert daint.loc[8, "speedup"] == pytest.approx(1018.18 / 138.23)
    assert daint.loc[8, "img_s_baseline"] == pytest.approx(138.23)


def test_cscs_2017_io_overhead(cscs):
    # Section 5.3.6: about 11 % on Piz Daint from 8 to 64 nodes, about 17 % on p2.8xlarge
    io = tables.io_overhead(cscs).set_index(["system", "count"])["io_overhead_percent"]
    assert io[("piz-daint", 8)] == pytest.approx((1018.18 - 911.84) / 1018.18 * 100)
    assert all(10 <= io[("piz-daint", n)] <= 12 for n in (8, 16, 32, 64))
    assert all(13 <= io[("aws-p2-8xlarge", n)] <= 18 for n in (8, 16, 32, 64, 128))
    # each input at its own best setting: 2 GPUs synthetic ran parameter_server, real
    # distributed_replicated; they still pair
    assert io[("piz-daint", 2)] == pytest.approx((264.57 - 260.84) / 264.57 * 100)
    assert len(io) == 3 * 8


def test_the_documented_import_example_gives_the_published_efficiency(tmp_path):
    text = importer.__doc__.split("with the best parameter-server count per size as published::")[1]
    lines = [line.strip() for line in text.split("\n\n")[1].splitlines()]
    example = tmp_path / "example.csv"
    example.write_text("\n".join(lines) + "\n")
    table = tables.node_scaling(importer.read_import(example))
    assert efficiency(table, "piz-daint", "synthetic", 8) * 100 == pytest.approx(92.07, abs=0.01)
    assert "92.07 %" in importer.__doc__


def test_best_per_size_chooses_the_parameter_server_count(tmp_path):
    example = tmp_path / "ps.csv"
    example.write_text(
        "system,model,batch,gpus,gpus_per_node,parameter_servers,variable_update,throughput,unit\n"
        "s,inception_v3,64,1,1,1,parameter_server,100,img/s\n"
        "s,inception_v3,64,4,1,1,parameter_server,300,img/s\n"
        "s,inception_v3,64,4,1,2,parameter_server,360,img/s\n"
        "s,inception_v3,64,4,1,2,distributed_replicated,340,img/s\n"
        "s,inception_v3,64,8,1,4,parameter_server,720,img/s\n"
        "s,inception_v3,64,8,1,8,parameter_server,700,img/s\n")
    rows = importer.read_import(example)
    best = tables.best_per_size(rows).set_index("count")
    assert best["parameter_servers"].to_dict() == {1: 1, 4: 2, 8: 4}
    assert best.loc[4, "variable_update"] == "parameter_server"
    assert best["n_choices"].to_dict() == {1: 1, 4: 3, 8: 2}
    scaling = tables.node_scaling(rows).set_index("count")
    assert scaling["efficiency"].to_dict() == pytest.approx({1: 1.0, 4: 0.9, 8: 0.9})


def test_cesga_2018_scales_over_workers_not_task_nodes():
    rows = importer.import_files([ROOT / "data" / "published" / "cesga-2018" / "cesga-2018-table3.csv"])
    table = tables.node_scaling(rows).set_index("count")
    assert set(table["scaling_unit"]) == {"workers"} and table.index.tolist() == list(range(1, 10))
    assert table.loc[9, "speedup"] == pytest.approx(247.3 / 31.0)


def test_median_statistic_changes_the_reported_value():
    df = pd.DataFrame([run(v, experiment_type="node_scaling", scaling_unit="nodes", nodes=n,
                           workers=n, strategy="horovod", repetition=i)
                       for n, values in ((1, (10.0, 10.0, 40.0)), (2, (18.0, 20.0, 22.0)))
                       for i, v in enumerate(values)])
    mean = tables.build_table("node_scaling", df).set_index("count")
    median = tables.build_table("node_scaling", df, statistic="median").set_index("count")
    assert mean.loc[1, "img_s"] == pytest.approx(20.0) and median.loc[1, "img_s"] == pytest.approx(10.0)
    assert median.loc[2, "efficiency"] == pytest.approx(20.0 / (2 * 10.0))
    assert set(median["statistic"]) == {"median"} and set(mean["statistic"]) == {"mean"}
    assert median.loc[1, ["n", "img_s_min", "img_s_max"]].tolist() == [3, 10.0, 40.0]


# ------------------------------------------------------------------- property test
POWERS = [1, 2, 4, 8, 16, 32, 64, 128]


@st.composite
def series_with_noise(draw):
    """One GPU scaling series (counts shuffled, 1-3 parameter-server choices per size)
    plus rows of other layouts: another batch, real data, another system."""
    counts = draw(st.lists(st.sampled_from(POWERS), min_size=2, max_size=6, unique=True))
    draw(st.randoms()).shuffle(counts)
    rows, best = [], {}
    for n in counts:
        values = draw(st.lists(st.floats(1.0, 1e4), min_size=1, max_size=3))
        best[n] = max(values)
        for ps, value in enumerate(values, start=1):
            rows.append(dict(system="s", gpus=n, gpus_per_node=min(n, 4), parameter_servers=ps,
                             batch=64, data="synthetic", throughput=value))
    others = ({"batch": 32}, {"data": "real"}, {"system": "t"})  # each layout once: a
    for i in draw(st.lists(st.sampled_from(range(len(others))), max_size=3, unique=True)):
        other = others[i]  # configuration listed twice is refused by the importer
        for n in draw(st.lists(st.sampled_from(POWERS), min_size=1, max_size=3, unique=True)):
            rows.append(dict(system="s", gpus=n, gpus_per_node=1, parameter_servers=1, batch=64,
                             data="synthetic", throughput=draw(st.floats(1.0, 1e4))) | other)
    order = draw(st.permutations(range(len(rows))))
    return [rows[i] for i in order], best


@settings(max_examples=60, deadline=None)
@given(series_with_noise())
def test_property_efficiency_follows_the_formula_for_any_series(generated):
    rows, best = generated
    frame = pd.DataFrame(rows).assign(model="inception_v3", unit="img/s")
    path = Path(f"/tmp/archbench-property-{id(rows)}.csv")
    frame.to_csv(path, index=False)
    try:
        table = tables.node_scaling(importer.read_import(path))
    finally:
        path.unlink()
    ours = table[table["system"].eq("s") & table["data"].eq("synthetic")
                 & table["batch_per_process"].eq(64)].set_index("count")
    assert sorted(ours.index) == sorted(best)  # one row per size, other layouts kept apart
    b = min(best)
    assert ours.loc[b, "efficiency"] == pytest.approx(1.0)
    for n, value in best.items():
        assert ours.loc[n, "img_s"] == pytest.approx(value)
        assert ours.loc[n, "efficiency"] == pytest.approx(value / ((n / b) * best[b]))
        assert ours.loc[n, "speedup"] == pytest.approx(value / best[b])
    assert not table.duplicated(["system", "series", "count"]).any()


def test_series_labels_name_what_differs():
    df = pd.DataFrame([run(v, experiment_type="node_scaling", scaling_unit="nodes", nodes=n,
                           workers=n * ppn, processes_per_node=ppn, strategy="horovod")
                       for ppn in (1, 2) for n, v in ((1, 10.0), (2, 19.0))])
    labels = set(tables.node_scaling(df)["series"])
    assert len(labels) == 2 and all(re.search(r"\d ppn", label) for label in labels)
