"""Import published or external measurements so they go through the same tables and figures.

Import format: a CSV file with a header row, one row per measured configuration (or per
repetition, with ``repetition``). Columns, in any order:

=======================  ========  ==========================================================
column                   required  meaning
=======================  ========  ==========================================================
system                   yes       system name (e.g. marenostrum4)
model / kernel           one       trained model (resnet50, ...) or kernel (matmul, stream, ...)
throughput               yes       the value: mean img/s, GFLOP/s, GB/s ... (positive)
unit                     yes       its unit: img/s, GFLOP/s, GB/s, MB/s
error                    no        published error of the value (e.g. max - min)
source                   no        where the value comes from (paper, table); default: the file
experiment               no        experiment name; default: the file stem
experiment_type          no        thread_scaling, hybrid, node_scaling, kernel, ...
arch                     no        CPU architecture
data                     no        synthetic | real
strategy                 no        a registered training strategy (single, horovod, ...: ``python
                                   -m archbench.train --help``) or workers (a kernel)
scaling_unit             no        nodes | workers | gpus: what the row's scaling series counts
                                   (default: gpus when the row has ``gpus``, else workers for
                                   strategy parameter_server, else nodes when the file gives
                                   ``nodes``; otherwise the row is not part of a scaling series)
nodes                    no        node count (default 1; for GPU rows gpus / gpus_per_node, or
                                   unknown when neither nodes nor gpus_per_node is given)
workers                  no        worker processes in total (default: gpus, else nodes x processes)
gpus                     no        GPUs used in total (a row with gpus is a GPU measurement:
                                   device gpu; without, device cpu)
gpus_per_node            no        GPUs used per node
processes_per_node       no        processes per node (default 1; for GPU rows gpus_per_node)
parameter_servers        no        parameter-server tasks (0 allowed); rows of one size that differ
                                   only in it, or in variable_update, reduce to the best one
variable_update          no        how variables are updated: parameter_server,
                                   distributed_replicated, replicated, horovod, ...
threads                  no        intra-op threads per process
inter_threads            no        inter-op threads
batch                    no        batch size per process
global_batch             no        images per step over all workers (default batch x workers)
problem_size             no        kernel problem size (N, or bytes for STREAM)
tile_size                no        kernel tile size
vendor_library           no        onednn | mkl | armpl | acl
vendor_library_enabled   no        true | false (also on/off, yes/no, 1/0)
framework                no        the framework that measured the row (a registered one:
                                   tensorflow, pytorch, ...); default tensorflow
repetition               no        repetition index when rows are single runs
=======================  ========  ==========================================================

The setting columns (model, batch, threads, inter_threads, vendor_library_enabled, data,
strategy, nodes, processes_per_node, parameter_servers, variable_update, framework) are
the identity settings of the training settings registry
(:data:`archbench.workloads.training.settings.SETTINGS`, :func:`setting_columns`), each
named as the record field it fills (``batch`` and ``threads`` as :data:`RECORD_FIELD`
spells them); the device follows from ``gpus``, and the settings planned under ``tuning``
are no columns. A setting declared there later is an import column by its record field's
name, typed by its declaration (a count, one of its choices or of the registry of its name,
on/off as what it stands for); a row without it has the setting's default, as every
measurement had before the setting existed (:func:`default_of`). The columns above that a
paper may leave unstated (:data:`UNSTATED`) are None without a value, not the training
default. A test keeps this table and the registry in step.

Each configuration is measured once per repetition: two rows of one file that describe
the same configuration (every column but throughput, unit, error, source and
scaling_unit, with the defaults below filled in: 1 TFLOP/s is 1,000 GFLOP/s, an empty
``nodes`` is 1) with the same ``repetition`` (none given: 0) are refused, identical or
not, in one line naming both rows: the tables would count them as two runs. Give each
run its own ``repetition``.

A scaling series is every row that agrees on all identifying columns except the counts
that grow with its unit (``archbench.results.tables.scaling``): over nodes, the per-node layout
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

Every row becomes a tidy-table row (as ``archbench.results.collect.flatten`` gives) with status
``ok``, ``kind`` train or kernel, plus ``reported_error`` and ``source``.

A malformed file raises :class:`ImportFormatError` with one line naming the file, row and
line (data rows count from 1, blank lines skipped; the header is row 0) and column. It is
malformed when it:

- is missing, a directory or not a regular file, over :data:`MAX_FILE_BYTES` (4 MiB), not
  UTF-8 (a leading BOM is fine), not strict CSV, empty, or a header without data rows;
- repeats a header name, maps two file columns to one import column, or gives a column
  its mapping also sets as a constant; has a row whose field count differs from the header's;
- has a cell with a character that is not printable (``str.isprintable``: control
  characters such as NUL, tab, newline or DEL, format characters such as a zero-width
  space or a BOM, spaces other than U+0020); spaces around a cell are dropped;
- gives a name (:data:`NAME_COLUMNS`: system, model, kernel, ...) that is not up to 64
  letters, digits and ``_ . + -`` beginning with a letter or digit; both a model and a kernel;
- gives a ``unit`` not in :data:`UNITS`, the units the tables convert (case and spaces
  ignored, stored as spelled there): img/s (training); FLOP/s, kFLOP/s, MFLOP/s, GFLOP/s,
  TFLOP/s, PFLOP/s (matmul, CG, FFT); B/s, kB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s
  (STREAM: GB/s, stream_comm: MiB/s);
- repeats a configuration and repetition of an earlier row (see above);
- gives a number that is not plain decimal (no inf, nan, hex or ``1_000``) or out of bounds:
  counts (nodes, workers, gpus, gpus_per_node, processes_per_node, threads, inter_threads,
  parameter_servers, repetition) 1 to 1,000,000 (0 allowed for threads, inter_threads,
  parameter_servers and repetition); batch at most 2**20, global_batch 2**40,
  problem_size and tile_size 2**50; throughput above 0, error at least 0, both at most 1e21
  (the bounds of the record fields they fill, ``schemas/record.schema.json``: :data:`INT_BOUNDS`);
- gives a throughput its hardware cannot deliver: more FLOP/s (img/s x the model's
  declared FLOPs per image) or bytes/s than 10 x the peak of the row's cores or GPUs
  (:func:`archbench.workloads.ceiling.beyond_peak`, docs/metrics.md);
- names a model archbench does not build (not registered) without declaring its training
  FLOPs per image in the mapping (``training_flops: {model: FLOPs}``): its img/s could not
  be held to that bound.

A mapping sidecar is malformed, besides the file checks above, when it is over 64 KiB,
is not a YAML mapping of ``columns``, ``constants`` and ``values`` whose entries are
single values (and ``training_flops``, model: positive FLOPs per image), or breaks the
rules of :mod:`archbench.core.yamlio` (a repeated key, a non-finite number, over :data:`archbench.core.yamlio.MAX_NODES` values with aliases
expanded). :func:`archbench.results.claims.check_imports` checks a campaign's ``imports:``
(import and claims files) when the workflow is planned.

The studies' published numbers ship in ``data/published/<study>/``: throughput tables in
this format (each with its sidecar), and the derived values the papers print (speedups,
efficiencies, I/O overheads ...) as claims files (``<study>-claims.csv``, documented in
:mod:`archbench.results.claims`), which the ``vs_published`` table compares with a campaign.

Command line: ``python -m archbench.importer FILE.csv [--map SRC=DST ...] [--set COL=VALUE ...]
[--mapping FILE.yaml] [--output tidy.csv]`` checks a file and prints (or writes) its rows.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from archbench.core import metrics
from archbench.core.csvfile import (
    ImportFormatError,
    at_row,
    check_file,
    clean_text,
    parse_number,
    read_rows,
    read_text,
    show,
)
from archbench.core.record import bound
from archbench.core.validate import ConfigError
from archbench.core.yamlio import load_yaml_text
from archbench.workloads import names
from archbench.workloads.ceiling import beyond_peak
from archbench.workloads.names import registered
from archbench.workloads.training.matrix import outside_matrix
from archbench.workloads.training import settings as training_settings
from archbench.workloads.training.settings import TUNING, Setting

REQUIRED = ("system", "throughput", "unit")
TEXT_COLUMNS = ("system", "model", "kernel", "unit", "source", "experiment",
                "experiment_type", "arch", "vendor_library", "variable_update")
NAME_COLUMNS = ("system", "model", "kernel", "experiment", "experiment_type", "arch",
                "vendor_library", "variable_update")
INT_COLUMNS = ("nodes", "workers", "gpus", "gpus_per_node", "processes_per_node", "threads",
               "inter_threads", "batch", "global_batch", "problem_size", "tile_size",
               "repetition", "parameter_servers")
# the record field an import column fills, where the names differ
RECORD_FIELD = {"threads": "intra_threads", "batch": "batch_per_process"}
# (lowest, highest) of every integer column: the bounds of its record field, one definition
# (counts 0 or 1 to 10**6, batch 2**20, global_batch 2**40, problem_size and tile_size 2**50)
INT_BOUNDS = {column: (bound(RECORD_FIELD.get(column, column), "minimum"),
                       bound(RECORD_FIELD.get(column, column), "maximum")) for column in INT_COLUMNS}
FLOAT_COLUMNS = ("throughput", "error")
# throughput and error, in any unit: a record's bound (1e21 FLOP/s: a thousand exaflops)
MAX_VALUE = bound("throughput", "maximum")
# column -> the values it takes, asked for when a cell is read (strategies: the registry's)
CHOICES: dict[str, Callable[[], Sequence[str]]] = {
    "data": lambda: ("synthetic", "real"),
    "strategy": lambda: registered("strategy"),
    "scaling_unit": lambda: ("nodes", "workers", "gpus")}
BOOL_COLUMNS = ("vendor_library_enabled",)
# the columns typed above; every other identity setting's column is typed by its Setting
TYPED = set(TEXT_COLUMNS) | set(INT_COLUMNS) | set(FLOAT_COLUMNS) | set(CHOICES) | set(BOOL_COLUMNS)
# identity settings that are no import column: a row's device follows from ``gpus`` (a row
# with gpus is a GPU measurement)
DERIVED = ("device",)
# setting columns a published row may leave unstated (None): a paper that does not state its
# batch, threads, layout or vendor library did not run the training defaults. Every other
# setting column defaults to its Setting's default (framework: tensorflow)
UNSTATED = ("model", "batch", "threads", "inter_threads", "vendor_library_enabled", "data",
            "strategy", "nodes", "processes_per_node", "parameter_servers", "variable_update")
# the most a count setting that declares no maximum takes (as the import's own counts)
MAX_COUNT = 10**6
_BOOL = {"true": True, "false": False, "on": True, "off": False, "yes": True, "no": False,
         "1": True, "0": False}
# unit -> (the unit archbench.results.tables converts it to, its value per one of those)
UNITS = {"img/s": ("img/s", 1.0),
         "FLOP/s": ("GFLOP/s", 1e9), "kFLOP/s": ("GFLOP/s", 1e6), "MFLOP/s": ("GFLOP/s", 1e3),
         "GFLOP/s": ("GFLOP/s", 1.0), "TFLOP/s": ("GFLOP/s", 1e-3), "PFLOP/s": ("GFLOP/s", 1e-6),
         "B/s": ("GB/s", 1e9), "kB/s": ("GB/s", 1e6), "MB/s": ("GB/s", 1e3), "GB/s": ("GB/s", 1.0),
         "TB/s": ("GB/s", 1e-3), "KiB/s": ("GB/s", 1e9 / 2**10), "MiB/s": ("GB/s", 1e9 / 2**20),
         "GiB/s": ("GB/s", 1e9 / 2**30)}
_UNIT_KEYS = {unit.lower(): unit for unit in UNITS}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")  # 64 characters, as campaign names
# the columns of a row that are its value, not its configuration
VALUE_COLUMNS = ("throughput", "error", "source")
# a sidecar is small and hand-written; PyYAML reads about 80 KiB a second
MAX_MAPPING_BYTES = 64 * 2**10


# ----------------------------------------------------------------------- setting columns
_COLUMNS: dict[str, Any] = {}  # setting_columns() of the registry "of"


def setting_columns() -> Mapping[str, Setting]:
    """Import column -> its Setting: every identity setting of
    :data:`archbench.workloads.training.settings.SETTINGS` (read when asked) that a
    measurement plans as a key of its own, named as its record field (``batch`` and
    ``threads`` as :data:`RECORD_FIELD` spells them); not the settings planned under
    ``tuning`` (a configuration's variant hash tells those apart, which a published row has
    none of), nor those left out of a configuration at their default (``omit_default``:
    precision, math_mode, graph; a published row states none, and its record reads as the
    defaults, fp32 strict eager, as the studies ran), nor :data:`DERIVED`."""
    settings = training_settings.SETTINGS
    if _COLUMNS.get("of") is not settings:  # derived once per registry (a test may swap it)
        column_of = {record: column for column, record in RECORD_FIELD.items()}
        columns = {}
        for s in settings:
            if s.identity and s.planned and not s.planned.startswith(TUNING) and not s.omit_default:
                column = column_of.get(s.planned, s.planned)
                if column not in DERIVED:
                    columns[column] = s
        stated = {column: _default(columns[column]) for column in columns if column not in UNSTATED}
        _COLUMNS.update({"columns": MappingProxyType(columns), "stated": MappingProxyType(stated),
                         "of": settings})
    return _COLUMNS["columns"]


def _default(setting: Setting) -> Any:
    """The setting's default as the record states it."""
    return setting.recorded_value(setting.default)


