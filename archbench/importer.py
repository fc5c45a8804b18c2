"""Import published or external measurements so they go through the same tables and figures.

Import format: a CSV file with a header row, one row per measured configuration (or per
repetition, with ``repetition``). Columns, in any order:

=====================  ========  ==========================================================
column                 required  meaning
=====================  ========  ==========================================================
system                 yes       system name (e.g. marenostrum4)
model / kernel         one       trained model (resnet50, ...) or kernel (matmul, stream, ...)
throughput             yes       the value: mean img/s, GFLOP/s, GB/s ... (positive)
unit                   yes       its unit: img/s, GFLOP/s, GB/s, MB/s
error                  no        published error of the value (e.g. max - min)
source                 no        where the value comes from (paper, table); default: the file
experiment             no        experiment name; default: the file stem
experiment_type        no        thread_scaling, hybrid, node_scaling, kernel, ...
arch                   no        CPU architecture
data                   no        synthetic | real
strategy               no        single | horovod | mirrored | parameter_server | workers
scaling_unit           no        nodes | workers | gpus: what the row's scaling series counts
                                 (default: gpus when the row has ``gpus``, else workers for
                                 strategy parameter_server, else nodes when the file gives
                                 ``nodes``; otherwise the row is not part of a scaling series)
nodes                  no        node count (default 1; for GPU rows gpus / gpus_per_node, or
                                 unknown when neither nodes nor gpus_per_node is given)
workers                no        worker processes in total (default: gpus, else nodes x processes)
gpus                   no        GPUs used in total
gpus_per_node          no        GPUs used per node
processes_per_node     no        processes per node (default 1; for GPU rows gpus_per_node)
parameter_servers      no        parameter-server tasks (0 allowed); rows of one size that differ
                                 only in it, or in variable_update, reduce to the best one
variable_update        no        how variables are updated: parameter_server,
                                 distributed_replicated, replicated, horovod, ...
threads                no        intra-op threads per process
inter_threads          no        inter-op threads
batch                  no        batch size per process
global_batch           no        images per step over all workers (default batch x workers)
problem_size           no        kernel problem size (N, or bytes for STREAM)
tile_size              no        kernel tile size
vendor_library         no        onednn | mkl | armpl | acl
vendor_library_enabled no        true | false (also on/off, yes/no, 1/0)
repetition             no        repetition index when rows are single runs
=====================  ========  ==========================================================

A scaling series is every row that agrees on all identifying columns except the counts
that grow with its unit (``archbench.tables.scaling``): over nodes, the per-node layout
(processes or GPUs per node, threads) stays fixed; over workers or GPUs, the packing on
nodes may change with the count (1 to 8 GPUs on one node, then 16 on two). Its baseline is
its smallest count. For example, CSCS 2017 Table 1 (Piz Daint, one P100 per node) as a
file in this format, with the best parameter-server count per size as published::

    system,model,batch,gpus,gpus_per_node,parameter_servers,variable_update,data,throughput,unit
    piz-daint,inception_v3,64,1,1,1,parameter_server,synthetic,138.23,img/s
    piz-daint,inception_v3,64,2,1,1,parameter_server,synthetic,264.57,img/s
    piz-daint,inception_v3,64,8,1,2,parameter_server,synthetic,1018.18,img/s
    piz-daint,inception_v3,64,8,1,2,parameter_server,real,911.84,img/s

gives parallel efficiency 1018.18 / (8 x 138.23) = 92.07 % at 8 GPUs.

Files whose columns are named differently import as-is through a *mapping*: a dict (or a
YAML sidecar ``<file stem>.yaml`` beside the CSV or in a mapping directory) with
``columns`` (file column -> import column; ``null`` drops the column), ``constants``
(import column -> value for every row) and ``values`` (import column -> {file text ->
import value}, e.g. ``data: {"TRUE": real, "FALSE": synthetic}`` for a "Real Data"
column), e.g. for the CESGA 2018 Table 3 (``data/published/cesga-2018/``)::

    columns: {tasks_nodes: nodes, workers: workers, img_s_mean: throughput,
              img_s_error: error, speedup_published: null}
    constants: {system: finisterrae2, model: resnet50, batch: 64, unit: img/s,
                strategy: parameter_server, parameter_servers: 1, scaling_unit: workers,
                data: synthetic, experiment_type: node_scaling, source: "CESGA 2018, Table 3"}

Every row becomes a tidy-table row (as ``archbench.record.flatten`` gives) with status
``ok``, ``kind`` train or kernel, plus ``reported_error`` and ``source``. A malformed file
raises :class:`ImportFormatError` with one line naming the file, row and column.

The studies' published numbers ship in ``data/published/<study>/``: throughput tables in
this format (each with its sidecar), and the derived values the papers print (speedups,
efficiencies, I/O overheads ...) as claims files (``<study>-claims.csv``, documented in
:mod:`archbench.published`), which the ``vs_published`` table compares with a campaign.

Command line: ``python -m archbench.importer FILE.csv [--map SRC=DST ...] [--set COL=VALUE ...]
[--mapping FILE.yaml] [--output tidy.csv]`` checks a file and prints (or writes) its rows.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd
import yaml

REQUIRED = ("system", "throughput", "unit")
TEXT_COLUMNS = ("system", "model", "kernel", "unit", "source", "experiment",
                "experiment_type", "arch", "vendor_library", "variable_update")
INT_COLUMNS = ("nodes", "workers", "gpus", "gpus_per_node", "processes_per_node", "threads",
               "inter_threads", "batch", "global_batch", "problem_size", "tile_size",
               "repetition", "parameter_servers")
ZERO_ALLOWED = ("threads", "inter_threads", "repetition", "parameter_servers")
FLOAT_COLUMNS = ("throughput", "error")
CHOICES = {"data": ("synthetic", "real"),
           "strategy": ("single", "horovod", "mirrored", "parameter_server", "workers"),
           "scaling_unit": ("nodes", "workers", "gpus")}
BOOL_COLUMNS = ("vendor_library_enabled",)
KNOWN = set(TEXT_COLUMNS) | set(INT_COLUMNS) | set(FLOAT_COLUMNS) | set(CHOICES) | set(BOOL_COLUMNS)
_BOOL = {"true": True, "false": False, "on": True, "off": False, "yes": True, "no": False,
         "1": True, "0": False}


class ImportFormatError(ValueError):
    """A malformed import file; the message is one line naming file, row and column."""


def load_mapping(path: str | os.PathLike) -> dict:
    """Read a mapping sidecar (YAML with ``columns``, ``constants`` and/or ``values``)."""
    try:
        mapping = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ImportFormatError(f"{path}: unreadable mapping ({first})") from exc
    check_mapping(mapping, str(path))
    return mapping


def check_mapping(mapping: Any, where: str = "mapping") -> None:
    """Raise ImportFormatError unless ``mapping`` has only ``columns``, ``constants`` and
    ``values`` dicts whose targets are import columns."""
    if not isinstance(mapping, dict) or set(mapping) - {"columns", "constants", "values"}:
        raise ImportFormatError(f"{where}: a mapping has only 'columns', 'constants' and 'values'")
    for key in ("columns", "constants", "values"):
        if not isinstance(mapping.get(key, {}), dict):
            raise ImportFormatError(f"{where}: {key}: expected a mapping")
    for name, table in mapping.get("values", {}).items():
        if name not in KNOWN:
            raise ImportFormatError(f"{where}: values.{name}: unknown import column")
        if not isinstance(table, dict):
            raise ImportFormatError(f"{where}: values.{name}: expected a mapping of file text to value")
    for source, target in mapping.get("columns", {}).items():
        if target is not None and target not in KNOWN:
            raise ImportFormatError(f"{where}: columns.{source}: unknown import column '{target}'")
    for name in mapping.get("constants", {}):
        if name not in KNOWN:
            raise ImportFormatError(f"{where}: constants.{name}: unknown import column")


def find_mapping(path: str | os.PathLike, mapping_dirs: Sequence[str | os.PathLike] = ()) -> Path | None:
    """The sidecar of import file ``path``: ``<stem>.yaml`` beside it, else in ``mapping_dirs``."""
    path = Path(path)
    for folder in [path.parent, *map(Path, mapping_dirs)]:
        candidate = folder / f"{path.stem}.yaml"
        if candidate.is_file():
            return candidate
    return None


def parse_cell(value: str, column: str) -> Any:
    """One cell as its typed value; raises ValueError with the reason."""
    text = value.strip()
    if column in INT_COLUMNS:
        number = float(text)
        if not number.is_integer():
            raise ValueError(f"'{text}' is not an integer")
        minimum = 0 if column in ZERO_ALLOWED else 1
        if number < minimum:
            raise ValueError(f"'{text}' is below {minimum}")
        return int(number)
    if column in FLOAT_COLUMNS:
        number = float(text)
        if not math.isfinite(number) or number < 0 or (column == "throughput" and number == 0):
            raise ValueError(f"'{text}' is not a positive finite number")
        return number
    if column in CHOICES:
        if text not in CHOICES[column]:
            raise ValueError(f"'{text}' is not one of {', '.join(CHOICES[column])}")
        return text
    if column in BOOL_COLUMNS:
        if text.lower() not in _BOOL:
            raise ValueError(f"'{text}' is not true/false")
        return _BOOL[text.lower()]
    return text


def read_values(path: str | os.PathLike, mapping: dict | None = None) -> list[tuple[int, dict]]:
    """The rows of one import file as (row number, {import column: typed value}): only the
    columns the file (or its mapping's constants) gives, nothing derived. Raises
    :class:`ImportFormatError` on malformed input. See the module docstring."""
    path = Path(path)
    mapping = mapping or {}
    check_mapping(mapping, f"{path}: mapping")
    rename = mapping.get("columns", {})
    constants = mapping.get("constants", {})
    translate = {name: {str(k).strip(): str(v) for k, v in table.items()}
                 for name, table in mapping.get("values", {}).items()}
    rows: list[tuple[int, list[str]]] = []  # (line number, cells) of non-blank lines
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle, strict=True)
            for cells in reader:
                if any(cell.strip() for cell in cells):
                    rows.append((reader.line_num, cells))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ImportFormatError(f"{path}: unreadable CSV ({exc})") from exc
    if not rows:
        raise ImportFormatError(f"{path}: row 0 (header): the file is empty")
    header = [h.strip() for h in rows[0][1]]
    targets: list[str | None] = []
    for name in header:
        target = rename[name] if name in rename else name
        if target is not None and target not in KNOWN:
            raise ImportFormatError(f"{path}: row 0 (header): column '{name}': unknown column "
                                    "(map it, or drop it with a mapping to null)")
        targets.append(target)
    present = {t for t in targets if t} | set(constants)
    for name in REQUIRED:
        if name not in present:
            raise ImportFormatError(f"{path}: row 0 (header): column '{name}': missing")
    if "model" not in present and "kernel" not in present:
        raise ImportFormatError(f"{path}: row 0 (header): column 'model': missing "
                                "(a model or a kernel column is required)")
    const_values = {}
    for name, value in constants.items():
        try:
            const_values[name] = parse_cell(str(value).lower() if isinstance(value, bool) else str(value), name)
        except ValueError as exc:
            raise ImportFormatError(f"{path}: mapping constants: column '{name}': {exc}") from exc
    out = []
    for number, (line, cells) in enumerate(rows[1:], start=1):
        where = f"{path}: row {number} (line {line})"
        if len(cells) != len(header):
            column = header[min(len(cells), len(header)) - 1]
            raise ImportFormatError(f"{where}: column '{column}': {len(cells)} fields, "
                                    f"the header has {len(header)}")
        values = dict(const_values)
        for name, target, cell in zip(header, targets, cells):
            if target is None or cell.strip() == "":
                continue
            cell = translate.get(target, {}).get(cell.strip(), cell)
            try:
                values[target] = parse_cell(cell, target)
            except ValueError as exc:
                raise ImportFormatError(f"{where}: column '{name}': {exc}") from exc
        for name in REQUIRED:
            if name not in values:
                raise ImportFormatError(f"{where}: column '{name}': empty")
        if not values.get("model") and not values.get("kernel"):
            raise ImportFormatError(f"{where}: column 'model': empty "
                                    "(a model or a kernel is required)")
        unit = scaling_unit(values)
        if unit and values.get(unit) is None and not (unit == "nodes" and "gpus" not in values):
            raise ImportFormatError(f"{where}: column '{unit}': empty (the row scales over {unit})")
        out.append((number, values))
    return out


def read_import(path: str | os.PathLike, mapping: dict | None = None) -> pd.DataFrame:
    """Rows of one import file as tidy-table rows (status ok). See the module docstring."""
    path = Path(path)
    return pd.DataFrame([_tidy_row(path, number, values)
                         for number, values in read_values(path, mapping)])


def _tidy_row(path: Path, number: int, v: dict) -> dict:
    """One import row as a tidy-table row."""
    kind = "train" if v.get("model") else "kernel"
    gpus, per_node = v.get("gpus"), v.get("gpus_per_node")
    nodes = v.get("nodes", 1 if gpus is None else None)
    if nodes is None and per_node:
        nodes = -(-gpus // per_node)  # the last node may be partly used
    ppn = v.get("processes_per_node", per_node or (1 if gpus is None else None))
    workers = v.get("workers", gpus or (nodes or 1) * ppn)
    batch = v.get("batch")
    global_batch = v.get("global_batch", batch * workers if batch else None)
    experiment = v.get("experiment", path.stem)
    return {
        "schema_version": 1, "run_id": f"{path.stem}/row{number}", "config_id": None,
        "repetition": v.get("repetition", 0), "experiment": experiment,
        "experiment_type": v.get("experiment_type"), "system": v["system"],
        "arch": v.get("arch"), "kind": kind, "model": v.get("model"), "kernel": v.get("kernel"),
        "data": v.get("data"), "strategy": v.get("strategy"), "nodes": nodes,
        "processes_per_node": ppn, "workers": workers, "gpus": gpus, "gpus_per_node": per_node,
        "parameter_servers": v.get("parameter_servers"),
        "variable_update": v.get("variable_update"), "scaling_unit": scaling_unit(v),
        "intra_threads": v.get("threads"),
        "inter_threads": v.get("inter_threads"), "batch_per_process": batch,
        "global_batch": global_batch, "problem_size": v.get("problem_size"),
        "tile_size": v.get("tile_size"), "vendor_library": v.get("vendor_library"),
        "vendor_library_enabled": v.get("vendor_library_enabled"),
        "throughput": v["throughput"], "throughput_unit": v["unit"], "status": "ok",
        "reason": "", "reported_error": v.get("error"),
        "source": v.get("source", path.name),
    }


def scaling_unit(values: dict) -> str | None:
    """The row's scaling unit: given, else gpus for a GPU row, workers for parameter
    servers, nodes when the file gives nodes; None: not part of a scaling series."""
    if values.get("scaling_unit"):
        return values["scaling_unit"]
    if values.get("gpus") is not None:
        return "gpus"
    if values.get("strategy") == "parameter_server":
        return "workers"
    return "nodes" if values.get("nodes") is not None else None


def import_files(paths: Iterable[str | os.PathLike], mappings: dict | None = None,
                 mapping_dirs: Sequence[str | os.PathLike] = ()) -> pd.DataFrame:
    """All import files as one table; each file's mapping comes from ``mappings[path]`` or
    its sidecar (see :func:`find_mapping`)."""
    frames = []
    for path in paths:
        mapping = (mappings or {}).get(str(path))
        if mapping is None:
            sidecar = find_mapping(path, mapping_dirs)
            mapping = load_mapping(sidecar) if sidecar else {}
        frames.append(read_import(path, mapping))
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def mapping_files(paths: Iterable[str | os.PathLike],
                  mapping_dirs: Sequence[str | os.PathLike] = ()) -> list[str]:
    """The sidecar files the import ``paths`` use (workflow inputs)."""
    found = (find_mapping(p, mapping_dirs) for p in paths)
    return sorted({str(p) for p in found if p is not None})


def _pairs(items: Sequence[str], flag: str) -> dict:
    result = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"{flag} {item}: expected NAME=VALUE")
        key, value = item.split("=", 1)
        result[key.strip()] = None if value.strip() in ("", "null") else value.strip()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Check an import file and print its tidy rows (or write them with --output)."""
    parser = argparse.ArgumentParser(prog="python -m archbench.importer",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("--mapping", help="YAML sidecar with columns/constants")
    parser.add_argument("--map", nargs="*", default=[], metavar="SRC=DST",
                        help="rename a file column to an import column (empty DST drops it)")
    parser.add_argument("--set", nargs="*", default=[], metavar="COL=VALUE",
                        help="a constant import column for every row")
    parser.add_argument("--output", help="write the tidy rows as CSV here")
    args = parser.parse_args(argv)
    try:
        mapping = load_mapping(args.mapping) if args.mapping else {}
        mapping = {"columns": {**mapping.get("columns", {}), **_pairs(args.map, "--map")},
                   "constants": {**mapping.get("constants", {}), **_pairs(args.set, "--set")},
                   "values": mapping.get("values", {})}
        frame = read_import(args.file, mapping)
    except ImportFormatError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.output:
        frame.to_csv(args.output, index=False, lineterminator="\n")
    else:
        print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
