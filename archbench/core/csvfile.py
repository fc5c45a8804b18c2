"""Strict reading of the CSV files archbench is given (import and claims files).

A file must be a regular UTF-8 file of at most ``MAX_FILE_BYTES`` whose header names each
column once and has at least one data row, each row with the header's field count. A cell
is printable text (no NUL, control or format character, no byte that is not UTF-8) and a
number is a plain finite decimal. Every error is one :class:`ImportFormatError` line naming
the file, and for a cell its row, line and column; a file whose header names none of the
columns its kind has is refused without a word of its content.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import stat
from pathlib import Path
from typing import Collection

NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")  # linear: no backtracking
MAX_FILE_BYTES = 4 * 2**20  # checked on every plan: about a second per MiB


class ImportFormatError(ValueError):
    """A malformed import file; the message is one line naming file, row and column."""


def read_text(path: Path, what: str = "import file", *, errors: str = "strict",
              limit: int = MAX_FILE_BYTES) -> str:
    """The text of ``path``, a regular UTF-8 file of at most ``limit`` bytes (``errors``:
    as for bytes.decode). Raises ImportFormatError ('FILE: no such import file', ...)."""
    check_file(path, what, limit)
    try:
        data = path.read_bytes()
        return data.decode("utf-8-sig", errors)
    except OSError as exc:
        raise ImportFormatError(f"{path}: unreadable {what} ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ImportFormatError(f"{path}: line {line}: byte 0x{data[exc.start]:02x} "
                                "is not UTF-8") from None


def check_file(path: Path, what: str = "import file", limit: int = MAX_FILE_BYTES) -> None:
    """Raise ImportFormatError unless ``path`` is a regular file of at most ``limit`` bytes."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ImportFormatError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise ImportFormatError(f"{path}: unreadable {what} ({exc.strerror})") from None
    if stat.S_ISDIR(info.st_mode):
        raise ImportFormatError(f"{path}: is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise ImportFormatError(f"{path}: not a regular file")
    if info.st_size > limit:
        raise ImportFormatError(f"{path}: {info.st_size:,} bytes, over the limit of {limit:,}")


def show(text: object, limit: int = 40) -> str:
    """``text`` for a one-line message: non-printable characters escaped, at most ``limit``."""
    text = str(text)
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else f"{text[:limit]}..."


def clean_text(value: str) -> str:
    """``value`` without surrounding spaces; raises ValueError when a character is not
    printable (a control or format character, another space, or a byte that is not UTF-8)."""
    text = value.strip(" ")
    if not text.isprintable():
        bad = next(c for c in text if not c.isprintable())
        if "\udc80" <= bad <= "\udcff":  # an undecodable byte (read with surrogateescape)
            raise ValueError(f"byte 0x{ord(bad) - 0xDC00:02x} is not UTF-8")
        raise ValueError(f"character U+{ord(bad):04X} is not allowed (not printable)")
    return text


def parse_number(text: str) -> float:
    """A plain decimal number (no inf, nan, hex or underscores) that is finite."""
    if len(text) > 100 or not NUMBER.fullmatch(text):
        raise ValueError(f"'{show(text)}' is not a number")
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"'{show(text)}' is not a finite number")
    return number


def at_row(path: Path, number: int, line: int) -> str:
    """'FILE: row N (line L)' (the header: 'FILE: row 0 (header)') for error messages."""
    return f"{path}: row 0 (header)" if number == 0 else f"{path}: row {number} (line {line})"


def read_rows(path: str | os.PathLike, columns: Collection[str] = (),
              what: str = "an import file") -> tuple[list[str], list[tuple[int, int, list[str]]]]:
    """The header names (spaces around dropped) and the data rows (row number, first line,
    cells) of CSV file ``path``, blank lines skipped; raises ImportFormatError unless the
    file, its header and every row's field count pass the checks of the module docstring,
    and for a NUL or a byte that is not UTF-8 in any cell. With ``columns`` (the names
    ``what`` may have, the first ones named in the message), a header naming none of them
    is refused without showing it: the file is no such table (a password file, a key), and
    its content is never echoed."""
    path = Path(path)
    text = read_text(path, errors="surrogateescape")  # bad bytes are named per cell
    rows: list[tuple[int, list[str]]] = []  # (first line, cells)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    last = 0  # the last line of the previous record (a quoted cell may span lines)
    try:
        for cells in reader:
            if any(cell.strip() for cell in cells):
                rows.append((last + 1, cells))
            last = reader.line_num
    except csv.Error as exc:
        raise ImportFormatError(f"{at_row(path, len(rows), last + 1)}: not valid CSV ({exc})") from None
    if not rows:
        raise ImportFormatError(f"{path}: row 0 (header): the file is empty")
    if columns and not set(cell.strip(" ") for cell in rows[0][1]) & set(columns):
        raise ImportFormatError(f"{path}: row 0 (header): not {what}: its first line names none "
                                f"of its columns ({', '.join(list(columns)[:4])}, ...; the "
                                "file's content is not shown)")
    header: dict[str, int] = {}  # name -> column number
    for cell in rows[0][1]:
        try:
            name = clean_text(cell)
        except ValueError as exc:
            raise ImportFormatError(f"{path}: row 0 (header): column '{show(cell)}': {exc}") from None
        if name in header:
            raise ImportFormatError(f"{path}: row 0 (header): column '{show(name)}': repeated "
                                    f"(columns {header[name]} and {len(header) + 1})")
        header[name] = len(header) + 1
    if len(rows) == 1:
        raise ImportFormatError(f"{path}: row 0 (header): a header but no data rows")
    names, data = list(header), []
    for number, (line, cells) in enumerate(rows[1:], start=1):
        if len(cells) != len(names):
            column = names[min(len(cells), len(names)) - 1]
            raise ImportFormatError(f"{at_row(path, number, line)}: column '{show(column)}': "
                                    f"{len(cells)} fields, the header has {len(names)}")
        data.append((number, line, cells))
    if "\x00" in text or not _is_utf8(text):
        _check_corrupt(path, names, data)
    return names, data


def _check_corrupt(path: Path, header: list[str], rows: list[tuple[int, int, list[str]]]) -> None:
    """Raise ImportFormatError for the first cell, used or not, with a NUL or a byte that
    is not UTF-8 (read as a surrogate)."""
    for number, line, cells in rows:
        for name, cell in zip(header, cells):
            if "\x00" in cell or not _is_utf8(cell):
                try:
                    clean_text(cell)
                except ValueError as exc:
                    raise ImportFormatError(f"{at_row(path, number, line)}: column "
                                            f"'{show(name)}': {exc}") from None


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
