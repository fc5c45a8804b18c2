"""Malformed published inputs: import CSVs, mapping sidecars and claims files.

Property-based: generated well-formed files import with exactly the values written;
mutated ones (junk, NUL, huge, negative or non-finite cells, columns duplicated, dropped or
renamed, wrong field counts, truncation, random or non-UTF-8 bytes) either import as
written or raise ImportFormatError with one line naming the file (for a cell: its row,
line and column); no other exception ever escapes. Then one plain test per finding of
issue 15's review, and check_imports, the plan-time check of a campaign's ``imports:``.
"""

from __future__ import annotations

import csv
import io
import os
import re
import time
from pathlib import Path

import pytest
import yaml
from conftest import count_input
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archbench.core.fields import DEFAULT_FRAMEWORK
from archbench.results import claims as published
from archbench.results.claims import check_imports
from archbench.results.imports import (
    BOOL_COLUMNS,
    FLOAT_COLUMNS,
    INT_BOUNDS,
    INT_COLUMNS,
    NAME_COLUMNS,
    UNITS,
    ImportFormatError,
    load_mapping,
    read_import,
    read_values,
)
from archbench.workloads.names import registered
from archbench.workloads.training.frameworks import strategies_of

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data" / "published"
TRIED = {kind: {"accepted": 0, "rejected": 0} for kind in ("import", "sidecar", "claims")}
KINDS = {"import": "import CSV (generated)", "sidecar": "mapping sidecar (generated)",
         "claims": "claims file (generated)"}
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TRUE = ("true", "on", "yes", "1")
# a throughput no unit makes impossible on one core: 1e-3 PFLOP/s is under a tenth of the
# physical bound of one core (archbench.workloads.ceiling), so a generated row is valid
PHYSICAL = 1e-3


# ---------------------------------------------------------------- what a file says
def typed(column: str, text: str) -> object:
    """``text`` of a cell of import ``column`` by plain conversion (the property's oracle)."""
    text = text.strip(" ")
    if column in INT_COLUMNS or column in published.INT_IDENTITY:
        return int(float(text))
    if column in FLOAT_COLUMNS or column in ("value", "low", "high"):
        return float(text)
    if column in BOOL_COLUMNS:
        return text.lower() in TRUE
    if column == "unit":
        return next((u for u in UNITS if u.lower() == text.lower().replace(" ", "")), text)
    return text


def written(data: bytes, mapping: dict | None = None) -> list[dict]:
    """Row by row, {import column: value} of the non-empty cells of the CSV ``data`` (and
    its mapping's renames, value tables and constants)."""
    mapping = mapping or {}
    rows = [r for r in csv.reader(io.StringIO(data.decode("utf-8-sig"), newline=""))
            if any(c.strip() for c in r)]
    header = [h.strip(" ") for h in rows[0]]
    rename = mapping.get("columns", {})
    tables = {n: {str(k).strip(): str(v) for k, v in t.items()}
              for n, t in mapping.get("values", {}).items()}
    constants = {n: typed(n, str(v).lower() if isinstance(v, bool) else str(v))
                 for n, v in mapping.get("constants", {}).items()}
    out = []
    for cells in rows[1:]:
        values = dict(constants)
        for name, cell in zip(header, cells):
            target, text = rename.get(name, name), cell.strip(" ")
            if target is not None and text:
                values[target] = typed(target, tables.get(target, {}).get(text, text))
        out.append(values)
    return out


def assert_sane(values: dict) -> None:
    """An accepted row holds printable text, names, known units and bounded counts."""
    for column, value in values.items():
        if isinstance(value, str):
            assert value.isprintable() and value == value.strip(), (column, value)
        if column in NAME_COLUMNS:
            assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}", value), (column, value)
        if column in INT_COLUMNS:
            assert 0 <= value <= INT_BOUNDS[column][1], (column, value)
    assert values["unit"] in UNITS