def _stated_defaults() -> Mapping[str, Any]:
    """Setting column -> its default, for every setting column but :data:`UNSTATED`."""
    setting_columns()
    return _COLUMNS["stated"]


def known_columns() -> set[str]:
    """Every import column: those of the import format (:data:`TYPED`) and every setting
    column (:func:`setting_columns`)."""
    return TYPED | set(setting_columns())


def default_of(column: str) -> Any:
    """What an import row without setting column ``column`` means: None (unstated) for
    :data:`UNSTATED`, else its Setting's default as the record states it."""
    return None if column in UNSTATED else _stated_defaults()[column]


def setting_defaults() -> dict[str, Any]:
    """Setting column -> the value an import row without it has, where that is not None."""
    return {column: value for column in setting_columns()
            if (value := default_of(column)) is not None}


def _setting_cell(text: str, column: str, setting: Setting) -> Any:
    """A cell of a setting column the import format does not type itself: a number from
    the setting's minimum (else 0) to its maximum (else :data:`MAX_COUNT` for a count,
    :data:`MAX_VALUE` for a number), one of its choices (or of the registry of its name,
    as for the framework), a command-line word (on/off) as what it stands for, or a name."""
    if setting.type in (int, float):
        number = parse_number(text)
        if setting.type is int and not number.is_integer():
            raise ValueError(f"'{text}' is not an integer")
        low = setting.minimum if setting.minimum is not None else 0
        high = getattr(setting, "maximum", None)  # a field the settings may declare
        high = high if high is not None else MAX_COUNT if setting.type is int else MAX_VALUE
        if not low <= number <= high:
            raise ValueError(f"'{show(text)}' is not between {low} and {high:,}")
        return int(number) if setting.type is int else number
    choices = setting.choices() if callable(setting.choices) else setting.choices
    if choices is None and setting.planned in names.FIELDS:
        choices = registered(setting.planned)
    if choices is not None and text not in choices:
        raise ValueError(f"'{show(text)}' is not one of {', '.join(choices)}")
    if not choices and not NAME.fullmatch(text):
        raise ValueError(f"'{show(text)}' is not a name (up to 64 letters, digits, _ . + -)")
    return setting.recorded_value(text)


