"""Series and panel labels a reader understands ("batch 64", "oneDNN on", "real data",
"2 PS"), and the rule that keeps series apart: every identity column that varies within a
panel goes into the label, so two configurations never share a line, a bar slot or a
legend entry. :func:`series_label` refuses (ValueError) to return labels that would merge
two rows at the same x.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from archbench.core import fields
from archbench.workloads.training import frameworks, strategies

VENDOR_NAMES = {"onednn": "oneDNN", "mkl": "MKL", "mkldnn": "MKL-DNN", "mkl-dnn": "MKL-DNN",
                "armpl": "ArmPL", "acl": "ACL", "onednn-acl": "oneDNN+ACL",
                "onednn+acl": "oneDNN+ACL", "openblas": "OpenBLAS", "eigen": "Eigen"}


def missing(value: object) -> bool:
    """True for None, NA and NaN."""
    if value is None or value is pd.NA:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def number(value: object) -> str:
    """12.0 -> "12", 0.5 -> "0.5"."""
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    try:
        as_float = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    return str(int(as_float)) if as_float.is_integer() else f"{as_float:g}"


def _plural(word: str) -> Callable[[object], str]:
    return lambda v: f"{number(v)} {word}{'' if number(v) == '1' else 's'}"


def _setting(value: object) -> str:
    """A thread-count setting of the inter/intra sweep: "0 (auto)", "= cores", "2"."""
    text = number(value)
    return {"0": "0 (auto)", "cores": "= cores"}.get(text, text)


def on_off(name: str) -> Callable[[object], str]:
    """A formatter of a boolean setting: "<name> on" / "<name> off"."""
    def text(value: object) -> str:
        if isinstance(value, str):
            return f"{name} {value}"
        return f"{name} {'on' if bool(value) else 'off'}"
    return text


def _legend(field: fields.Field) -> Callable[[object], str]:
    """The legend text of ``field``'s values (its declared ``legend``)."""
    return lambda v: field.legend.format(number(v) if field.kind is int else v)


# The identity fields' texts are theirs (archbench.core.fields: ``legend``); here the rest,
# and the fields whose text needs a registry or a plural.
FORMATS: dict[str, Callable[[object], str]] = {
    **{f.name: _legend(f) for f in fields.FIELDS if f.legend},
    "device": lambda v: "GPU" if v == "gpu" else "CPU",
    "framework": lambda v: frameworks.label(str(v)),  # the registry's ``Framework.label``
    "series": str,
    "layout": str,
    "axis": str,
    "strategy": lambda v: strategies.label(str(v)),  # the registry's ``Strategy.label``
    "gpus_per_node": lambda v: f"{number(v)} GPU{'' if number(v) == '1' else 's'}/node",
    "threads": _plural("thread"),
    "cores": _plural("core"),
    "nodes": _plural("node"),
    "workers": _plural("worker"),
    "gpus": lambda v: f"{number(v)} GPU{'' if number(v) == '1' else 's'}",
    "mkl_settings": on_off("MKL settings"),
    "inter_setting": lambda v: f"inter-op {_setting(v)}",
    "intra_setting": lambda v: f"intra-op {_setting(v)}",
    "variant": lambda v: f"settings {v}",
    "fusion_threshold_mb": lambda v: "no fusion" if float(v) == 0 else f"fusion {number(v)} MiB",
    "cycle_time_ms": lambda v: f"cycle {number(v)} ms",
    "n_choices": lambda v: f"{number(v)} choices",
}
# named in a series label wherever a panel mixes its values, even where other columns
# would tell the rows apart: a reader never has to guess which framework a line ran in
NAMED = ("framework",)
# every column a figure may split by, in the order labels list them
IDENTITY = (
    "experiment", "system", "device", "framework", *fields.EVERY_TABLE, "model",
    "kernel", "data",
    "vendor_library_enabled", "strategy", "series", "layout", "mkl_settings", "inter_setting",
    "intra_setting", "processes_per_node", "gpus_per_node", "intra_threads", "inter_threads", "threads", "cores", "batch_per_process",
    "parameter_servers", "variable_update", "problem_size", "tile_size", "fusion_threshold_mb",
    "cycle_time_ms", "nodes", "workers", "gpus", "global_batch", "scaling_unit", "variant",
)


def value_text(row: pd.Series, column: str, *, generic: bool = False) -> str:
    """The readable text of ``row[column]`` ("" when missing); ``generic``: the vendor
    library flag as "vendor library on/off" rather than by the library's name."""
    value = row[column]
    if missing(value) or (isinstance(value, str) and value == ""):
        return ""
    if column == "vendor_library_enabled":
        library = None if generic else row.get("vendor_library")
        name = "vendor library" if missing(library) or not library else \
            VENDOR_NAMES.get(str(library).lower(), str(library))
        return on_off(name)(value)
    if column == "system" and row.get("device") == "gpu":  # a GPU run is named as one
        return f"{value} (GPUs)"
    formatter = FORMATS.get(column)
    if formatter is None:
        return on_off(column.replace("_", " "))(value) if isinstance(value, (bool, np.bool_)) \
            else f"{column.replace('_', ' ')} {number(value)}"
    return formatter(value)


