"""Aggregation speed: collecting 10,000 result records and rebuilding every table.

Generates ``--records`` fabricated records (``tests/fabricated.py``) as JSON files in
a temporary directory laid out like ``results/raw``, then times, in one run:

  (a) ``archbench.results.collect.collect(paths)``: read + schema-validate + flatten every record;
  (b) ``archbench.results.tables.build_tables`` on the tidy table + writing every table (csv/md/tex);

against references measured on the same files in the same run: a plain ``json.load`` of
every file (for a) and ``pandas.read_csv`` of the collected table (for b). It also splits
(a) into reading, schema validation and flattening, so a slow collect can be attributed.
Target: (a) + (b) under 10 s.

    python scripts/bench_aggregate.py [--records 10000] [--keep DIR] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))  # fabricated.py, the tests' records

import fabricated as fabricate  # noqa: E402
import pandas as pd  # noqa: E402

from archbench.core import record as record_module  # noqa: E402
from archbench.results.artifacts import write_table  # noqa: E402
from archbench.results.collect import collect, records_to_frame  # noqa: E402
from archbench.results.tables import build_tables  # noqa: E402

TARGET_S = 10.0


def generate(raw: Path, count: int) -> list[str]:
    """``count`` valid records written as results/raw-style JSON files; their paths."""
    per_system = len(fabricate.configurations(systems=("sysa",))) * 5
    systems = tuple(f"sys{i:03d}" for i in range(-(-count // per_system)))
    paths = []
    for rec in fabricate.fabricate_records(repetitions=5, systems=systems):
        if len(paths) == count:
            break
        path = raw / rec["system"] / rec["experiment"] / rec["config_id"] / f"rep{rec['repetition']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")
        paths.append(str(path))
    return paths


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--keep", help="generate into this directory (kept) instead of a temp dir")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of (a)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="archbench-agg-") as scratch:
        root = Path(args.keep or scratch)
        paths, t_gen = timed(generate, root / "raw", args.records)
        print(f"generated {len(paths)} records in {t_gen:.2f} s (not timed below)")

        # reference for (a): plain json.load of every file
        def load_all():
            out = []
            for p in paths:
                with open(p) as handle:
                    out.append(json.load(handle))
            return out
        loaded, t_json = timed(load_all)

        # (a) collect: read + validate + flatten
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
        (frame, errors), t_collect = timed(collect, paths)
        if args.profile:
            profiler.disable()
        assert not errors and len(frame) == len(paths), errors[:3]

        # breakdown of (a) on the already loaded dicts
        def validate_all():
            for rec in loaded:
                record_module.validate(rec)
        _, t_validate = timed(validate_all)
        _, t_flatten = timed(records_to_frame, loaded)

        csv_path = root / "measurements.csv"
        frame.to_csv(csv_path, index=False)
        _, t_read_csv = timed(pd.read_csv, csv_path)

        # (b) every table rebuilt and written
        def tables_step():
            built = build_tables(frame, peak={"sys000": {"gflops": 1000.0}})
            for name, table in built.items():
                out = root / "tables" / name
                write_table(table, csv=f"{out}.csv", md=f"{out}.md", tex=f"{out}.tex")
            return built
        built, t_tables = timed(tables_step)

    total = t_collect + t_tables
    print(f"records: {len(paths)}   tables: {len(built)}   summary rows: {len(built['summary'])}")
    print(f"(a) collect (read+validate+flatten): {t_collect:7.3f} s   "
          f"reference json.load of all files: {t_json:6.3f} s   ratio {t_collect / t_json:6.1f}x")
    print(f"    breakdown: schema validation {t_validate:.3f} s "
          f"({100 * t_validate / t_collect:.0f}%), flatten + frame {t_flatten:.3f} s "
          f"({100 * t_flatten / t_collect:.0f}%), file reading ~{t_json:.3f} s")
    print(f"(b) build + write every table:       {t_tables:7.3f} s   "
          f"reference pandas.read_csv of tidy table: {t_read_csv:6.3f} s   "
          f"ratio {t_tables / t_read_csv:6.1f}x")
    print(f"total (a)+(b): {total:.3f} s   target < {TARGET_S:.0f} s: "
          f"{'met' if total < TARGET_S else 'NOT met'}")
    if args.profile:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(15)
        print(text.getvalue())
    return 0 if total < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