# ----------------------------------------------------------------------- cells
def canonical_unit(text: str) -> str | None:
    """``text`` as spelled in :data:`UNITS` (case and spaces ignored), None if not there."""
    return _UNIT_KEYS.get(text.lower().replace(" ", ""))


def parse_cell(value: str, column: str) -> Any:
    """One cell as its typed value (see the module docstring's checks); raises ValueError
    with the reason."""
    text = clean_text(value)
    if column in INT_COLUMNS:
        number = parse_number(text)
        if not number.is_integer():
            raise ValueError(f"'{text}' is not an integer")
        low, high = INT_BOUNDS[column]
        if not low <= number <= high:
            raise ValueError(f"'{show(text)}' is not between {low} and {high:,}")
        return int(number)
    if column in FLOAT_COLUMNS:
        number = parse_number(text)
        if not 0 <= number <= MAX_VALUE or (column == "throughput" and number == 0):
            kind = "positive" if column == "throughput" else "non-negative"
            raise ValueError(f"'{show(text)}' is not a {kind} number up to {MAX_VALUE:g}")
        return number
    if column == "unit":
        if canonical_unit(text) is None:
            raise ValueError(f"'{show(text)}' is not a known unit ({', '.join(UNITS)})")
        return canonical_unit(text)
    if column in NAME_COLUMNS and not NAME.fullmatch(text):
        raise ValueError(f"'{show(text)}' is not a name (up to 64 letters, digits, _ . + -)")
    if column in CHOICES and text not in (choices := CHOICES[column]()):
        raise ValueError(f"'{show(text)}' is not one of {', '.join(choices)}")
    if column in BOOL_COLUMNS:
        if text.lower() not in _BOOL:
            raise ValueError(f"'{show(text)}' is not true/false")
        return _BOOL[text.lower()]
    if column not in TYPED and (setting := setting_columns().get(column)):
        return _setting_cell(text, column, setting)
    return text


