"""``archbench compare BASE [NEW]`` (also ``python -m archbench.results.compare_cli``): which
configurations got faster or slower between two record sets beyond run-to-run noise, and
what changed in between (docs/compare.md; the comparison is
:mod:`archbench.results.comparison`).

    archbench compare old/results new/results                  # two results folders
    archbench compare results --base-filter vendor_library_enabled=on \
                              --new-filter vendor_library_enabled=off   # one folder, two sides
    archbench compare a/results b/results --fail-below 0.95 --output results/compare

Exit status: 0; 1 when ``--fail-below R`` finds a significant slowdown with ratio below R
(the configurations named on stderr); 2 when the comparison cannot be made (a side without
records, no configuration in common, a file that is not a measurements table, a bad
argument) or, with ``--fail-below``, when a configuration could not be compared and
``--allow-incomparable`` was not given. Each refusal is one line on stderr.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from archbench.core.metrics import DEFAULT_STATISTIC, STATISTIC_OF
from pathlib import Path
from typing import NoReturn, Sequence

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
    p.add_argument("--statistic", choices=tuple(STATISTIC_OF), default=DEFAULT_STATISTIC,
                   help="the ratio's statistic of the repetitions (default mean)")
    p.add_argument("--threshold", default=None, metavar="T",
                   help="practical band: a change within 1/(1+T)..1+T is no change (default 0.02)")
    p.add_argument("--fail-below", default=None, metavar="R",
                   help="exit 1 when a significant slowdown has ratio new/base below R (a number "
                        "above 0); exit 2 when a configuration could not be compared")
    p.add_argument("--allow-incomparable", action="store_true",
                   help="with --fail-below: configurations that could not be compared (too few "
                        "runs, one side only, units differ) do not fail the gate")
    p.add_argument("--output", metavar="DIR",
                   help="write the tables (CSV, Markdown, LaTeX), the figure (PNG, PDF, SVG) "
                        "and report.md there")
    return p


PROG = "python -m archbench.results.compare_cli"


class UsageError(ValueError):
    """A command line the parser refuses (an unknown option, a bad choice, no BASE)."""


class Parser(argparse.ArgumentParser):
    """The command's parser: a usage error raises :class:`UsageError` (:func:`main` says it
    in one line, exit 2, as every other refusal) instead of printing argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parser(prog: str = PROG) -> Parser:
    """The command line of ``prog`` (``python -m archbench.results.compare_cli`` or ``archbench compare``)."""
    return add_arguments(Parser(prog=prog, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter))


def report(comparison, title: str, figure: str | None = None) -> str:
    """The comparison as one Markdown page: counts, method, changes, the table."""
    from archbench.core.escape import markdown_cell
    from archbench.results.artifacts import to_markdown
    counts = ", ".join(f"{n} {verdict}" for verdict, n in comparison.counts().items())
    parts = [f"# {markdown_cell(title)}", "", f"{len(comparison.table)} configurations: {counts}.", "",
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


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def ratio_limit(text: str | None) -> float | None:
    """``--fail-below``'s ratio: a number in (0, inf), or None when not given."""
    from archbench.results.record_sets import CompareError
    if text is None:
        return None
    value = _number(text)
    if not (0 < value < math.inf):
        raise CompareError(f"--fail-below {text}: not a ratio (a number above 0, e.g. 0.95)")
    return value


def band(text: str | None) -> float | None:
    """``--threshold``: a finite number >= 0, or None when not given (the default band)."""
    from archbench.results.record_sets import CompareError
    if text is None:
        return None
    value = _number(text)
    if not (0 <= value < math.inf):
        raise CompareError(f"--threshold {text}: not a number >= 0 (e.g. 0.02 for +/-2%)")
    return value


def check_output(directory: str | os.PathLike, sources: Sequence[str | os.PathLike] = ()) -> None:
    """Refuse an ``--output`` that is a file, a folder holding anything but an earlier
    comparison's ``FILES`` (rewritten), or a folder inside the ``raw/`` of a side's
    ``sources``: never mix the tables with other files, nor with records."""
    from archbench.results.record_sets import CompareError, raw_folder
    path = Path(directory)
    for source in sources:
        raw = raw_folder(source)
        if raw is not None and path.resolve().is_relative_to(raw.resolve()):
            raise CompareError(f"--output {directory}: inside the records of {source}")
    if path.exists() and not path.is_dir():
        raise CompareError(f"--output {directory}: an existing file, not a folder")
    if path.is_dir():
        others = sorted(p.name for p in path.iterdir() if p.name not in FILES)
        if others:
            raise CompareError(f"--output {directory}: a folder holding other files "
                               f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}); "
                               "name a new or empty folder")


