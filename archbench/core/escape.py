"""Text archbench did not write is data: every writer escapes it here for its format, so a
system file's description, a record's CPU model or an imported cell never becomes markup,
a table row, a spreadsheet formula or a script.

- :func:`one_line`: control characters and line breaks written visibly (``\\n``), the
  first step of every format below;
- :func:`markdown_cell`: a pipe-table cell (``|`` and a backslash before it escaped, ``<``
  as an entity, so no tag opens, and ``&`` where it would start an entity);
- :func:`latex`: LaTeX's special characters as commands;
- :func:`csv_cell`: a spreadsheet formula neutralised as OWASP recommends (a text cell
  starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return gets a leading ``'``;
  numbers, and text that reads as a plain number, are left alone);
- :func:`html`: text in HTML;
- :class:`ReportSafe`: a value of a rule's ``params``, unchanged for the job, whose text
  in Snakemake's report (a ``<script>`` block of JSON there) holds no ``<``, ``>`` or ``&``.

Benign text (printable, no markup characters) comes out of each as it went in.
"""

from __future__ import annotations

import html as _html
import re
from typing import Any

# C0 and C1 controls (tab and newline included), DEL, and Unicode's line and paragraph
# separators: what could end a line or a row in some reader
LINE_BREAKING = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
ENTITY_START = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
        "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}"}


def one_line(text: str) -> str:
    """``text`` with every control character and line break written as its escape
    (``\\n``, ``\\x1b``, ``\\u2028``)."""
    return LINE_BREAKING.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def markdown_cell(text: str) -> str:
    """``text`` as one cell of a GitHub pipe table: one line, no column break, no HTML."""
    text = re.sub(r"\\(?=\|)", r"\\\\", one_line(text))
    text = ENTITY_START.sub("&amp;", text)
    return text.replace("|", "\\|").replace("<", "&lt;")


def latex(text: str) -> str:
    """``text`` in LaTeX: one line, each special character as its command."""
    return "".join(_TEX.get(ch, ch) for ch in one_line(text))


def csv_cell(value: Any) -> Any:
    """``value`` for a CSV a spreadsheet may open: text starting like a formula gets a
    leading ``'`` (OWASP's CSV injection advice); anything else is returned as it is."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def html(text: str) -> str:
    """``text`` in HTML (quotes escaped too: safe in an attribute)."""
    return _html.escape(text, quote=True)


def _script_safe(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class ReportSafe(dict):
    """A mapping for a rule's ``params``: the job gets its values unchanged, while its text
    (``str``/``repr``, what Snakemake writes into its report's ``<script>`` block and its
    parameter record) has ``&``, ``<`` and ``>`` escaped, so no value closes that block."""

    def __repr__(self) -> str:
        return _script_safe(dict.__repr__(self))

    __str__ = __repr__


class ReportSafeList(list):
    """A list for a rule's ``params``, its text escaped as :class:`ReportSafe`'s."""

    def __repr__(self) -> str:
        return _script_safe(list.__repr__(self))

    __str__ = __repr__


def report_safe(value: dict | list | tuple) -> ReportSafe | ReportSafeList:
    """``value`` (a mapping or a sequence) as :class:`ReportSafe` or :class:`ReportSafeList`."""
    return ReportSafe(value) if isinstance(value, dict) else ReportSafeList(value)