# ----------------------------------------------------------------------- mapping sidecars
def _read_yaml(path: Path) -> Any:
    """The YAML document of sidecar ``path``: at most MAX_MAPPING_BYTES, read strictly by
    :func:`archbench.core.yamlio.load_yaml_text` (no repeated key, aliases bounded)."""
    text = read_text(path, "mapping file", limit=MAX_MAPPING_BYTES)
    try:
        return load_yaml_text(text, str(path))
    except ConfigError as exc:
        raise ImportFormatError(show(exc, 300)) from None


def load_mapping(path: str | os.PathLike) -> dict:
    """Read a mapping sidecar (YAML with ``columns``, ``constants`` and/or ``values``)."""
    mapping = _read_yaml(Path(path))
    mapping = {} if mapping is None else mapping
    check_mapping(mapping, str(path))
    return mapping


def check_mapping(mapping: Any, where: str = "mapping") -> None:
    """Raise ImportFormatError unless ``mapping`` has only ``columns``, ``constants`` and
    ``values`` dicts whose targets are import columns and whose values are single values."""
    single = (str, int, float, bool)
    if not isinstance(mapping, dict):
        raise ImportFormatError(f"{where}: (top level): a mapping has only 'columns', "
                                "'constants', 'values' and 'training_flops'")
    for key in mapping:
        if key not in ("columns", "constants", "values", "training_flops"):
            raise ImportFormatError(f"{where}: {show(key)}: not a key of a mapping (it has only "
                                    "'columns', 'constants', 'values' and 'training_flops')")
    if not isinstance(mapping.get("training_flops", {}), dict):
        raise ImportFormatError(f"{where}: training_flops: expected a mapping of model to FLOPs per image")
    for name, flops in mapping.get("training_flops", {}).items():
        if isinstance(flops, bool) or not isinstance(flops, (int, float)) or not 0 < flops < math.inf:
            raise ImportFormatError(f"{where}: training_flops.{show(name)}: {show(flops)} is not "
                                    "a positive number of FLOPs per image")
    for key in ("columns", "constants", "values"):
        if not isinstance(mapping.get(key, {}), dict):
            raise ImportFormatError(f"{where}: {key}: expected a mapping")
    for name, table in mapping.get("values", {}).items():
        if name not in known_columns():
            raise ImportFormatError(f"{where}: values.{show(name)}: unknown import column")
        if not isinstance(table, dict):
            raise ImportFormatError(f"{where}: values.{name}: expected a mapping of file text to value")
        for text, value in table.items():
            if not isinstance(text, single) or not isinstance(value, single):
                raise ImportFormatError(f"{where}: values.{name}.{show(text)}: expected file text: value")
    for source, target in mapping.get("columns", {}).items():
        if not isinstance(source, str) or not (target is None or isinstance(target, str)):
            raise ImportFormatError(f"{where}: columns.{show(source)}: expected file column: "
                                    "import column (or null)")
        if target is not None and target not in known_columns():
            raise ImportFormatError(f"{where}: columns.{show(source)}: unknown import column "
                                    f"'{show(target)}'")
    for name, value in mapping.get("constants", {}).items():
        if name not in known_columns():
            raise ImportFormatError(f"{where}: constants.{show(name)}: unknown import column")
        if not isinstance(value, single):
            raise ImportFormatError(f"{where}: constants.{name}: expected a single value")


