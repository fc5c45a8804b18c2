"""Another site's files are data (issue 53): text from a system file, a record or an import
never becomes markup, a table row, a formula or an echo of a secret.

Three tables of hostile cases, each asserting the exit code, the one line printed and that
nothing under ``results/`` changed:

- ``CHECK_CASES``: ``archbench check`` on system files whose free text breaks a line (refused,
  naming file and key) or holds markup (accepted: every writer escapes it), and on imports
  that are no CSV table at all (refused without a word of their content);
- ``COMPARE_CASES``: ``archbench compare`` of two record sets whose CPU models differ by a
  hostile string: the printed "What changed" row, the CSV cell and the LaTeX row;
- ``RENDER_CASES``: the platform table of a system and its runs holding hostile text, in
  Markdown, LaTeX and CSV.

The report itself (``report.html`` parsed for live elements) is built once, by
``tests/test_hostile_records.py``; every report caption is rendered here with docutils.
"""

from __future__ import annotations

import csv
import io
import types

import jinja2
import pandas as pd
import pytest
import yaml
from conftest import REPO, count_input
from test_compare import write_set
from test_hostile_inputs import no_slurm, run, snapshot, started

from archbench import cli
from archbench.core import escape
from archbench.results import artifacts
from archbench.results.tables.platforms import platform

TINY = yaml.safe_load((REPO / "tests" / "campaigns" / "tiny.yaml").read_text())
RECORD = ("results/raw/local/threads/rec.json", '{"status": "ok"}\n')
SYSTEM = {"arch": "x86_64", "sockets": 1, "cores_per_socket": 2}
CHECK = ("check", "c.yaml")
SECRET = "S3CRETxyz"
PLANNED = "c.yaml: 2 measurements"


def campaign(**top) -> str:
    return yaml.safe_dump({**TINY, **top})


def system_file(**fields) -> dict[str, str]:
    """The tiny campaign on system ``two``, a file of the workflow's config/systems/."""
    return {"c.yaml": campaign(systems=["two"]), "Snakefile": "",
            "config/systems/two.yaml": yaml.safe_dump({**SYSTEM, **fields}, allow_unicode=False)}


def inline(**fields) -> dict[str, str]:
    return {"c.yaml": campaign(systems=["two"], system_definitions={"two": {**SYSTEM, **fields}})}


def importing(name: str, text: str | bytes) -> dict[str, str | bytes]:
    return {"c.yaml": campaign(imports=[name]), name: text}


FILE = "archbench: invalid configuration: config/systems/two.yaml: "
PATTERN = "is not allowed here"
NOT_IMPORT = ("row 0 (header): not an import file: its first line names none of its columns "
              "(system, throughput, unit, model, ...; the file's content is not shown)")
NOT_CLAIMS = ("row 0 (header): not a claims file: its first line names none of its columns "
              "(metric, value, low, high, ...; the file's content is not shown)")
BREAKS = {"newline": "EDR\n| x | y |", "carriage-return": "EDR\r", "tab": "a\tb",
          "line-separator": "a\u2028b", "next-line": "a\x85b", "paragraph-separator": "a\u2029b"}
MARKUP = {"script-close": "</script><img src=x onerror=alert(1)>",
          "formula": '=HYPERLINK("http://evil","x")', "latex": r"\input{/etc/passwd} $x$ & 100%"}
SECRETS = {
    "shadow": f"root:$6${SECRET}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
    "group-with-commas": f"root:x:0:{SECRET}\nwheel:x:10:root,alice\n",
    "private-key": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}AAAA\n-----END OPENSSH PRIVATE KEY-----\n",
    "netrc": f"machine example.org login alice password {SECRET}\n",
    "json": f'{{"token": "{SECRET}", "user": "alice"}}\n',
    "yaml": f"password: {SECRET}\nuser: alice\n",
    "env-file": f"AWS_SECRET_ACCESS_KEY={SECRET}\nAWS_REGION=eu\n",
    "quoted-multiline": f'"{SECRET}\nmore",x\n1,2\n',
    "nul-byte": f"{SECRET}\x00\x01,x\n1,2\n".encode(),
    "not-utf8": b"\xff\xfe" + SECRET.encode() + b",x\n1,2\n",
    "header-of-other-names": f"user,password\nalice,{SECRET}\n",
    "control-character": f"\x1b[31m{SECRET},x\n1,2\n",
}