def assert_rejection(exc: ImportFormatError, files: tuple[Path, ...], row: int | None = None) -> None:
    """One line naming one of ``files``; a row error names its line and (for a cell) its
    column; ``row``: the data row a cell mutation changed, which the error must name."""
    message = str(exc)
    assert "\n" not in message and "\r" not in message, message
    assert any(message.startswith(f"{f}: ") for f in files), message
    found = re.search(r": row (\d+) \((header|line \d+)\)", message)
    if found and found.group(1) != "0" and "not valid CSV" not in message:
        assert re.search(r": column '[^']*': \S", message), message
    both = re.search(r": rows (\d+) and (\d+) \(lines \d+ and \d+\): ", message)
    if row is not None and both:  # a row repeating another's configuration names both
        assert str(row) in both.groups(), message
    elif row is not None:
        assert f": row {row} (line " in message, message


def tried(kind: str, outcome: str) -> None:
    """Count one generated input (printed in the run's summary by conftest)."""
    TRIED[kind][outcome] += 1
    count_input(KINDS[kind], outcome)


def write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("malformed")


# ---------------------------------------------------------------- generated files
NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,10}", fullmatch=True)
TEXT = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "S"), include_characters=" "),
               max_size=12)
OPTIONAL = ("source", "experiment", "experiment_type", "arch", "vendor_library", "variable_update",
            "error", "data", "strategy", "scaling_unit", "nodes", "workers", "gpus",
            "gpus_per_node", "processes_per_node", "threads", "inter_threads", "batch",
            "global_batch", "problem_size", "tile_size", "repetition", "parameter_servers",
            "vendor_library_enabled")
JUNK = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["", " ", "\x00", "a\x00b", "\x01", "\x7f", "\t5", "5\n", "\u200bx", "x\u00a0",
                     "\ufeff1", "nan", "NaN", "inf", "-inf", "Infinity", "1e400", "1e-400", "-1",
                     "-0.5", "0", "1.5", "2", "1_000", "0x10", str(2**60), "9" * 40, "img/S",
                     "gflop / s", "furlongs/s", "TRUE", "maybe", "synthetic", "a b", "'a'"]),
    st.integers(-2**64, 2**64).map(str),
    st.floats().map(repr))


def cell(draw: st.DrawFn, column: str, columns: list[str]) -> str:
    """A well-formed cell of import ``column`` as text."""
    if column == "model":  # an unregistered model needs its FLOPs declared (imports.declared_flops)
        return draw(st.sampled_from(registered("model")))
    if column in NAME_COLUMNS:
        return draw(NAMES)
    if column == "source":
        return draw(TEXT)
    if column == "unit":
        unit = draw(st.sampled_from(sorted(UNITS)))
        return draw(st.sampled_from([unit, unit.lower(), unit.upper(), f" {unit} "]))
    if column == "strategy":  # a parameter_server row scales over workers: only beside them
        runs = strategies_of(DEFAULT_FRAMEWORK) if "model" in columns else registered("strategy")  # TF's row
        return draw(st.sampled_from([s for s in runs
                                     if s != "parameter_server" or "workers" in columns]))
    if column == "scaling_unit":
        return draw(st.sampled_from([c for c in ("nodes", "workers", "gpus") if c in columns]))
    if column == "data":
        return draw(st.sampled_from(["synthetic", "real"]))
    if column in BOOL_COLUMNS:
        return draw(st.sampled_from(["true", "False", "on", "off", "yes", "NO", "1", "0"]))
    if column == "throughput":  # physically possible in any unit on one core (ceiling.py)
        return repr(draw(st.floats(1e-9, PHYSICAL)))
    if column in FLOAT_COLUMNS:
        return repr(draw(st.floats(0.0, 1e21)))
    low = 0 if column in ("threads", "inter_threads", "repetition", "parameter_servers") else 1
    number = draw(st.integers(low, INT_BOUNDS[column][1]))
    return draw(st.sampled_from([str(number), f"{number}.0"]))


def render(table: list[list[str]], newline: str = "\n") -> bytes:
    """``table`` as CSV whose records end in ``newline`` (a cell with \\r or \\n is quoted)."""
    records = []
    for row in table:
        out = io.StringIO()
        csv.writer(out, lineterminator="\r\n").writerow(row)  # quotes cells with \r or \n
        records.append(out.getvalue().removesuffix("\r\n"))
    return "".join(record + newline for record in records).encode()