def mapping_of(path: str | os.PathLike, mapping_dirs: Sequence[str | os.PathLike] = ()) -> dict:
    """The mapping of import file ``path`` from its sidecar ({} without one), once the file
    itself is known to be there (its own error comes first)."""
    check_file(Path(path))
    sidecar = find_mapping(path, mapping_dirs)
    return load_mapping(sidecar) if sidecar else {}


def find_mapping(path: str | os.PathLike, mapping_dirs: Sequence[str | os.PathLike] = ()) -> Path | None:
    """The sidecar of import file ``path``: ``<stem>.yaml`` beside it, else in ``mapping_dirs``."""
    path = Path(path)
    for folder in [path.parent, *map(Path, mapping_dirs)]:
        candidate = folder / f"{path.stem}.yaml"
        if candidate.exists():  # a directory is found, and rejected by load_mapping
            return candidate
    return None


# ----------------------------------------------------------------------- import files
def _targets(path: Path, header: list[str], mapping: dict) -> list[str | None]:
    """The import column of every file column (None: dropped); raises ImportFormatError for
    an unknown column, two columns with one target, or a column that is also a constant."""
    rename, constants = mapping.get("columns", {}), mapping.get("constants", {})
    targets: list[str | None] = []
    given: dict[str, str] = {}  # import column -> the file column that gives it
    for name in header:
        target = rename[name] if name in rename else name
        if target is not None and target not in known_columns():
            raise ImportFormatError(f"{path}: row 0 (header): column '{show(name)}': unknown column "
                                    "(map it, or drop it with a mapping to null)")
        if target is not None and target in given:
            other = given[target]
            raise ImportFormatError(f"{path}: row 0 (header): column '{show(name)}': gives "
                                    f"'{target}' as column '{show(other)}' does")
        if target in constants:
            raise ImportFormatError(f"{path}: row 0 (header): column '{show(name)}': gives "
                                    f"'{target}', a constant of the mapping")
        targets.append(target)
        if target is not None:
            given[target] = name
    present = set(given) | set(constants)
    for name in REQUIRED:
        if name not in present:
            raise ImportFormatError(f"{path}: row 0 (header): column '{name}': missing")
    if "model" not in present and "kernel" not in present:
        raise ImportFormatError(f"{path}: row 0 (header): column 'model': missing "
                                "(a model or a kernel column is required)")
    return targets