def label(frame: pd.DataFrame, columns: Sequence[str], *, empty: str = "all") -> pd.Series:
    """One text per row: the readable values of ``columns`` joined by ", " (the vendor
    library by name when ``frame`` has one library, else as "vendor library on/off")."""
    if frame.empty:
        return pd.Series([], index=frame.index, dtype=object)
    columns = [c for c in columns if c in frame]
    generic = "vendor_library" in frame and frame["vendor_library"].dropna().nunique() > 1
    texts = [", ".join(t for t in (value_text(row, c, generic=generic) for c in columns) if t)
             or empty for _, row in frame.iterrows()]
    return pd.Series(texts, index=frame.index, dtype=object)


def _key(series: pd.Series) -> pd.Series:
    """Values comparable across dtypes, NA as one value of its own."""
    return series.astype(object).map(lambda v: "\0NA" if missing(v) else v)


def varying(frame: pd.DataFrame, columns: Iterable[str], within: Sequence[str] = ()) -> list[str]:
    """The ``columns`` that take more than one value inside some group of ``within``."""
    out = []
    within = [c for c in within if c in frame]
    if frame.empty:
        return out
    groups = frame[within].apply(_key).apply(tuple, axis=1) if within else \
        pd.Series(0, index=frame.index)
    for column in columns:
        if column in frame and column not in within and \
                _key(frame[column]).groupby(groups).nunique().max() > 1:
            out.append(column)
    return out


def merged(frame: pd.DataFrame, keys: Sequence[str]) -> bool:
    """True when two rows share every one of ``keys`` (would be drawn as one point)."""
    keys = [k for k in keys if k in frame]
    return bool(frame[keys].astype(object).apply(_key).duplicated().any()) if keys else len(frame) > 1


def steady(frame: pd.DataFrame, columns: Iterable[str], group: Sequence[str]) -> pd.DataFrame:
    """``frame`` with each of ``columns`` emptied in the groups of ``group`` (series) along
    which it changes (e.g. processes per node along a series over workers): a label names
    only what holds for a whole series."""
    columns = [c for c in columns if c in frame and c not in group]
    if frame.empty or not columns:
        return frame
    gid = frame[list(group)].apply(_key).apply(tuple, axis=1)
    out = frame.copy()
    for column in columns:
        changes = _key(frame[column]).groupby(gid).transform("nunique") > 1
        if changes.any():
            out[column] = frame[column].astype(object).mask(changes)
    return out


def _clash(frame: pd.DataFrame, keys: Sequence[str], group: Sequence[str]) -> bool:
    """True when two series share ``keys``: two groups of ``group`` (a series each), or
    without ``group`` two rows."""
    if not group:
        return merged(frame, keys)
    keys = [k for k in keys if k in frame]
    combos = frame[[*keys, *group]].astype(object).apply(_key).drop_duplicates()
    return bool(combos.duplicated(subset=keys).any()) if keys else len(combos) > 1


def series_columns(frame: pd.DataFrame, *, columns: Sequence[str], within: Sequence[str] = (),
                   x: Sequence[str] = (), fallback: Sequence[str] = IDENTITY,
                   group: Sequence[str] = ()) -> list[str]:
    """The columns of a legend label: those of ``columns`` that vary inside a panel
    (``within``), extended with varying ``fallback`` columns until no two rows share panel,
    label and ``x``. With ``group`` (the columns naming each row's series, e.g. a table's
    ``series``), a column counts only along the series it is constant on (:func:`steady`),
    and no two series of a panel may share a label.

    Raises ValueError when even that leaves two rows at one point (the figure would merge
    series)."""
    group = [g for g in group if g in frame]
    if group:
        frame = steady(frame, [*columns, *fallback], group)
        if merged(frame, [*within, *group, *x]):
            raise ValueError(f"series would merge: rows share {', '.join([*within, *group, *x])}")
    keys = [*within] if group else [*within, *x]
    used = varying(frame, columns, within)
    for column in varying(frame, [c for c in fallback if c not in used and c not in x], within):
        if not _clash(frame, [*keys, *used], group):
            break
        used.append(column)
    if _clash(frame, [*keys, *used], group):
        raise ValueError(f"series would merge: rows share {', '.join(keys)} and the label "
                         f"columns ({', '.join(used) or 'none'})")
    return used


def title(frame: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """A panel title per row (the readable values of ``columns``)."""
    return label(frame, columns, empty="")