@st.composite
def import_files(draw: st.DrawFn) -> bytes:
    """A well-formed import CSV: system, a model or a kernel, throughput, unit and some
    optional columns; counts a row scales over are never empty."""
    columns = ["system", draw(st.sampled_from(["model", "kernel"])), "throughput", "unit",
               *draw(st.lists(st.sampled_from(OPTIONAL), unique=True, max_size=8))]
    if "scaling_unit" in columns and not {"nodes", "workers", "gpus"} & set(columns):
        columns.remove("scaling_unit")
    columns = draw(st.permutations(columns))
    never_empty = ("system", "model", "kernel", "throughput", "unit", "strategy",
                   "scaling_unit", "nodes", "workers", "gpus")
    count = draw(st.integers(1, 4))
    if count > 1 and "repetition" not in columns:  # one configuration, one row per repetition
        columns.insert(draw(st.integers(0, len(columns))), "repetition")
    rows = []
    for i in range(count):
        rows.append([str(i) if c == "repetition" and count > 1 else cell(draw, c, columns)
                     if c in never_empty or draw(st.booleans()) else "" for c in columns])
    return render([list(columns), *rows], draw(st.sampled_from(["\n", "\r\n"])))


@st.composite
def claims_files(draw: st.DrawFn) -> bytes:
    """A well-formed claims file: metric, unit, source, a value or a range, some identity."""
    identity = draw(st.lists(st.sampled_from(["system", "model", "kernel", "data", "mkl_env",
                                              "nodes", "batch", "problem_size", "cores",
                                              "vendor_library_enabled"]),
                             unique=True, max_size=4))
    columns = draw(st.permutations(["metric", "value", "low", "high", "unit", "tolerance",
                                    "source", "note", *identity]))
    rows = []
    # one claim per metric: two of one metric and identity may contradict each other
    metrics = draw(st.lists(st.sampled_from(sorted(published.METRICS)), min_size=1, max_size=4,
                            unique=True))
    for metric in metrics:
        claim = {"metric": metric, "unit": draw(st.sampled_from(sorted(published.METRICS[metric].units))),
                 "source": draw(NAMES), "note": draw(TEXT)}
        top = PHYSICAL if metric in ("throughput", "best_throughput", "gflops", "bandwidth") else 1e21
        bounds = sorted(draw(st.lists(st.floats(-1e21, top), min_size=1, max_size=2)))
        if len(bounds) == 1:
            claim[draw(st.sampled_from(["value", "low", "high"]))] = repr(bounds[0])
        else:
            claim["low"], claim["high"] = map(repr, bounds)
        if draw(st.booleans()):
            claim["tolerance"] = draw(st.sampled_from(["5%", "0", "0.5", "12.5%"]))
        for name in identity:
            if name == "mkl_env" and draw(st.booleans()):
                claim[name] = "!" * draw(st.booleans()) + draw(NAMES)  # !x: anything but x
            elif name == "cores" and draw(st.booleans()):
                claim[name] = str(draw(st.integers(1, INT_BOUNDS["nodes"][1])))
            elif name not in ("mkl_env", "cores") and draw(st.booleans()):
                claim[name] = cell(draw, name, columns)
        rows.append([claim.get(c, "") for c in columns])
    return render([list(columns), *rows])


@st.composite
def mutated(draw: st.DrawFn, files: st.SearchStrategy[bytes]) -> tuple[bytes, int | None]:
    """A file of ``files`` with one mutation, and the data row a replaced cell is in."""
    data = draw(files)
    table = list(csv.reader(io.StringIO(data.decode(), newline="")))
    width, height = len(table[0]), len(table)
    action = draw(st.sampled_from(["cell", "cell", "cell", "duplicate", "drop", "rename",
                                   "fields", "truncate", "bytes", "random", "latin-1", "header only",
                                   "blank lines", "bom"]))
    at, row = draw(st.integers(0, width - 1)), draw(st.integers(1, height - 1))
    if action == "cell":
        table[row][at] = draw(JUNK)
        return render(table), row
    if action == "duplicate":
        for cells in table:
            cells.insert(draw(st.integers(0, width)), cells[at])
    elif action == "drop":
        for cells in table:
            del cells[at]
    elif action == "rename":
        table[0][at] = draw(st.sampled_from([*OPTIONAL, "throughput", "model", "colour"]) | JUNK)
    elif action == "fields":
        table[row] = table[row][:-1] if draw(st.booleans()) else [*table[row], draw(JUNK)]
    elif action == "header only":
        table = table[:1]
    elif action == "blank lines":
        table.insert(row, [])
        table.append(["", ""][:width])
    elif action == "truncate":
        return data[:draw(st.integers(0, len(data)))], None
    elif action == "bytes":
        where = draw(st.integers(0, len(data)))
        return data[:where] + draw(st.binary(min_size=1, max_size=4)) + data[where:], None
    elif action == "random":
        return draw(st.binary(max_size=200)), None
    elif action == "latin-1":
        return data.decode().replace(",", ",\u00e9", 1).encode("latin-1", "replace"), None
    elif action == "bom":
        return b"\xef\xbb\xbf" + data, None
    return render(table), None


