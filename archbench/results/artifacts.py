"""Deterministic writing of publication artifacts: tables as CSV, Markdown and LaTeX
(booktabs), figures as PNG, PDF and SVG. Two regenerations from the same data give
byte-identical files: fixed float formatting, sorted rows (done by the table functions),
no timestamps or software versions in figure metadata, a fixed SVG hash salt.

Also the whole artifact steps the workflow's adapters call: :func:`make_table_files`,
:func:`make_figure_files`, :func:`merge_measurements`, and the names of the tables and
figures it writes, read from their registries: :func:`table_names`, :func:`figure_names`.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from archbench.core import escape, fields
from archbench.core.files import atomic_path, atomic_write_text
from archbench.workloads.training.frameworks import FRAMEWORKS

CSV_FLOAT = "%.10g"   # CSV keeps (nearly) full precision
SOURCE_DATE_EPOCH = "0"
SVG_HASHSALT = "archbench"
FIGURE_METADATA = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None, "ModDate": None},
    "svg": {"Creator": None, "Date": None},
}
FAILED_STATUSES = ("oom", "timeout", "failed")
# Human-readable headers of the Markdown and LaTeX tables (CSV keeps the column names).
# The identity fields' headers are theirs (archbench.core.fields.HEADERS).
LABELS = {
    **fields.HEADERS, "img_s": "img/s", "io_overhead_percent": "I/O overhead %",
    "bandwidth_gb_s": "GB/s", "gflops": "GFLOP/s", "img_s_twin": "twin img/s", "n_twin": "twin n",
    "loss_tail": "loss", "loss_tail_twin": "twin loss", "quality_flag": "loss departs",
}
# framework_comparison: each framework's side, headed by its short label ("TF img/s")
SIDE_LABELS = {"n": "n", "img_s": "img/s", "img_s_min": "min", "img_s_max": "max", "cv": "CV"}


def header(column: str) -> str:
    """The header of ``column`` in Markdown and LaTeX: :data:`LABELS`, a framework side's
    column (``img_s_<framework>``) as the framework's short label and the side's text, else
    the column name."""
    if column in LABELS:
        return LABELS[column]
    for name, chosen in FRAMEWORKS.items():
        side = column.removesuffix(f"_{name}")
        if side != column and side in SIDE_LABELS:
            short = getattr(chosen, "short_label", "") or chosen.label
            return f"{short} {SIDE_LABELS[side]}"
    return column


# ----------------------------------------------------------------------------- tables
def format_number(value: object) -> str:
    """A value for people: integers as is, floats with 3 decimals (1 above 100, scientific
    below 0.001 and from 1e7 on), booleans yes/no, missing as empty."""
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        x = float(value)
        if math.isnan(x):
            return ""
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e7):
            return f"{x:.3e}"
        return f"{x:.1f}" if abs(x) >= 100 else f"{x:.3f}"
    return str(value)


def _visible(table: pd.DataFrame) -> list:
    """Columns shown to people: all of an empty table, else those with any value."""
    return [c for c in table.columns if table.empty or table[c].notna().any()]


def _numeric(table: pd.DataFrame) -> list[bool]:
    """Per visible column: right-aligned (numeric) or not."""
    return [pd.api.types.is_numeric_dtype(table[c]) for c in _visible(table)]


def display_frame(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` as strings for Markdown/LaTeX.

    Columns empty throughout are left out (unless the table is empty: then every header
    stays). A value missing because the configuration failed shows the failure ("oom",
    "timeout", "failed"), never a zero or a blank. ``vendor_library_enabled`` reads on/off.
    """
    table = table.loc[:, _visible(table)]
    out = pd.DataFrame(index=table.index)
    status = table["status"].astype(object) if "status" in table else None
    for name in table.columns:
        col = table[name].astype(object)
        if name == "vendor_library_enabled":
            text = [("on" if v else "off") if isinstance(v, (bool, np.bool_)) else format_number(v)
                    for v in col]
        else:
            text = [format_number(v) for v in col]
        if status is not None and name != "status" and pd.api.types.is_numeric_dtype(table[name]):
            text = [str(s) if t == "" and s in FAILED_STATUSES else t
                    for t, s in zip(text, status)]
        out[name] = text
    out.columns = [header(str(c)) for c in table.columns]
    return out


