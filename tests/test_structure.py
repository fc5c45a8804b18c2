"""The package's structure: no import circle (counting imports inside functions too, so a
circle cannot hide behind a lazy import), and every module importable on its own."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

PACKAGE = REPO / "archbench"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path, name: str) -> set[str]:
    """archbench modules ``path`` imports anywhere in it (``from a import b``: a.b when b
    is a module, else a; relative imports resolved)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}".rstrip(".")
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                      for a in node.names}
    return {m for m in found if m in MODULES and m != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a list of modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_circle_in_the_package():
    graph = {name: imports_of(path, name) for name, path in MODULES.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


LIGHT = [m for m in MODULES if not m.endswith("__main__")]


@pytest.mark.parametrize("chunk", [LIGHT[i::2] for i in range(2)], ids=["even", "odd"])
def test_every_module_imports_first_in_a_fresh_interpreter(chunk):
    """Each module imported first, alone, in a new interpreter (an import that works only
    after some other module was imported first fails here)."""
    script = ("import importlib, subprocess, sys\n"
              "bad = []\n"
              "for m in sys.argv[1:]:\n"
              "    r = subprocess.run([sys.executable, '-c', f'import {m}'], capture_output=True, text=True)\n"
              "    if r.returncode: bad.append(f'{m}: ' + r.stderr.strip().splitlines()[-1])\n"
              "print('\\n'.join(bad)); sys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", script, *chunk], capture_output=True, text=True,
                          cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# The layers, bottom up: a module imports only its own layer and those below it (counting
# imports inside functions); execute and results stand side by side on plan, and the
# supervisor reads no analysis. The modules at the top are the command lines' faces, and
# the workflow's package (what rules/*.smk call), which stands above every layer as they do.
LAYERS = ("core", "workloads", "plan", ("execute", "results"))
TOP_PACKAGES = ("workflow",)
TOP_LEVEL_LIMIT = 12


def layer_of(module: str) -> int | None:
    """The rank of ``module``'s layer (execute and results share one), None at the top."""
    if "." not in module:  # the package's __init__ stands above the layers, as cli does
        return None
    part = module.split(".")[1]
    for rank, layer in enumerate(LAYERS):
        if part == layer or part in layer:
            return rank
    return None


def layer_violations() -> list[str]:
    """Every import that climbs a layer or crosses between execute and results."""
    found = []
    for name, path in MODULES.items():
        rank = layer_of(name)
        if rank is None:
            continue
        for target in imports_of(path, name):
            target_rank = layer_of(target)
            crosses = target_rank == rank and target.split(".")[1] != name.split(".")[1]
            if target_rank is None or target_rank > rank or crosses:
                found.append(f"{name} -> {target}")
    return sorted(found)


def test_each_layer_imports_only_the_layers_below_it():
    assert layer_violations() == []


def test_the_layer_check_sees_a_climbing_import(monkeypatch):
    monkeypatch.setitem(MODULES, "archbench.core.fake", PACKAGE / "execute" / "supervisor.py")
    assert any(v.startswith("archbench.core.fake -> ") for v in layer_violations())


def test_the_supervisor_reads_no_analysis():
    supervisor = "archbench.execute.supervisor"
    seen, todo = set(), [supervisor]
    while todo:  # everything it imports, directly or not
        for target in imports_of(MODULES[todo.pop()], "") - seen:
            seen.add(target)
            todo.append(target)
    assert not [m for m in seen if m.startswith("archbench.results")]


def test_few_modules_stay_at_the_top_of_the_package():
    """Beside the layers' packages, only the command lines' faces (and what sits above
    every layer: the campaign's whole input check, the ``archbench`` command)."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_LIMIT, top
    assert {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} == set(
        layer for rank in LAYERS for layer in ((rank,) if isinstance(rank, str) else rank)) | set(TOP_PACKAGES)