# id, files (name -> text), command, exit code, the line (err: starts with; out: equals)
CHECK_CASES = [
    *[(f"system-file-{field}-{kind}", system_file(**{field: value}), CHECK, 1,
       f"{FILE}{field}: {value!r} {PATTERN}")
      for field in ("description", "gpu_model", "interconnect") for kind, value in BREAKS.items()
      if kind != "carriage-return"],
    *[(f"system-file-{field}-carriage-return", system_file(**{field: "EDR\r"}), CHECK, 1,
       f"{FILE}{field}: 'EDR\\r' holds a control character")
      for field in ("description", "gpu_model", "interconnect")],
    *[(f"system-file-{field}-201-characters", system_file(**{field: "x" * 201}), CHECK, 1,
       f"{FILE}{field}: '{'x' * 201}' is too long")
      for field in ("description", "gpu_model", "interconnect")],
    ("system-file-cpu-model-newline", system_file(cpu_model="Xeon\n| x |"), CHECK, 1,
     f"{FILE}cpu_model: 'Xeon\\n| x |' {PATTERN}"),
    *[(f"inline-system-{field}-newline", inline(**{field: "EDR\n| x |"}), CHECK, 1,
       f"archbench: invalid configuration: c.yaml: system_definitions.two.{field}: "
       f"'EDR\\n| x |' {PATTERN}") for field in ("description", "gpu_model", "interconnect")],
    *[(f"system-file-{field}-{kind}", system_file(**{field: value}), CHECK, 0, PLANNED)
      for field in ("description", "gpu_model", "interconnect") for kind, value in MARKUP.items()],
    *[(f"import-{kind}", importing("s.csv", text), CHECK, 1,
       f"archbench: invalid configuration: c.yaml: imports.0: s.csv: {NOT_IMPORT}")
      for kind, text in SECRETS.items()],
    *[(f"claims-{kind}", importing("x-claims.csv", SECRETS[kind]), CHECK, 1,
       f"archbench: invalid configuration: c.yaml: imports.0: x-claims.csv: {NOT_CLAIMS}")
      for kind in ("shadow", "group-with-commas", "private-key", "json", "env-file")],
    ("import-a-table-with-one-unknown-column", importing(
        "t.csv", "system,model,throughput,unit,colour\nlocal,small_cnn,40,img/s,red\n"), CHECK, 1,
     "archbench: invalid configuration: c.yaml: imports.0: t.csv: row 0 (header): column "
     "'colour': unknown column"),
    ("import-a-table", importing("t.csv", "system,model,throughput,unit\nlocal,small_cnn,40,img/s\n"),
     CHECK, 0, "c.yaml: 4 measurements"),
]


@pytest.mark.parametrize("files, argv, code, line", [c[1:] for c in CHECK_CASES],
                         ids=[c[0] for c in CHECK_CASES])
def test_another_sites_file_is_checked_in_one_line(tmp_path, monkeypatch, files, argv, code, line):
    monkeypatch.chdir(tmp_path)
    no_slurm(tmp_path / "bin", monkeypatch)
    monkeypatch.setattr(cli.os, "execve", started)
    for name, text in {RECORD[0]: RECORD[1], **files}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    raw = snapshot(tmp_path / "results")
    got, out, err = run(argv)
    assert got == code, (out, err)
    assert SECRET not in out + err  # a refused import never echoes its content
    if code:
        assert err.startswith(line) and err.count("\n") == 1 and "Traceback" not in err, err
        assert out == ""
        count_input("issue 53 (another site's files)", "rejected")
    else:
        assert out.strip() == line and err == "", (out, err)
        count_input("issue 53 (another site's files)", "accepted")
    assert snapshot(tmp_path / "results") == raw