# ---------------------------------------------------------------- import CSVs
@PROPERTY
@given(import_files())
def test_well_formed_import_files_import_as_written(folder, data):
    path = write(folder, "valid.csv", data)
    rows = read_values(path)
    assert [values for _, values in rows] == written(data)
    tried("import", "accepted")


@settings(PROPERTY, max_examples=400)
@given(mutated(import_files()))
def test_mutated_import_files_import_as_written_or_are_rejected(folder, case):
    data, row = case
    path = write(folder, "mutated.csv", data)
    try:
        rows = read_values(path)
    except ImportFormatError as exc:
        tried("import", "rejected")
        assert_rejection(exc, (path,), row)
        with pytest.raises(ImportFormatError, match=re.escape(str(exc))):
            check_imports([path])  # the plan-time check says the same
        return
    tried("import", "accepted")
    assert [values for _, values in rows] == written(data)
    for _, values in rows:
        assert_sane(values)
    check_imports([path])
    assert len(read_import(path)) == len(rows)


# ---------------------------------------------------------------- mapping sidecars
@st.composite
def mapped_files(draw: st.DrawFn) -> tuple[bytes, dict]:
    """A well-formed import CSV whose columns are renamed (and one extra column dropped,
    one import column set as a constant) by a mapping; or a shipped table and its sidecar."""
    if draw(st.integers(0, 3)) == 0:
        study, stem = draw(st.sampled_from([("cesga-2018", "cesga-2018-table3"),
                                            ("cscs-2017", "cscs-2017-tables")]))
        mapping = yaml.safe_load((DATA / study / f"{stem}.yaml").read_text())
        return (DATA / study / f"{stem}.csv").read_bytes(), mapping
    table = list(csv.reader(io.StringIO(draw(import_files()).decode(), newline="")))
    renamed = draw(st.lists(st.integers(0, len(table[0]) - 1), unique=True))
    columns = {f"Column {i}": table[0][i] for i in renamed}
    for i in renamed:
        table[0][i] = f"Column {i}"
    columns["Notes"] = None
    for cells in table:
        cells.append("Notes" if cells is table[0] else draw(JUNK.filter(lambda t: "\x00" not in t)))
    mapping = {"columns": columns}
    if "arch" not in table[0] and "arch" not in columns.values():
        mapping["constants"] = {"arch": draw(NAMES)}
    return render(table), mapping


BOMB = "".join(f"{k}: &{k} [{', '.join([f'*{p}' if p else 'x'] * 10)}]\n"
               for p, k in zip(["", "a", "b", "c", "d"], "abcde"))  # 10**5 values


def junk_yaml(draw: st.DrawFn, text: str) -> str:
    """``text`` with YAML-level damage: a repeated key, an alias bomb, a tab, deep nesting."""
    lines = text.splitlines()
    action = draw(st.sampled_from(["repeat", "bomb", "recursive", "infinite", "tab", "nest", "truncate"]))
    if action == "repeat":
        keyed = [line for line in lines if ":" in line] or ["columns: {}"]
        lines.append(draw(st.sampled_from(keyed)))
    elif action == "bomb":
        lines += BOMB.splitlines()
    elif action == "recursive":
        lines.append("constants: &r {system: *r}")
    elif action == "infinite":
        lines.append(f"constants: {{throughput: {draw(st.sampled_from(['.inf', '-.inf', '.nan']))}}}")
    elif action == "tab":
        lines.insert(draw(st.integers(0, len(lines))), "\tcolumns: {}")
    elif action == "nest":
        lines.append("values: " + draw(st.sampled_from(["[" * 2000 + "]" * 2000, "- " * 5000 + "x"])))
    else:
        return text[:draw(st.integers(0, len(text)))]
    return "\n".join(lines) + "\n"