def incomparable(comparison) -> list[str]:
    """The configurations ``comparison`` could not compare, each with its reason."""
    rows = comparison.table[comparison.table["verdict"] == "not comparable"]
    return [f"{r.system}/{r.experiment}/{r.config_id} ({r.reason})" for r in rows.itertuples()]


def failing(comparison, below: float) -> list[str]:
    """Lines naming each significant slowdown with ratio below ``below``."""
    rows = comparison.regressions(below)
    return [f"{r.system}/{r.experiment}/{r.config_id}: ratio {r.ratio:.3f} "
            f"[{r.ci95_low:.3f}, {r.ci95_high:.3f}]" for r in rows.itertuples()]


# a measurements table's row names its configuration by these (a CSV without them is
# some other table: normalising it would invent a configuration with an empty identity)
TABLE_IDENTITY = ("experiment", "system", "config_id")


def side_name(name: str, source: str | os.PathLike, filters: Sequence[str] = ()) -> str:
    """How a refusal names a side: "base (old/results)", its filters included."""
    return f"{name} ({' '.join([str(source), *filters])})"


def read_checked(name: str, source: str | os.PathLike, filters: Sequence):
    """:func:`~archbench.results.record_sets.read_side`, refusing (CompareError, one line
    naming the side and its file) a file that cannot be read as a measurements table and a
    side left without records."""
    from archbench.results.record_sets import CompareError, implausible_row, is_table, read_side
    shown = side_name(name, source, [str(f) for f in filters])
    try:
        frame, errors = read_side(source)  # filtered below, once a table's rows are checked
    except (ValueError, OSError) as exc:  # pandas' parser, a bad value, RecordError...
        what = "not a readable measurements table: " if is_table(source) else ""
        text = " ".join(str(exc).split()).removeprefix(f"{source}: ") or type(exc).__name__
        raise CompareError(f"{shown}: {what}{text}") from exc
    if is_table(source):  # records were checked when written; a table's rows were not
        for column in TABLE_IDENTITY:
            empty = frame[column].isna() if column in frame else None
            if empty is not None and empty.any():
                raise CompareError(f"{shown}: not a measurements table: no {column} on line "
                                   f"{int(empty.to_numpy().argmax()) + 2} (a tidy table names "
                                   f"each run's {', '.join(TABLE_IDENTITY)})")
        value = frame["throughput"]
        wrong = value.notna() & ~(value.gt(0) & value.lt(math.inf))
        if wrong.any():
            row = int(wrong.to_numpy().argmax())
            raise CompareError(f"{shown}: line {row + 2}: throughput {value.iloc[row]} is not a "
                               "positive finite number")
        if nonsense := implausible_row(frame):
            raise CompareError(f"{shown}: {nonsense}")
    try:
        for condition in filters:
            frame = frame[condition.mask(frame)].reset_index(drop=True)
    except CompareError as exc:
        raise CompareError(f"{shown}: {exc}") from exc
    if frame.empty:
        invalid = f" ({len(errors)} invalid, the first: {errors[0]})" if errors else ""
        raise CompareError(f"{shown}: no records{invalid}")
    return frame, errors


def check_baseline(source: str | os.PathLike) -> None:
    """A campaign's ``compare_with`` baseline, checked before any job (CompareError, one
    line): a table must be a readable measurements table with rows, a results folder must
    hold record files (their contents are read by the comparison itself)."""
    from archbench.results.record_sets import CompareError, is_table, record_paths
    if is_table(source):
        read_checked("base", source, [])
    elif not record_paths(source):
        raise CompareError(f"{side_name('base', source)}: no records")


