"""The documentation points at things that exist: every relative link of every Markdown
file of the repository (and its #anchor), and every repository path it cites in
backticks. No file cites a design document a clone does not have: the design is stated in
docs/ (docs/metrics.md, docs/experiments.md)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import REPO

# Not the repository's own files: tools, caches and the workflow's outputs.
SKIPPED_DIRS = {".git", ".venv", "venv", "results", "logs", ".snakemake", "__pycache__",
                ".pytest_cache", ".ruff_cache", ".hypothesis", ".ci-cache", "node_modules"}
# Backticked text starting with one of these is a path into the repository. Outputs
# (results/, logs/) are not: they exist only after a run.
REPO_DIRS = ("archbench/", "config/", "containers/", "data/", "docs/", "profiles/", "report/",
             "rules/", "scripts/", "tests/", ".ci/")
REPO_FILES = {"Snakefile", "Makefile", "README.md", "pyproject.toml"}
FORBIDDEN = "DESIGN" + ".md"  # spelled apart so this file does not cite it

FENCE = re.compile(r"^\s*(```|~~~)")
# a code span: backticks, text that ends no paragraph, the same backticks
CODE_SPAN = re.compile(r"(`+)((?:(?!\n[ \t]*\n)[\s\S])+?)\1")
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^[ \t]*\[[^\]]+\]:[ \t]*<?(\S+?)>?(?:[ \t].*)?$", re.MULTILINE)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)


def repository_files() -> list[Path]:
    """Every file of the working tree outside tools, caches and outputs."""
    found = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info"))
        found += [Path(root) / name for name in sorted(files)]
    return found


MARKDOWN = [p for p in repository_files() if p.suffix == ".md"]


def prose(text: str) -> str:
    """A Markdown text with its fenced code blocks blanked (lines kept, so offsets still
    give line numbers)."""
    out, fenced = [], None
    for line in text.split("\n"):
        fence = FENCE.match(line)
        if fence and (fenced is None or fence.group(1) == fenced):
            fenced = fence.group(1) if fenced is None else None
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def line_of(text: str, offset: int) -> int:
    """The line number of character ``offset`` of ``text``."""
    return text.count("\n", 0, offset) + 1


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (letters, digits,
    spaces, hyphens and underscores kept), spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of Markdown file ``path``: its headings' slugs (repeats numbered as
    GitHub numbers them) and explicit HTML anchors."""
    text = prose(path.read_text(encoding="utf-8"))
    found = set(HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for line in text.split("\n"):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line, target) of every inline and reference link outside code."""
    text = prose(text)
    # code spans blanked, newlines kept
    text = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    found = [(line_of(text, m.start()), m.group(1)) for m in INLINE_LINK.finditer(text)]
    found += [(line_of(text, m.start()), m.group(1)) for m in REFERENCE_LINK.finditer(text)]
    return sorted(found)


def broken_link(source: Path, target: str, root: Path = REPO) -> str:
    """Why link ``target`` of Markdown file ``source`` is broken, or "" when it is not."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, mailto:, ...
        return ""
    path_part, _, anchor = target.partition("#")
    path = (source.parent / unquote(path_part)).resolve() if path_part else source.resolve()
    root = root.resolve()
    if root not in (path, *path.parents):
        return f"{target}: points outside the repository"
    if not path.exists():
        return f"{target}: no such file"
    if anchor and path.suffix == ".md" and path.is_file() and unquote(anchor) not in anchors(path):
        return f"{target}: no heading or anchor '#{anchor}' in {path.relative_to(root)}"
    return ""


def expand_braces(text: str) -> list[str]:
    """``a/{b,c}.d`` as ``a/b.d`` and ``a/c.d`` (nested and repeated braces too)."""
    match = re.search(r"\{([^{}]*)\}", text)
    if not match:
        return [text]
    return [variant for choice in match.group(1).split(",")
            for variant in expand_braces(text[:match.start()] + choice + text[match.end():])]