@settings(PROPERTY, max_examples=250)
@given(mapped_files(), st.data())
def test_mutated_sidecars_import_as_written_or_are_rejected(folder, case, data):
    content, mapping = case
    damage = data.draw(st.sampled_from(["none", "value", "yaml", "latin-1", "bytes"]))
    if damage == "value":  # a value of the mapping replaced with junk or removed
        section = data.draw(st.sampled_from(sorted(mapping)))
        key = data.draw(st.sampled_from(sorted(mapping[section]) or ["x"]))
        replacement = data.draw(JUNK | st.none() | st.lists(JUNK, max_size=2) | st.integers())
        mapping = {**mapping, section: {**mapping[section], key: replacement}}
    text = yaml.safe_dump(mapping, allow_unicode=True)
    if damage == "yaml":
        text = junk_yaml(data.draw, text)
    raw = text.encode()
    if damage == "latin-1":
        raw = text.replace(":", ": \u00e9", 1).encode("latin-1", "replace")
    elif damage == "bytes":
        where = data.draw(st.integers(0, len(raw)))
        raw = raw[:where] + data.draw(st.binary(min_size=1, max_size=3)) + raw[where:]
    sub = folder / "sidecar"
    sub.mkdir(exist_ok=True)
    path, sidecar = write(sub, "site.csv", content), write(sub, "site.yaml", raw)
    try:
        loaded = load_mapping(sidecar)
        rows = read_values(path, loaded)
    except ImportFormatError as exc:
        tried("sidecar", "rejected")
        assert_rejection(exc, (path, sidecar))
        assert damage != "none"
        with pytest.raises(ImportFormatError, match=re.escape(str(exc))):
            check_imports([path])
        return
    tried("sidecar", "accepted")
    assert [values for _, values in rows] == written(content, loaded)
    for _, values in rows:
        assert_sane(values)
    check_imports([path])


# ---------------------------------------------------------------- claims files
def claims_as_written(data: bytes, claims) -> None:
    header = [h.strip(" ") for h in next(csv.reader(io.StringIO(data.decode("utf-8-sig"))))]
    expected = written(data, {"columns": {h: f"_{h}" for h in header}})  # typed by claim name
    assert len(claims) == len(expected)
    for (_, claim), values in zip(claims.iterrows(), expected):
        for name in header:
            given_value = values.get(f"_{name}")
            if given_value is None:
                assert published._missing(claim[name]), (name, claim[name])
            else:
                assert claim[name] == typed(name, str(given_value)), (name, claim[name], given_value)
                if isinstance(claim[name], str):
                    assert claim[name].isprintable()


@PROPERTY
@given(claims_files())
def test_well_formed_claims_files_read_as_written(folder, data):
    path = write(folder, "valid-claims.csv", data)
    claims_as_written(data, published.read_claims(path))
    tried("claims", "accepted")


@settings(PROPERTY, max_examples=300)
@given(mutated(claims_files()))
def test_mutated_claims_files_read_as_written_or_are_rejected(folder, case):
    data, row = case
    path = write(folder, "mutated-claims.csv", data)
    try:
        claims = published.read_claims(path)
    except ImportFormatError as exc:
        tried("claims", "rejected")
        assert_rejection(exc, (path,), row)
        with pytest.raises(ImportFormatError, match=re.escape(str(exc))):
            check_imports([path])
        return
    tried("claims", "accepted")
    claims_as_written(data, claims)
    check_imports([path])


# ---------------------------------------------------------------- the review's findings
GOOD = "system,model,throughput,unit,nodes\nsysa,resnet50,10.5,img/s,1\n"