def read_values(path: str | os.PathLike, mapping: dict | None = None) -> list[tuple[int, dict]]:
    """The rows of one import file as (row number, {import column: typed value}): only the
    columns the file (or its mapping's constants) gives, nothing derived. Raises
    :class:`ImportFormatError` on malformed input. See the module docstring."""
    path = Path(path)
    mapping = mapping or {}
    check_mapping(mapping, f"{path}: mapping")
    constants = mapping.get("constants", {})
    translate = {name: {str(k).strip(): str(v) for k, v in table.items()}
                 for name, table in mapping.get("values", {}).items()}
    columns = [*REQUIRED, "model", *sorted(known_columns()), *mapping.get("columns", {})]
    header, rows = read_rows(path, columns)
    targets = _targets(path, header, mapping)
    const_values = {}
    for name, value in constants.items():
        try:
            const_values[name] = parse_cell(str(value).lower() if isinstance(value, bool) else str(value), name)
        except ValueError as exc:
            raise ImportFormatError(f"{path}: mapping constants: column '{name}': {exc}") from None
    out = []
    for number, line, cells in rows:
        at = at_row(path, number, line)
        values = dict(const_values)
        for name, target, cell in zip(header, targets, cells):
            if target is None or cell.strip(" ") == "":
                continue
            try:
                text = clean_text(cell)
                values[target] = parse_cell(translate.get(target, {}).get(text, text), target)
            except ValueError as exc:
                raise ImportFormatError(f"{at}: column '{show(name)}': {exc}") from None
        for name in REQUIRED:
            if name not in values:
                raise ImportFormatError(f"{at}: column '{name}': empty")
        if not values.get("model") and not values.get("kernel"):
            raise ImportFormatError(f"{at}: column 'model': empty (a model or a kernel is required)")
        if values.get("model") and values.get("kernel"):
            raise ImportFormatError(f"{at}: column 'kernel': a row gives a model or a kernel, not both")
        if gap := outside_matrix_of(values):
            raise ImportFormatError(f"{at}: column '{gap[0]}': {gap[1]}")
        unit = scaling_unit(values)
        if unit and values.get(unit) is None and not (unit == "nodes" and "gpus" not in values):
            raise ImportFormatError(f"{at}: column '{unit}': empty (the row scales over {unit})")
        flops = declared_flops(at, values.get("model"), mapping)
        if impossible := beyond_peak(_tidy_row(path, number, values), flops_per_image=flops):
            raise ImportFormatError(f"{at}: column 'throughput': {impossible}")
        out.append((number, values))
    check_repeats(path, out, {number: line for number, line, _ in rows})
    return out


