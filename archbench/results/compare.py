"""``archbench compare BASE [NEW]`` (also ``python -m archbench.results.compare``): which
configurations got faster or slower between two record sets beyond run-to-run noise, and
what changed in between (docs/compare.md; the comparison is
:mod:`archbench.results.comparison`).

    archbench compare old/results new/results                  # two results folders
    archbench compare results --base-filter vendor_library_enabled=on \
                              --new-filter vendor_library_enabled=off   # one folder, two sides
    archbench compare a/results b/results --fail-below 0.95 --output results/compare

Exit status: 0; 1 when ``--fail-below R`` finds a significant slowdown with ratio below R
(the configurations named on stderr); 2 when the comparison cannot be made.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

FILES = ("comparison.csv", "comparison.md", "comparison.tex", "changes.csv", "changes.md",
         "changes.tex", "comparison.png", "comparison.pdf", "comparison.svg", "report.md")


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The command's arguments, on ``p`` (its own parser, or ``archbench compare``'s)."""
    p.add_argument("base", help="the baseline: a results folder holding raw/ (or a measurements CSV)")
    p.add_argument("new", nargs="?", help="the new results (default: BASE again, chosen by --new-filter)")
    p.add_argument("--base-filter", action="append", default=[], metavar="KEY=VALUE",
                   help="keep the base records whose KEY (a record field or tidy-table column) "
                        "is VALUE (also !=, >=, <; git_commit and image_sha256 match a prefix); repeatable")
    p.add_argument("--new-filter", action="append", default=[], metavar="KEY=VALUE",
                   help="the same for the new records")
    p.add_argument("--across", action="append", default=[], metavar="FIELD",
                   help="an identity field compared across (matched without it, e.g. "
                        "vendor_library_enabled or system); implied where both filters pin one "
                        "to different values; repeatable")
    p.add_argument("--statistic", choices=("mean", "median"), default="mean",
                   help="the ratio's statistic of the repetitions (default mean)")
    p.add_argument("--threshold", type=float, default=None, metavar="T",
                   help="practical band: a change within 1/(1+T)..1+T is no change (default 0.02)")
    p.add_argument("--fail-below", type=float, default=None, metavar="R",
                   help="exit 1 when a significant slowdown has ratio new/base below R")
    p.add_argument("--output", metavar="DIR",
                   help="write the tables (CSV, Markdown, LaTeX), the figure (PNG, PDF, SVG) "
                        "and report.md there")
    return p


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m archbench.results.compare``."""
    return add_arguments(argparse.ArgumentParser(
        prog="python -m archbench.results.compare", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter))


def report(comparison, title: str, figure: str | None = None) -> str:
    """The comparison as one Markdown page: counts, method, changes, the table."""
    from archbench.results.artifacts import to_markdown
    counts = ", ".join(f"{n} {verdict}" for verdict, n in comparison.counts().items())
    parts = [f"# {title}", "", f"{len(comparison.table)} configurations: {counts}.", "",
             comparison.caption(), ""]
    if figure:
        parts += [f"![ratio new / base per configuration]({figure})", ""]
    parts += ["## What changed", "", to_markdown(comparison.changes),
              "## Configurations", "", to_markdown(comparison.table)]
    return "\n".join(parts)


def write_files(comparison, directory: str | os.PathLike, title: str) -> list[Path]:
    """Write ``FILES`` of ``comparison`` into ``directory`` (byte-identical every time)."""
    from archbench.core.files import atomic_write_text
    from archbench.results.artifacts import save_figure, write_table
    from archbench.results.figures.compare import comparison_figure
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in FILES]
    write_table(comparison.table, csv=paths[0], md=paths[1], tex=paths[2])
    write_table(comparison.changes, csv=paths[3], md=paths[4], tex=paths[5])
    across = f" (across {', '.join(comparison.across)})" if comparison.across else ""
    save_figure(comparison_figure(comparison.table, comparison.threshold, title=title + across),
                paths[6:9])
    atomic_write_text(paths[9], report(comparison, title, figure="comparison.png"))
    return paths


def failing(comparison, below: float) -> list[str]:
    """Lines naming each significant slowdown with ratio below ``below``."""
    rows = comparison.regressions(below)
    return [f"{r.system}/{r.experiment}/{r.config_id}: ratio {r.ratio:.3f} "
            f"[{r.ci95_low:.3f}, {r.ci95_high:.3f}]" for r in rows.itertuples()]


def compare_sources(base: str | os.PathLike, new: str | os.PathLike, *, base_filter: Sequence[str] = (),
                    new_filter: Sequence[str] = (), across: Sequence[str] = (),
                    statistic: str = "mean", threshold: float | None = None):
    """The :class:`~archbench.results.comparison.Comparison` of two results folders (or
    tables), each side's records kept by its filters (``KEY=VALUE`` texts), and each side's
    lines naming the records left out as invalid."""
    from archbench.results.comparison import compare
    from archbench.results.record_sets import DEFAULT_THRESHOLD, implied_across, parse_filter, read_side
    filters = [[parse_filter(f) for f in fs] for fs in (base_filter, new_filter)]
    sides = [read_side(source, fs) for source, fs in zip((base, new), filters)]
    comparison = compare(sides[0][0], sides[1][0], statistic=statistic,
                         threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
                         across=[*across, *implied_across(*filters)])
    return comparison, {"base": sides[0], "new": sides[1]}


def run(args: argparse.Namespace) -> int:
    """Compare, print the report, write the files, and say whether to fail."""
    from archbench.results.record_sets import CompareError
    new = args.new or args.base
    try:
        if args.new is None and not (args.base_filter or args.new_filter):
            raise CompareError("one results folder: choose the two sides with --base-filter/--new-filter")
        comparison, sides = compare_sources(
            args.base, new, base_filter=args.base_filter, new_filter=args.new_filter,
            across=args.across, statistic=args.statistic, threshold=args.threshold)
    except (CompareError, ValueError) as exc:  # RecordError, DuplicateRunError too
        print(f"archbench compare: {exc}", file=sys.stderr)
        return 2
    for name, (frame, errors) in sides.items():
        for line in errors:
            print(f"archbench compare: {name}: excluded invalid record: {line}", file=sys.stderr)
        if frame.empty:
            print(f"archbench compare: {name}: no records", file=sys.stderr)
    title = " -> ".join(" ".join([str(source), *filters]) for source, filters in
                        ((args.base, args.base_filter), (new, args.new_filter)))
    print(report(comparison, title))
    if args.output:
        write_files(comparison, args.output, title)
    if args.fail_below is not None:
        bad = failing(comparison, args.fail_below)
        if bad:
            print(f"archbench compare: {len(bad)} significant slowdown(s) below ratio "
                  f"{args.fail_below:g}:", *bad, sep="\n  ", file=sys.stderr)
            return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    return run(parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