def rejected(path: Path, *parts: str) -> None:
    """Importing ``path`` fails with one line that contains every one of ``parts``."""
    with pytest.raises(ImportFormatError) as info:
        read_import(path)
    assert_rejection(info.value, (path,))
    for part in parts:
        assert part in str(info.value), str(info.value)


def test_repeated_column_is_rejected(tmp_path):
    path = write(tmp_path, "dup.csv", b"system,model,throughput,unit,throughput\nsysa,resnet50,1,img/s,2\n")
    rejected(path, "row 0 (header)", "column 'throughput'", "repeated (columns 3 and 5)")


def test_two_columns_mapped_to_one_import_column_are_rejected(tmp_path):
    path = write(tmp_path, "twice.csv", b"system,model,img_s,Img/s,unit\nsysa,resnet50,1,2,img/s\n")
    with pytest.raises(ImportFormatError, match=r"column 'Img/s': gives 'throughput' as column 'img_s'"):
        read_values(path, {"columns": {"img_s": "throughput", "Img/s": "throughput"}})
    with pytest.raises(ImportFormatError, match=r"column 'unit': gives 'unit', a constant"):
        read_values(path, {"columns": {"img_s": "throughput", "Img/s": None},
                           "constants": {"unit": "img/s"}})


@pytest.mark.parametrize("text", ["system,model,throughput,unit\n", "system,model,throughput,unit\n\n,,,\n"],
                         ids=["header", "header-and-blank-lines"])
def test_header_without_rows_is_rejected(tmp_path, text):
    rejected(write(tmp_path, "header.csv", text.encode()), "row 0 (header)", "no data rows")
    claims = write(tmp_path, "header-claims.csv", b"metric,value,unit,source\n")
    with pytest.raises(ImportFormatError, match="no data rows"):
        published.read_claims(claims)


def test_unknown_unit_is_rejected_and_known_ones_are_stored_as_spelled(tmp_path):
    path = write(tmp_path, "unit.csv", GOOD.replace("img/s", "furlongs/s").encode())
    rejected(path, "row 1 (line 2)", "column 'unit'", "'furlongs/s' is not a known unit")
    path = write(tmp_path, "case.csv", GOOD.replace("img/s", "gflop / s").replace("model", "kernel").encode())
    assert read_import(path)["throughput_unit"].tolist() == ["GFLOP/s"]


def test_units_are_those_the_tables_convert_and_the_kernels_and_training_emit():
    from archbench.results.tables.kernels import BANDWIDTH_UNITS, FLOP_UNITS
    from archbench.workloads.kernels import KERNELS
    lower = {unit.lower(): unit for unit in UNITS}
    assert set(lower) == set(FLOP_UNITS) | set(BANDWIDTH_UNITS) | {"img/s"}
    for key, factor in {**FLOP_UNITS, **BANDWIDTH_UNITS}.items():  # the same conversions
        assert 1 / UNITS[lower[key]][1] == pytest.approx(factor), key
    assert {spec.unit for spec in KERNELS.values()} <= set(UNITS)
    from archbench.workloads.training.models import MODELS, spec
    from archbench.workloads.training.outcome import THROUGHPUT_UNIT  # both frameworks' unit
    training = REPO / "archbench" / "workloads" / "training" / "outcome.py"
    assert 'throughput_unit=spec(fields["model"]).unit' in training.read_text()  # the model's
    assert {spec(name).unit for name in MODELS} == {THROUGHPUT_UNIT} and THROUGHPUT_UNIT in UNITS
    # a language model's tokens/s is not imported yet (docs/llm.md)
    for unit in UNITS:  # every imported unit has a metric in vs_published
        assert published._throughput_metric(unit) is not None, unit


@pytest.mark.parametrize("junk", ["a\x00b", "a\x01", "\x1fa", "a\x7f", "a\tb", "a\nb", "\u200ba",
                                  "a\ufeff", "\u00a0a", "a\u2028b", "a\"b", "a b", "-a", "a;", "a" * 65])