def declared_flops(at: str, model: str | None, mapping: dict) -> float | None:
    """The training FLOPs per image the mapping declares (``training_flops``) for ``model``
    when archbench does not build it (None for a registered model or a kernel row): a
    value it cannot hold to the physical bound is refused (ImportFormatError naming the
    file, row and model) unless its file declares them."""
    if not model or model in registered("model"):
        return None
    declared = (mapping.get("training_flops") or {}).get(model)
    if declared is None:
        raise ImportFormatError(
            f"{at}: column 'model': '{show(model)}' is not a registered model, so its img/s "
            f"cannot be held to the physical bound: declare its training FLOPs per image in "
            f"the file's mapping (training_flops: {{{show(model)}: <FLOPs>}}) to import it")
    return float(declared)


def outside_matrix_of(row: Mapping[str, Any]) -> tuple[str, str] | None:
    """(the column at fault, why) when a training row of import columns (an imported row or
    a claim: framework, strategy, variable_update, device or gpus) names a framework x
    strategy x variable update x device that does not run
    (:func:`archbench.workloads.training.matrix.outside_matrix`); None when it runs, or
    is a kernel's. A row without ``framework`` is TensorFlow's; one without ``device`` runs
    on GPUs when it counts ``gpus``."""
    if row.get("kernel"):
        return None
    device = row.get("device") or ("gpu" if row.get("gpus") is not None else "cpu")
    gap = outside_matrix(row.get("framework") or default_of("framework"), strategy=row.get("strategy"),
                         variable_update=row.get("variable_update"), device=device)
    if gap is None:
        return None
    return ("device" if "device" in row else "gpus") if gap[0] == "device" else gap[0], gap[1]


