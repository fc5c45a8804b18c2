"""Every figure of FIGURES draws fabricated data and empty data, and saves as png/pdf/svg."""

from __future__ import annotations

import subprocess
import sys

import fabricated as fabricate
import pandas as pd
import pytest
from matplotlib.figure import Figure

from archbench.results.artifacts import save_figure
from archbench.results.collect import flatten
from archbench.results.figures import FIGURES, NO_DATA, build_figure

MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-", "svg": b"<?xml"}


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    # small but with every experiment kind, a planned oom (sysb, batch 64, 4 threads,
    # vendor off) and failed real-data runs at 4 nodes on sysb
    records = list(fabricate.fabricate_records(repetitions=2, systems=("sysb",), threads=(1, 4),
                                                batches=(64,)))
    # and a ppn sweep and an inter/intra sweep with its cores and MKL settings
    records += [r for r in fabricate.fabricate_axis_records(repetitions=2)
                if r["experiment"] in ("ppn", "sweep") and r["system"] == "sysb"
                and r["model"] == "resnet50" and r["vendor_library_enabled"]
                and r["data"] == "synthetic" and r["batch_per_process"] == 64]
    return pd.DataFrame([flatten(r) for r in records])


def texts(figure: Figure) -> list[str]:
    found = [t.get_text() for t in figure.findobj(lambda a: hasattr(a, "get_text"))]
    return [t for t in found if isinstance(t, str)]


@pytest.mark.parametrize("name", list(FIGURES))
def test_figure_from_fabricated_data(name, data, tmp_path):
    figure = build_figure(name, data)
    assert isinstance(figure, Figure)
    assert NO_DATA not in texts(figure)
    assert any(ax.get_visible() and (ax.lines or ax.collections or ax.patches)
               for ax in figure.axes)
    paths = [tmp_path / f"{name}.{fmt}" for fmt in MAGIC]
    save_figure(figure, paths)
    for path in paths:
        content = path.read_bytes()
        assert len(content) > 1000
        assert content.startswith(MAGIC[path.suffix[1:]]), path


@pytest.mark.parametrize("name", list(FIGURES))
def test_figure_without_data_says_so(name, tmp_path):
    for df in (pd.DataFrame(), pd.DataFrame(columns=["system", "throughput", "status"])):
        figure = build_figure(name, df)
        assert isinstance(figure, Figure)
        assert NO_DATA in texts(figure)
    paths = [tmp_path / f"{name}.{fmt}" for fmt in MAGIC]
    save_figure(figure, paths)
    for path in paths:
        assert path.read_bytes().startswith(MAGIC[path.suffix[1:]])
        assert path.stat().st_size > 500


def test_unknown_figure_and_format(tmp_path, data):
    with pytest.raises(KeyError):
        build_figure("no_such_figure", data)
    with pytest.raises(ValueError):
        save_figure(build_figure("io_overhead", pd.DataFrame()), [tmp_path / "x.jpg"])


def test_kernel_line_keeps_its_workers_when_the_nodes_grow_with_them():
    # KTH/ORNL: 2 instances per node, so 2, 4 and 8 workers run on 1, 2 and 4 nodes: one line
    from test_tables import kernel_run
    rows = [{**kernel_run(10.0 * w, "GFLOP/s", kernel="cg", size=65536, workers=w),
             "nodes": w // 2, "processes_per_node": 2} for w in (2, 4, 8)]
    figure = build_figure("kernel_gflops", pd.DataFrame(rows))
    lines = [line for ax in figure.axes for line in ax.lines
             if not line.get_label().startswith("_")]
    assert len(lines) == 1
    assert list(lines[0].get_xdata()) == [2, 4, 8]


def test_the_registry_imports_matplotlib_only_to_draw():
    """Planning a campaign reads FIGURES; only drawing a figure imports matplotlib."""
    code = ("import sys; from archbench.results.figures import FIGURES; "
            "assert 'matplotlib' not in sys.modules, 'registry imported matplotlib'; "
            "import importlib; [getattr(importlib.import_module('archbench.results.figures.' + m), f) "
            "for m, f in (s.function.rsplit('.', 1) for s in FIGURES.values())]; "
            "assert 'matplotlib' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def two_frameworks() -> pd.DataFrame:
    """Thread scaling of one configuration, 1 and 2 threads, in TensorFlow and PyTorch."""
    from test_tables import runs
    return pd.DataFrame([row for f, scale in (("tensorflow", 1.0), ("pytorch", 0.8)) for t in (1, 2)
                         for row in runs([10.0 * t * scale, 11.0 * t * scale], intra_threads=t,
                                         framework=f)])


def legend_texts(figure: Figure) -> list[str]:
    return [t.get_text() for lg in figure.legends for t in lg.get_texts()]


def test_a_figure_mixing_frameworks_names_them_in_its_legend():
    legend = legend_texts(build_figure("thread_scaling", two_frameworks()))
    assert len(legend) == 2
    assert any("TensorFlow" in t for t in legend) and any("PyTorch" in t for t in legend)
    # one framework: the legend need not say it
    alone = two_frameworks().query("framework == 'tensorflow'")
    assert not any("TensorFlow" in t for t in legend_texts(build_figure("thread_scaling", alone)))


def test_framework_comparison_draws_a_bar_per_framework_and_the_ratio():
    figure = build_figure("framework_comparison", two_frameworks())
    (ax,) = [ax for ax in figure.axes if ax.get_visible()]
    bars = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers
            if c.get_label() in ("TensorFlow", "PyTorch")}
    assert bars == {"TensorFlow": [10.5, 21.0], "PyTorch": [pytest.approx(8.4), pytest.approx(16.8)]}
    assert sorted(legend_texts(figure)) == ["PyTorch", "TensorFlow"]
    assert texts(figure).count("0.80x") == 2  # the ratio PyTorch / TensorFlow above each pair
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["resnet50\nbatch 32\n1 node x 1 ppn\nintra 1",
                     "resnet50\nbatch 32\n1 node x 1 ppn\nintra 2"]