def test_control_characters_and_junk_in_text_cells_are_rejected(tmp_path, junk):
    table = [["system", "model", "throughput", "unit", "source"],
             [junk, "resnet50", "1", "img/s", "paper"]]
    rejected(write(tmp_path, "text.csv", render(table)), "row 1 (line 2)", "column 'system'")
    table[1][:2] = ["sysa", f"x{junk}" if junk[0].isalpha() else junk]
    rejected(write(tmp_path, "text.csv", render(table)), "row 1 (line 2)", "column 'model'")
    if not junk.isprintable():  # free text may hold any printable character
        table[1][1:] = ["resnet50", "1", "img/s", junk]
        rejected(write(tmp_path, "text.csv", render(table)), "row 1 (line 2)", "column 'source'")


def test_spaces_around_cells_are_dropped(tmp_path):
    path = write(tmp_path, "spaces.csv", b" system , model ,throughput,unit,source\n"
                                         b" sysa ,resnet50, 10.5 , img/s ,  Table 1  \n")
    assert read_values(path) == [(1, {"system": "sysa", "model": "resnet50", "throughput": 10.5,
                                      "unit": "img/s", "source": "Table 1"})]


@pytest.mark.parametrize(("column", "text"), [
    ("throughput", "nan"), ("throughput", "inf"), ("throughput", "1e400"), ("throughput", "2e21"),
    ("throughput", "0"), ("error", "-1"), ("nodes", "1000001"), ("workers", "1e9"),
    ("gpus", "-1"), ("batch", str(2**20 + 1)), ("global_batch", str(2**40 + 1)),
    ("problem_size", str(2**50 + 1)), ("threads", "1_000"), ("nodes", "0x10"), ("nodes", "9" * 30),
])
def test_non_finite_and_absurd_numbers_are_rejected(tmp_path, column, text):
    table = [["system", "model", "throughput", "unit", column], ["sysa", "resnet50", "1", "img/s", text]]
    if column == "throughput":
        table = [row[:-1] for row in table]
        table[1][2] = text
    rejected(write(tmp_path, "number.csv", render(table)), "row 1 (line 2)", f"column '{column}'")


def test_numbers_at_their_bounds_are_accepted(tmp_path):
    # a model archbench does not build, declared at 1 FLOP per image by its file's mapping,
    # so that 1e21 img/s stays within the physical bound of a million nodes
    table = [["system", "model", "throughput", "unit", "nodes", "batch", "global_batch", "problem_size"],
             ["sysa", "lenet", "1e21", "img/s", "1000000", str(2**20), str(2**40), str(2**50)]]
    (_, values), = read_values(write(tmp_path, "bounds.csv", render(table)), {"training_flops": {"lenet": 1}})
    assert values["nodes"] == 10**6 and values["problem_size"] == 2**50 and values["throughput"] == 1e21


def test_directory_is_rejected(tmp_path):
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(ImportFormatError, match=r"dir\.csv: is a directory, not a file$"):
        check_imports([tmp_path / "dir.csv"])
    write(tmp_path, "site.csv", GOOD.encode())
    (tmp_path / "site.yaml").mkdir()  # a sidecar that is a directory is not skipped
    with pytest.raises(ImportFormatError, match=r"site\.yaml: is a directory, not a file$"):
        check_imports([tmp_path / "site.csv"])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_named_pipe_is_rejected_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "pipe.csv")
    with pytest.raises(ImportFormatError, match="not a regular file"):
        check_imports([tmp_path / "pipe.csv"])


def test_non_utf8_file_is_rejected_naming_row_and_column(tmp_path):
    path = write(tmp_path, "latin.csv", GOOD.replace("sysa", "s\u00e9a").encode("latin-1"))
    rejected(path, "row 1 (line 2)", "column 'system'", "byte 0xe9 is not UTF-8")
    write(tmp_path, "site.csv", GOOD.encode())
    write(tmp_path, "site.yaml", "constants: {arch: x86_64}\n# \u00e9\n".encode("latin-1"))
    with pytest.raises(ImportFormatError, match=r"site\.yaml: line 2: byte 0xe9 is not UTF-8$"):
        check_imports([tmp_path / "site.csv"])