def check_repeats(path: Path, rows: list[tuple[int, dict]], lines: dict[int, int]) -> None:
    """Raise ImportFormatError naming both rows when two ``rows`` (row number, values) are
    one configuration and repetition: equal tidy rows but for their value columns
    (:data:`VALUE_COLUMNS`, the unit: 1 TFLOP/s is 1,000 GFLOP/s) and scaling unit, so
    that a default and the value it stands for are equal."""
    seen: dict[tuple, tuple[int, dict]] = {}
    for number, values in rows:
        tidy = _tidy_row(path, number, values)
        key = tuple((k, v) for k, v in tidy.items()
                    if k not in ("run_id", "throughput", "throughput_unit", "reported_error",
                                 "source", "scaling_unit"))  # the series a row joins, not what ran
        if key not in seen:
            seen[key] = (number, values)
            continue
        first, earlier = seen[key]
        given = ", ".join(f"{k}={v}" for k, v in values.items()
                          if k not in (*VALUE_COLUMNS, "unit", "repetition"))
        both = f"{path}: rows {first} and {number} (lines {lines[first]} and {lines[number]})"
        if earlier == values:
            raise ImportFormatError(f"{both}: the same row twice ({given}, repetition "
                                    f"{tidy['repetition']})")
        raise ImportFormatError(
            f"{both}: one configuration and repetition twice ({given}, repetition "
            f"{tidy['repetition']}): {_value(earlier)} and {_value(values)} "
            "(each run takes its own repetition)")


def _value(values: dict) -> str:
    """'4000 img/s': a row's value as given."""
    return f"{values['throughput']:g} {values['unit']}"


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
    planned = metrics.global_batch(batch, workers) if batch else None
    global_batch = v.get("global_batch", planned)
    experiment = v.get("experiment", path.stem)
    return {
        "schema_version": 1, "run_id": f"{path.stem}/row{number}", "config_id": None,
        "repetition": v.get("repetition", 0), "experiment": experiment,
        "experiment_type": v.get("experiment_type"), "system": v["system"],
        "arch": v.get("arch"), "kind": kind, "model": v.get("model"), "kernel": v.get("kernel"),
        "data": v.get("data"), "strategy": v.get("strategy"), "nodes": nodes,
        "processes_per_node": ppn, "workers": workers, "gpus": gpus, "gpus_per_node": per_node,
        "device": "cpu" if gpus is None else "gpu",
        "parameter_servers": v.get("parameter_servers"),
        "variable_update": v.get("variable_update"), "scaling_unit": scaling_unit(v),
        "intra_threads": v.get("threads"),
        "inter_threads": v.get("inter_threads"), "batch_per_process": batch,
        "global_batch": global_batch, "problem_size": v.get("problem_size"),
        "tile_size": v.get("tile_size"), "vendor_library": v.get("vendor_library"),
        "vendor_library_enabled": v.get("vendor_library_enabled"),
        **{RECORD_FIELD.get(column, column): v.get(column, default)
           for column, default in _stated_defaults().items()},  # framework, ...
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
            mapping = mapping_of(path, mapping_dirs)
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