def to_markdown(table: pd.DataFrame) -> str:
    """A pipe table (GitHub Markdown); numeric columns right-aligned, every cell one line
    of text (:func:`archbench.core.escape.markdown_cell`)."""
    shown = display_frame(table)
    numeric = _numeric(table)

    lines = ["| " + " | ".join(escape.markdown_cell(c) for c in shown.columns) + " |",
             "|" + "|".join("---:" if num else ":---" for num in numeric) + "|"]
    for row in shown.itertuples(index=False):
        lines.append("| " + " | ".join(escape.markdown_cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def to_latex(table: pd.DataFrame) -> str:
    """A booktabs ``tabular`` (``\\toprule``/``\\midrule``/``\\bottomrule``; needs
    ``\\usepackage{booktabs}``), numeric columns right-aligned, every cell one line with
    LaTeX's special characters escaped (:func:`archbench.core.escape.latex`)."""
    shown = display_frame(table)
    align = "".join("r" if num else "l" for num in _numeric(table)) or "l"
    lines = [f"\\begin{{tabular}}{{{align}}}", "\\toprule",
             " & ".join(escape.latex(c) for c in shown.columns) + " \\\\", "\\midrule"]
    for row in shown.itertuples(index=False):
        lines.append(" & ".join(escape.latex(v) for v in row) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def to_csv(table: pd.DataFrame) -> str:
    """CSV text: fixed float format, booleans True/False, missing values empty, "\\n" ends;
    a text cell (or header) that a spreadsheet would run as a formula is neutralised
    (:func:`archbench.core.escape.csv_cell`)."""
    safe = table.copy()
    for column in safe.select_dtypes(include=["object", "string"]).columns:
        formula = safe[column].map(lambda v: escape.csv_cell(v) is not v).astype(bool)
        if formula.any():  # only those cells: a column of numbers keeps its type and format
            safe.loc[formula, column] = safe.loc[formula, column].map(escape.csv_cell)
    safe.columns = [escape.csv_cell(c) for c in safe.columns]
    return safe.to_csv(index=False, float_format=CSV_FLOAT, lineterminator="\n")


def write_table(table: pd.DataFrame, *, csv: str | os.PathLike | None = None,
                md: str | os.PathLike | None = None, tex: str | os.PathLike | None = None) -> None:
    """Write ``table`` in the formats given a path."""
    for path, render in ((csv, to_csv), (md, to_markdown), (tex, to_latex)):
        if path is not None:
            atomic_write_text(path, render(table))


def read_measurements(path: str | os.PathLike) -> pd.DataFrame:
    """The tidy table from CSV or Parquet, normalised (an empty file is an empty table).
    Read once per version of the file in a process (see :func:`unchanged_file_cached`)."""
    return unchanged_file_cached(path, "tidy", lambda: _read_measurements(Path(path)))


def read_summary(path: str | os.PathLike, statistic: str | None = None) -> pd.DataFrame:
    """The per-configuration summary (:func:`archbench.results.tables.summary_of`) of the tidy
    table at ``path``, once per version of the file and ``statistic`` in a process."""
    from archbench.results.tables import summary_of
    return unchanged_file_cached(path, ("summary", statistic),
                                 lambda: summary_of(read_measurements(path), statistic))


# (path, what) -> (the file's identity, the frame made from it)
_FROM_FILE: dict[tuple, tuple[tuple, pd.DataFrame]] = {}


def unchanged_file_cached(path: str | os.PathLike, what: object,
                          make: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """A copy of ``make()``, computed again only when the file at ``path`` changed (its
    inode, size or modification time: files are replaced atomically). The workflow's table
    and figure steps run in one process and all read the same measurements file."""
    stat = os.stat(path)
    identity = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    key = (os.path.abspath(path), what)
    cached = _FROM_FILE.get(key)
    if cached is None or cached[0] != identity:
        cached = _FROM_FILE[key] = (identity, make())
    return cached[1].copy()


def _read_measurements(path: Path) -> pd.DataFrame:
    from archbench.results.tables import normalise
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        try:
            frame = pd.read_csv(path, keep_default_na=True, low_memory=False)
        except pd.errors.EmptyDataError:
            frame = pd.DataFrame()
    return normalise(frame)


# ---------------------------------------------------------------------------- figures
@contextmanager
def reproducible() -> Iterator[None]:
    """Settings under which matplotlib writes the same bytes every time."""
    import matplotlib
    os.environ.setdefault("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASHSALT}):
        yield


def save_figure(figure, paths: Sequence[str | os.PathLike]) -> None:
    """Save ``figure`` to every path (format from the suffix: png, pdf, svg) reproducibly.
    Its layout engine places the artists once, then every format is drawn with that
    layout: a save under a layout engine would draw the figure twice (once to lay it out)."""
    for path in paths:
        fmt = Path(path).suffix.lstrip(".").lower()
        if fmt not in FIGURE_METADATA:
            raise ValueError(f"{path}: unsupported figure format '{fmt}' (png, pdf, svg)")
    import matplotlib
    engine = figure.get_layout_engine()
    try:
        with reproducible(), matplotlib.rc_context({"figure.autolayout": False,
                                                   "figure.constrained_layout.use": False}):
            if engine is not None:
                figure.draw_without_rendering()
                figure.set_layout_engine(None)  # keeps the positions it computed
            for path in paths:
                fmt = Path(path).suffix.lstrip(".").lower()
                with atomic_path(Path(path)) as tmp:
                    figure.savefig(tmp, format=fmt, metadata=FIGURE_METADATA[fmt])
    finally:
        if engine is not None:
            figure.set_layout_engine(engine)


# ------------------------------------------------------------------- workflow steps
def merge_measurements(measurements: str | os.PathLike, imports: Sequence[str | os.PathLike], *,
                       output: str | os.PathLike,
                       mapping_dirs: Sequence[str | os.PathLike] = ()) -> pd.DataFrame:
    """Collected measurements plus imported published results, as one sorted CSV."""
    from archbench.results.imports import import_files
    from archbench.results.tables.common import sort_rows
    frame = read_measurements(measurements)
    imported = import_files(imports, mapping_dirs=mapping_dirs)
    parts = [p for p in (frame, imported) if not p.empty]
    merged = pd.concat(parts, ignore_index=True) if parts else frame
    merged = sort_rows(merged.drop(columns="variant", errors="ignore"),
                       ["source", "system", "experiment", "config_id", "run_id", "repetition"])
    atomic_write_text(output, to_csv(merged))
    return merged


def table_names(config: Mapping) -> list[str]:
    """The tables the workflow writes for campaign ``config``: every registered table
    (``archbench.results.tables.TABLES``), those comparing with published values only when
    the campaign lists some (``imports:``)."""
    from archbench.results.tables import TABLES
    return sorted(name for name, spec in TABLES.items()
                  if config.get("imports") or not spec.uses_published)


def figure_names() -> list[str]:
    """The figures the workflow draws: every registered figure (``archbench.results.figures.FIGURES``)."""
    from archbench.results.figures import FIGURES
    return sorted(FIGURES)


def framework_bases(config: Mapping) -> dict[str, str]:
    """The base framework of each experiment of campaign ``config`` that names one
    (``framework_base``, its own or the campaign's ``defaults``): what
    ``framework_comparison`` compares its other frameworks against (the others: the
    registry's default, TensorFlow)."""
    default = config.get("defaults", {}).get("framework_base")
    bases = {name: e.get("framework_base", default) for name, e in config.get("experiments", {}).items()}
    return {name: base for name, base in bases.items() if base}


def make_table_files(name: str, source: str | os.PathLike, *, outputs: Mapping[str, str],
                     peak: dict | None = None, statistic: str | None = None,
                     systems: dict | None = None, published: Sequence[str] = (),
                     mapping_dirs: Sequence[str] = (),
                     framework_bases: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Build table ``name`` from the tidy table at ``source`` (reporting ``statistic``;
    ``systems``: the campaign's resolved systems; ``published``: the import and claims
    files of the published values, with ``mapping_dirs`` for the sidecars;
    ``framework_bases``: each experiment's base framework where it names one); write
    csv/md/tex ``outputs``."""
    from archbench.results.claims import load_published
    from archbench.results.tables import build_table
    claims = load_published(published, mapping_dirs) if published else None
    from archbench.results.tables import TABLES
    data = read_measurements(source) if TABLES[name].uses_runs else read_summary(source, statistic)
    table = build_table(name, data, peak=peak, statistic=statistic,
                        systems=systems, published=claims, framework_bases=framework_bases)
    write_table(table, csv=outputs.get("csv"), md=outputs.get("md"), tex=outputs.get("tex"))
    return table


def make_figure_files(name: str, source: str | os.PathLike, outputs: Sequence[str], *,
                      statistic: str | None = None,
                      framework_bases: Mapping[str, str] | None = None) -> None:
    """Draw figure ``name`` from the tidy table at ``source`` (``statistic`` of the
    repetitions; ``framework_bases``: each experiment's base framework where it names one);
    save it to ``outputs``."""
    from archbench.results.figures import FIGURES, build_figure
    data = read_measurements(source) if FIGURES[name].uses_runs else read_summary(source, statistic)
    save_figure(build_figure(name, data, statistic, framework_bases), outputs)
