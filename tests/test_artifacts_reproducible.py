"""Two regenerations of every table and figure from the same data are byte-identical.

One build runs in this process, the other in a fresh interpreter (different hash seed) at
the same time, so neither process state nor dict/set ordering can leak into the files.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import fabricated as fabricate
import pandas as pd

from archbench.results.artifacts import save_figure, write_table
from archbench.results.collect import flatten
from archbench.results.figures import FIGURES, build_figure
from archbench.results.tables import TABLES, build_tables

HERE = Path(__file__).resolve().parent
PEAK = {"sysb": {"gflops": 500.0, "unit": "GFLOP/s"}}
TABLE_FORMATS = ("csv", "md", "tex")
FIGURE_FORMATS = ("png", "pdf", "svg")


def fabricated() -> pd.DataFrame:
    records = fabricate.fabricate_records(repetitions=2, systems=("sysb",), threads=(1, 4),
                                           batches=(64,))
    return pd.DataFrame([flatten(r) for r in records])


def build_all(out: str | Path) -> None:
    """Every table and figure of the fabricated campaign into ``out``."""
    out = Path(out)
    data = fabricated()
    for name, table in build_tables(data, peak=PEAK).items():
        write_table(table, **{fmt: out / f"{name}.{fmt}" for fmt in TABLE_FORMATS})
    for name in FIGURES:
        save_figure(build_figure(name, data), [out / f"{name}.{fmt}" for fmt in FIGURE_FORMATS])


def test_regeneration_is_byte_identical(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); "
            "import test_artifacts_reproducible as t; t.build_all(sys.argv[1])")
    other = subprocess.Popen([sys.executable, "-c", code, str(second)],
                             env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin",
                                  "MPLBACKEND": "Agg", "HOME": str(tmp_path)},
                             stderr=subprocess.PIPE, text=True)
    build_all(first)
    _, err = other.communicate(timeout=300)
    assert other.returncode == 0, err

    expected = ({f"{n}.{f}" for n in TABLES for f in TABLE_FORMATS}
                | {f"{n}.{f}" for n in FIGURES for f in FIGURE_FORMATS})
    names_1 = {p.name for p in first.iterdir()}
    names_2 = {p.name for p in second.iterdir()}
    assert names_1 == names_2 == expected
    different = [n for n in sorted(expected)
                 if (first / n).read_bytes() != (second / n).read_bytes()]
    assert different == []
    for name in expected:
        assert (first / name).stat().st_size > 0, name

    for name in TABLES:
        tex = (first / f"{name}.tex").read_text()
        assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
        assert tex.startswith("\\begin{tabular}")
    # the fabricated oom (sysb resnet50, batch 64, 4 threads, vendor off) shows as oom
    summary_md = (first / "summary.md").read_text()
    assert any("oom" in line and "sysb" in line for line in summary_md.splitlines())


def test_same_process_twice_is_identical(tmp_path):
    # the tables alone, twice in one process (cheap; catches state kept between builds)
    data = fabricated()
    for out in ("a", "b"):
        for name, table in build_tables(data, peak=PEAK).items():
            write_table(table, **{fmt: tmp_path / out / f"{name}.{fmt}" for fmt in TABLE_FORMATS})
    for path in (tmp_path / "a").iterdir():
        assert path.read_bytes() == (tmp_path / "b" / path.name).read_bytes(), path.name


def test_a_measurements_file_is_read_again_once_it_changed(tmp_path):
    # the workflow's table and figure steps share one process and one cached read per
    # version of the file: a rewritten file must never give the old table or summary
    from archbench.core.files import atomic_write_text
    from archbench.results.artifacts import read_measurements, read_summary, to_csv
    path = tmp_path / "measurements.csv"
    data = fabricated()
    atomic_write_text(path, to_csv(data))
    first, summary = read_measurements(path), read_summary(path)
    first.loc[:, "throughput"] = -1.0  # a caller changing its copy changes no later read
    assert (read_measurements(path)["throughput"].dropna() > 0).all()
    assert read_summary(path).equals(summary)
    fewer = data[data["intra_threads"] != 4]  # half the configurations
    atomic_write_text(path, to_csv(fewer))
    assert len(read_measurements(path)) == len(fewer) < len(data)
    assert len(read_summary(path)) < len(summary)
    assert read_summary(path, "median")["statistic"].eq("median").all()