# --------------------------------------------------------------------- compare
# a CPU model -> its "What changed" Markdown cell, its CSV cell, its LaTeX cell
COMPARE_CASES = [
    ("script", "<script>alert(1)</script>", "&lt;script>alert(1)&lt;/script>",
     "<script>alert(1)</script>", "<script>alert(1)</script>"),
    ("script-close-img", "</script><img src=x onerror=alert(1)>",
     "&lt;/script>&lt;img src=x onerror=alert(1)>", "</script><img src=x onerror=alert(1)>",
     "</script><img src=x onerror=alert(1)>"),
    ("hyperlink", '=HYPERLINK("http://evil","x")', '=HYPERLINK("http://evil","x")',
     '\'=HYPERLINK("http://evil","x")', '=HYPERLINK("http://evil","x")'),
    ("plus-dde", "+cmd|' /C calc'!A0", "+cmd\\|' /C calc'!A0", "'+cmd|' /C calc'!A0",
     "+cmd|' /C calc'!A0"),
    ("minus-dde", "-2+3+cmd|' /C calc'!A0", "-2+3+cmd\\|' /C calc'!A0",
     "'-2+3+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0"),
    ("at-sum", "@SUM(1+1)*cmd", "@SUM(1+1)*cmd", "'@SUM(1+1)*cmd", "@SUM(1+1)*cmd"),
    ("tab-start", "\t=1+1", "=1+1", "'=1+1", "=1+1"),  # the comparison strips the tab
    ("newline-rows", "Xeon\n| a | b |\n| c | d |", "Xeon\\n\\| a \\| b \\|\\n\\| c \\| d \\|",
     "Xeon\n| a | b |\n| c | d |", "Xeon\\textbackslash{}n| a | b |\\textbackslash{}n| c | d |"),
    ("escaped-pipe", "a\\|b", "a\\\\\\|b", "a\\|b", "a\\textbackslash{}|b"),
    ("entity", "&lt;script&gt;", "&amp;lt;script&amp;gt;", "&lt;script&gt;", "\\&lt;script\\&gt;"),
    ("latex-input", "\\input{/etc/passwd}", "\\input{/etc/passwd}", "\\input{/etc/passwd}",
     "\\textbackslash{}input\\{/etc/passwd\\}"),
    ("latex-math", "$\\write18{rm}$ 100% #1 ~x^2_y", "$\\write18{rm}$ 100% #1 ~x^2_y",
     "$\\write18{rm}$ 100% #1 ~x^2_y",
     "\\$\\textbackslash{}write18\\{rm\\}\\$ 100\\% \\#1 \\textasciitilde{}x\\textasciicircum{}2\\_y"),
    ("negative-number-text", "-12.5", "-12.5", "-12.5", "-12.5"),
    ("unicode-separator", "Xeon\u2028| x |", "Xeon\\u2028\\| x \\|", "Xeon\u2028| x |",
     "Xeon\\textbackslash{}u2028| x |"),
]


@pytest.mark.parametrize("value, md, cell, tex", [c[1:] for c in COMPARE_CASES],
                         ids=[c[0] for c in COMPARE_CASES])
def test_compare_writes_another_sites_cpu_model_as_text(tmp_path, value, md, cell, tex):
    base = write_set(tmp_path / "a" / "results", {(1, 8): [100.0, 101.0, 99.0]})
    new = write_set(tmp_path / "b" / "results", {(1, 8): [100.0, 101.0, 99.0]}, cpu_model=value)
    raw = {side: snapshot(side) for side in (base, new)}
    code, out, err = run(("compare", str(base), str(new), "--output", str(tmp_path / "out")))
    assert code == 0 and err == "", err
    row = [line for line in out.splitlines() if line.startswith("| cpu_model |")]
    assert row == [f"| cpu_model | CPU model | yes | 1 of 1 | Xeon | {md} |"]
    assert "<script" not in out and "<img" not in out
    changes = list(csv.DictReader(io.StringIO((tmp_path / "out/changes.csv").read_text(), newline="")))
    assert [r["new"] for r in changes if r["field"] == "cpu_model"] == [cell]
    lines = (tmp_path / "out/changes.tex").read_text().splitlines()
    assert f"cpu\\_model & CPU model & yes & 1 of 1 & Xeon & {tex} \\\\" in lines
    markdown = (tmp_path / "out/changes.md").read_text().splitlines()
    assert len(markdown) == 2 + len(changes)  # header, rule, one line per row
    assert {side: snapshot(side) for side in (base, new)} == raw
    count_input("issue 53 (another site's files)", "accepted")


# ---------------------------------------------------------------- platform table
# field, value -> the Markdown cell, the LaTeX cell, the CSV cell
RENDER_CASES = [
    ("description", "</script><img src=x onerror=alert(1)>",
     "&lt;/script>&lt;img src=x onerror=alert(1)>", "</script><img src=x onerror=alert(1)>",
     "</script><img src=x onerror=alert(1)>"),
    ("gpu_model", "<svg onload=alert(1)>", "&lt;svg onload=alert(1)>", "<svg onload=alert(1)>",
     "<svg onload=alert(1)>"),
    ("interconnect", "EDR | fake | row", "EDR \\| fake \\| row", "EDR | fake | row",
     "EDR | fake | row"),
    ("interconnect", '=HYPERLINK("x")', '=HYPERLINK("x")', '=HYPERLINK("x")', '\'=HYPERLINK("x")'),
    ("description", "@cmd", "@cmd", "@cmd", "'@cmd"),
    ("description", "R&D & more", "R&D & more", "R\\&D \\& more", "R&D & more"),
    ("gpu_model", "&#x3C;script", "&amp;#x3C;script", "\\&\\#x3C;script", "&#x3C;script"),
    ("gpu_model", "50% of {V100}", "50% of {V100}", "50\\% of \\{V100\\}", "50% of {V100}"),
    ("recorded_cpu_model", "Xeon\n| 1 | 2 |", "Xeon\\n\\| 1 \\| 2 \\|",
     "Xeon\\textbackslash{}n| 1 | 2 |", "Xeon\n| 1 | 2 |"),
    ("recorded_cpu_model", "-1+1", "-1+1", "-1+1", "'-1+1"),
    ("recorded_cpu_model", "+44", "+44", "+44", "+44"),
    ("recorded_cpu_model", "Xeon\x1b[2J", "Xeon\\x1b[2J", "Xeon\\textbackslash{}x1b[2J", "Xeon\x1b[2J"),
]