@pytest.mark.parametrize(("text", "reason"), [
    ("columns: {a: system}\ncolumns: {b: system}\n", "line 2: key 'columns' appears twice"),
    ("columns: {a: system, a: model}\n", "key 'a' appears twice"),
    (BOMB, "once its aliases are expanded"),
    ("constants: &r {system: *r}\n", "an alias contains itself"),
    ("values: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("values:\n" + "- " * 20000 + "x\n", "nested too deeply"),
    ("constants: {throughput: .inf}\n", "constants.throughput: inf is not a finite number"),
    ("columns:\n" + "".join(f"  c{i}: null\n" for i in range(6000)), "over the limit of 65,536"),
    ("constants: {source: 2019-13-01}\n", "month must be in 1..12"),
    ("constants: {system: [a, b]}\n", "constants.system: expected a single value"),
    ("columns: {a: [system]}\n", "columns.a: expected file column: import column (or null)"),
], ids=["repeated-section", "repeated-column", "alias-bomb", "recursive-alias", "deep-flow",
        "deep-block", "infinite", "large", "bad-date", "list", "list-target"])
def test_malformed_sidecar_is_rejected_in_one_line(tmp_path, text, reason):
    write(tmp_path, "site.csv", GOOD.encode())
    sidecar = write(tmp_path, "site.yaml", text.encode())
    start = time.monotonic()
    with pytest.raises(ImportFormatError) as info:
        check_imports([tmp_path / "site.csv"])
    assert time.monotonic() - start < 5
    assert_rejection(info.value, (sidecar,))
    assert reason in str(info.value)


@pytest.mark.parametrize(("text", "column"), [
    ("metric,value,unit,source\nspeedup,nan,x,p\n", "value"),
    ("metric,value,unit,source\nspeedup,1e400,x,p\n", "value"),
    ("metric,value,unit,tolerance,source\nspeedup,1,x,nan%,p\n", "tolerance"),
    ("metric,value,unit,source,system\nspeedup,1,x,p,a\x00b\n", "system"),
    ("metric,value,unit,source,note\nspeedup,1,x,p,a\x01b\n", "note"),
    ("metric,value,unit,source,nodes\nspeedup,1,x,p,2000000\n", "nodes"),
    ("metric,value,unit,source,unit\nspeedup,1,x,p,x\n", "unit"),
])
def test_malformed_claims_are_rejected_naming_row_and_column(tmp_path, text, column):
    path = write(tmp_path, "bad-claims.csv", text.encode())
    with pytest.raises(ImportFormatError) as info:
        check_imports([path])
    assert_rejection(info.value, (path,))
    assert f"column '{column}'" in str(info.value)


# ---------------------------------------------------------------- check_imports
def test_check_imports_names_a_missing_file_in_one_line(tmp_path):
    with pytest.raises(ImportFormatError) as info:
        check_imports([DATA / "cesga-2018" / "cesga-2018-table3.csv", tmp_path / "gone.csv"])
    assert str(info.value) == f"{tmp_path / 'gone.csv'}: no such import file"
    with pytest.raises(ImportFormatError, match=r"gone-claims\.csv: no such import file$"):
        check_imports([tmp_path / "gone-claims.csv"])
    write(tmp_path, "gone.yaml", b"not: a mapping\n")  # the file's own error comes first
    with pytest.raises(ImportFormatError, match=r"gone\.csv: no such import file$"):
        check_imports([tmp_path / "gone.csv"])


def test_check_imports_accepts_every_shipped_file_quickly():
    files = sorted(DATA.glob("*/*.csv"))
    start = time.monotonic()
    check_imports(files)
    assert time.monotonic() - start < 1.0
    check_imports([])


def test_counts_of_tried_inputs():
    """The generators produced enough of both outcomes (conftest prints the counts at the
    end of the run)."""
    if not any(sum(c.values()) for c in TRIED.values()):
        pytest.skip("the property tests did not run")
    lines = [f"tried {sum(c.values())} {kind} inputs: {c['accepted']} accepted, {c['rejected']} rejected"
             for kind, c in TRIED.items()]
    print("\n" + "\n".join(lines))
    assert TRIED["import"]["accepted"] >= 150 and TRIED["import"]["rejected"] >= 150, TRIED
    assert TRIED["claims"]["accepted"] >= 100 and TRIED["claims"]["rejected"] >= 100, TRIED
    assert TRIED["sidecar"]["accepted"] >= 20 and TRIED["sidecar"]["rejected"] >= 20, TRIED