def cited_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) of every repository path cited in backticks: each word of an inline
    code span that starts with a repository directory or names a top-level file."""
    text = prose(text)
    out = []
    for match in CODE_SPAN.finditer(text):
        for word in match.group(2).split():
            word = word.strip("\"'(),;:")
            if word.startswith(REPO_DIRS) or word in REPO_FILES:
                out.append((line_of(text, match.start()), word))
    return out


def missing_path(path: str, root: Path = REPO) -> str:
    """Why cited repository ``path`` matches nothing under ``root``, or "" when it matches.
    Placeholders (``<name>``), wildcards (``*``), ``...`` and braces (``{a,b}``) stand for
    any text."""
    for variant in expand_braces(path):
        pattern = re.sub(r"<[^<>]*>|\.\.\.|…", "*", variant.split("#")[0]).rstrip("/")
        if any(c in pattern for c in "*?["):
            if not any(root.glob(pattern)):
                return f"{path}: nothing matches {pattern}"
        elif not (root / pattern).exists():
            return f"{path}: no such file or directory"
    return ""


def test_the_repository_has_documentation_to_check():
    names = {p.relative_to(REPO).as_posix() for p in MARKDOWN}
    assert {"README.md", "docs/metrics.md", "docs/experiments.md"} <= names


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_reaches_a_file_and_anchor(page):
    problems = [f"line {n}: {why}" for n, target in links(page.read_text(encoding="utf-8"))
                if (why := broken_link(page, target))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_path_cited_in_backticks_exists(page):
    problems = [f"line {n}: {why}" for n, path in cited_paths(page.read_text(encoding="utf-8"))
                if (why := missing_path(path))]
    assert not problems, "\n".join(problems)


def test_no_file_cites_a_design_document_outside_the_repository():
    citing = [p.relative_to(REPO).as_posix() for p in repository_files()
              if FORBIDDEN.encode() in p.read_bytes()]
    assert not citing, f"{FORBIDDEN} is not in the repository; cite docs/ instead: {citing}"


# The checks themselves, on small cases.

def test_slugs_follow_github():
    assert slug("3. Inter/intra-op thread sweep") == "3-interintra-op-thread-sweep"
    assert slug("The GPU image (`x86_64-cuda`)") == "the-gpu-image-x86_64-cuda"
    assert slug("Files given with `--configfile`") == "files-given-with---configfile"


def test_a_missing_file_or_anchor_is_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## Some part\n\n## Some part\n")
    page = tmp_path / "README.md"
    page.write_text("x")
    for fine in ("docs/a.md#some-part", "docs/a.md#some-part-1", "docs/a.md", "docs/",
                 "https://example.org/x#y", "#"):
        assert broken_link(page, fine, tmp_path) == "", fine
    assert "no such file" in broken_link(page, "docs/b.md", tmp_path)
    assert "no heading" in broken_link(page, "docs/a.md#other", tmp_path)
    assert "outside" in broken_link(page, "../elsewhere.md", tmp_path)


def test_links_and_paths_in_code_are_told_apart():
    text = ("See [m](docs/m.md) and `archbench/x.py`, `results/raw/x.json`.\n"
            "```\n[not](a-link.md) `archbench/not-cited.py`\n```\n"
            "`python -m x config/systems/<name>.yaml` `[y](z.md)` and `a span\n"
            "over two lines, rules/x.smk` then [n](docs/n.md#part)\n\n[r]: other.md\n")
    assert links(text) == [(1, "docs/m.md"), (6, "docs/n.md#part"), (8, "other.md")]
    assert cited_paths(text) == [(1, "archbench/x.py"), (5, "config/systems/<name>.yaml"),
                                 (5, "rules/x.smk")]


def test_placeholders_and_braces_match_files(tmp_path):
    for name in ("config/systems/local.yaml", "archbench/schemas/a.schema.yaml",
                 "archbench/schemas/b.schema.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    for fine in ("config/systems/<name>.yaml", "archbench/schemas/{a,b}.schema.yaml",
                 "archbench/schemas/*.yaml", "config/systems/", "config/.../local.yaml"):
        assert missing_path(fine, tmp_path) == "", fine
    assert missing_path("config/no_such.yaml", tmp_path)
    assert missing_path("archbench/schemas/{a,c}.schema.yaml", tmp_path)
    assert missing_path("config/systems/<name>.json", tmp_path)