def cells(row: str) -> list[str]:
    """The cells of a Markdown table row as GitHub splits it: at each ``|`` no backslash
    escapes (a backslash escapes the character after it)."""
    found, cell, chars = [], "", iter(row.strip()[1:-1])
    for char in chars:
        if char == "\\":
            cell += char + next(chars, "")
        elif char == "|":
            found, cell = [*found, cell.strip()], ""
        else:
            cell += char
    return [*found, cell.strip()]


@pytest.mark.parametrize("field, value, md, tex, cell", RENDER_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(RENDER_CASES)])
def test_the_platform_table_writes_another_sites_text_as_text(field, value, md, tex, cell):
    system = {"name": "two", **SYSTEM, "launcher": "local"}
    runs = pd.DataFrame([{"system": "two", "status": "ok", "experiment": "e", "arch": "x86_64",
                          "cpu_model": "Xeon"}])
    if field == "recorded_cpu_model":
        runs["cpu_model"] = value
    else:
        system[field] = value
    table = platform(runs, systems={"two": system})
    shown = artifacts.display_frame(table)
    column = list(shown.columns).index(artifacts.header(field))
    markdown = artifacts.to_markdown(table).splitlines()
    assert len(markdown) == 3  # header, rule, the one system: no row injected
    assert len(cells(markdown[2])) == len(shown.columns) and cells(markdown[2])[column] == md
    latex = artifacts.to_latex(table).splitlines()
    assert len(latex) == 7 and latex[4].split(" & ")[column] == tex
    rows = list(csv.DictReader(io.StringIO(artifacts.to_csv(table), newline="")))
    assert len(rows) == 1 and rows[0][field] == cell
    count_input("issue 53 (another site's files)", "accepted")


def test_numbers_are_never_neutralised():
    table = pd.DataFrame({"ratio": [-1.5, 2.0], "text": ["-3", "-x"], "n": [-2, 3]})
    assert artifacts.to_csv(table) == "ratio,text,n\n-1.5,-3,-2\n2,'-x,3\n"


def test_a_report_safe_parameter_is_the_value_for_the_job():
    systems = {"two": {"description": "</script><img src=x onerror=alert(1)>"}}
    safe = escape.report_safe(systems)
    assert safe == systems and safe["two"]["description"] == systems["two"]["description"]
    assert str(safe) == repr(safe) == ("{'two': {'description': '&lt;/script&gt;&lt;img src=x "
                                       "onerror=alert(1)&gt;'}}")
    assert str(escape.report_safe(["a/<b>"])) == "['a/&lt;b&gt;']"


# ------------------------------------------------------------------ report captions
def captions() -> dict[str, str]:
    """Every caption the report renders: the caption file with the rule's caption
    parameter, as Snakemake fills it in (Jinja), by the output it describes."""
    from archbench.results.comparison import caption
    from archbench.results.figures import FIGURES
    from archbench.results.tables import TABLES
    folder = REPO / "report" / "captions"

    def filled(name: str, text: str = "") -> str:
        params = types.SimpleNamespace(caption=text)
        snakemake = types.SimpleNamespace(params=params, config={"campaign": "tiny"})
        return jinja2.Template((folder / name).read_text()).render(snakemake=snakemake)
    found = {f"tables/{name}": filled("table.rst", spec.caption) for name, spec in TABLES.items()}
    found.update({f"figures/{name}": filled("figure.rst", spec.caption) for name, spec in FIGURES.items()})
    found["compare"] = filled("compare.rst", caption("median", 0.05, ["vendor_library_enabled"]))
    found["excluded"] = filled("excluded.rst")
    workflow = (REPO / "report" / "workflow.rst").read_text()
    found["workflow"] = jinja2.Template(workflow).render(snakemake=types.SimpleNamespace(
        config={"campaign": "tiny"}))
    return found


def test_every_report_caption_builds_without_a_docutils_message():
    from docutils.core import publish_parts
    problems = {}
    for name, text in captions().items():
        stream = io.StringIO()
        publish_parts(text, writer="html", settings_overrides={
            "warning_stream": stream, "report_level": 1, "halt_level": 5})
        if stream.getvalue():
            problems[name] = stream.getvalue().strip()
    assert len(captions()) > 40 and problems == {}
