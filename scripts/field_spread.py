"""How far one field's name spreads through the package, and how many tuples, lists and sets
in ``archbench/results/`` spell two or more identity fields by hand (the counts a field
registry keeps down).

    python scripts/field_spread.py precision framework    # modules naming each as a string
    python scripts/field_spread.py --tuples -v            # and list the identity literals
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

from archbench.core import fields

ROOT = Path(__file__).resolve().parent.parent
IDENTITY = {f.name for f in fields.FIELDS} | {"variant"}


def modules(tree_of: dict[Path, ast.AST], name: str) -> Counter:
    """Per module: the string literals equal to ``name``."""
    return Counter({path: n for path, tree in tree_of.items()
                    if (n := sum(isinstance(x, ast.Constant) and x.value == name for x in ast.walk(tree)))})


def identity_literals(tree_of: dict[Path, ast.AST]) -> list[tuple[Path, int, list[str]]]:
    """Tuples, lists and sets of ``archbench/results/`` naming two or more identity fields."""
    found = []
    for path, tree in tree_of.items():
        if "results" not in path.parts:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                names = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in IDENTITY]
                if len(names) >= 2:
                    found.append((path, node.lineno, names))
    return sorted(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="field names to follow")
    parser.add_argument("--tuples", action="store_true", help="count identity literals in results/")
    parser.add_argument("-v", "--verbose", action="store_true", help="list each module or literal")
    args = parser.parse_args()
    tree_of = {p.relative_to(ROOT): ast.parse(p.read_text()) for p in sorted((ROOT / "archbench").rglob("*.py"))}
    for name in args.names:
        counts = modules(tree_of, name)
        print(f"{name}: {len(counts)} modules, {sum(counts.values())} literals")
        if args.verbose:
            for path, n in sorted(counts.items()):
                print(f"  {n:3d} {path}")
    if args.tuples:
        found = identity_literals(tree_of)
        print(f"identity literals in results/: {len(found)} in {len({p for p, _, _ in found})} files")
        if args.verbose:
            for path, line, names in found:
                print(f"  {path}:{line} {', '.join(names)}")


if __name__ == "__main__":
    main()