def compare_sources(base: str | os.PathLike, new: str | os.PathLike, *, base_filter: Sequence[str] = (),
                    new_filter: Sequence[str] = (), across: Sequence[str] = (),
                    statistic: str = DEFAULT_STATISTIC, threshold: float | None = None):
    """The :class:`~archbench.results.comparison.Comparison` of two results folders (or
    tables), each side's records kept by its filters (``KEY=VALUE`` texts), and each side's
    lines naming the records left out as invalid. CompareError (one line) when a side
    cannot be read, has no records, or the sides share no configuration."""
    from archbench.results.comparison import compare
    from archbench.results.record_sets import (
        DEFAULT_THRESHOLD,
        CompareError,
        implied_across,
        parse_filter,
        raw_folder,
    )
    filters = [[parse_filter(f) for f in fs] for fs in (base_filter, new_filter)]
    same = [(raw_folder(source) or Path(source)).resolve() for source in (base, new)]
    if same[0] == same[1] and sorted(base_filter) == sorted(new_filter):
        raise CompareError(f"base and new are the same records ({' '.join([str(base), *base_filter])}): "
                           "name two result sets, or choose two sides with --base-filter/--new-filter")
    sides = [read_checked(name, source, fs) for name, source, fs in zip(("base", "new"), (base, new), filters)]
    comparison = compare(sides[0][0], sides[1][0], statistic=statistic,
                         threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
                         across=[*across, *implied_across(*filters)])
    if not comparison.table["present"].eq("both").any():
        only = comparison.table["present"].value_counts()
        raise CompareError(
            f"no configuration in common: {side_name('base', base, base_filter)} has "
            f"{only.get('base only', 0)}, {side_name('new', new, new_filter)} has "
            f"{only.get('new only', 0)} (configurations match by identity; to match across a field "
            "that differs: --across FIELD, or across: under compare_with)")
    return comparison, {"base": sides[0], "new": sides[1]}


def run(args: argparse.Namespace) -> int:
    """Compare, print the report, write the files, and say whether to fail."""
    from archbench.results.record_sets import CompareError
    new = args.new or args.base
    try:
        below, threshold = ratio_limit(args.fail_below), band(args.threshold)
        if args.output:
            check_output(args.output, (args.base, new))
        if args.new is None and not (args.base_filter or args.new_filter):
            raise CompareError("one results folder: choose the two sides with --base-filter/--new-filter")
        comparison, sides = compare_sources(
            args.base, new, base_filter=args.base_filter, new_filter=args.new_filter,
            across=args.across, statistic=args.statistic, threshold=threshold)
    except (CompareError, ValueError) as exc:  # RecordError, DuplicateRunError too
        print(f"archbench compare: {exc}", file=sys.stderr)
        return 2
    for name, (_, errors) in sides.items():
        for line in errors:
            print(f"archbench compare: {name}: excluded invalid record: {line}", file=sys.stderr)
    title = " -> ".join(" ".join([str(source), *filters]) for source, filters in
                        ((args.base, args.base_filter), (new, args.new_filter)))
    print(report(comparison, title))
    if args.output:
        try:
            write_files(comparison, args.output, title)
        except OSError as exc:
            print(f"archbench compare: --output {args.output}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    if below is None:
        return 0
    bad = failing(comparison, below)
    if bad:
        print(f"archbench compare: {len(bad)} significant slowdown(s) below ratio {below:g}:",
              *bad, sep="\n  ", file=sys.stderr)
    unjudged = [] if args.allow_incomparable else incomparable(comparison)
    if unjudged:
        print(f"archbench compare: --fail-below {below:g} cannot judge {len(unjudged)} of "
              f"{len(comparison.table)} configuration(s), not comparable (--allow-incomparable "
              f"accepts them): {'; '.join(unjudged)}", file=sys.stderr)
    return 1 if bad else (2 if unjudged else 0)


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """CLI entry point (also of ``archbench compare``, as ``prog``)."""
    try:
        args = parser(prog).parse_args(argv)
    except UsageError as exc:
        print(f"archbench compare: {' '.join(str(exc).split())} (see {prog} --help)", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
