"""The ``archbench`` command (also ``python -m archbench.campaign``).

    archbench check CAMPAIGN.yaml   # validate a campaign and every input it names
    archbench schema                # the whole experiment schema, every type's keys
    archbench compare BASE NEW      # which configurations got faster or slower (docs/compare.md)
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import yaml

from archbench.core.validate import ConfigError
from archbench.core.yamlio import load_yaml_file


def check(path: str) -> int:
    """Validate a campaign and every input it names, as the workflow does before any job."""
    from archbench.inputs import check_inputs  # pandas: only when a campaign is checked
    try:
        campaign = check_inputs(load_yaml_file(path), [path])
    except ConfigError as exc:
        print(f"archbench: invalid configuration: {exc}", file=sys.stderr)
        return 1
    print(f"{path}: {len(campaign.measurements)} measurements")
    return 0


def schema() -> int:
    """Print the whole experiment schema (YAML)."""
    from archbench.plan.campaign import experiment_schema
    print(yaml.safe_dump(experiment_schema(), sort_keys=False, width=100))
    return 0


def add_compare(commands) -> None:
    """Register ``archbench compare``: the arguments of :mod:`archbench.results.compare`."""
    from archbench.results import compare  # argparse only; pandas when it runs
    compare.add_arguments(commands.add_parser(
        "compare", help="which configurations got faster or slower between two result sets",
        description=compare.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="archbench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = p.add_subparsers(dest="command", required=True)
    checking = commands.add_parser("check", help="validate a campaign and every input it names")
    checking.add_argument("campaign", help="a campaign YAML file")
    commands.add_parser("schema", help="print the whole experiment schema")
    add_compare(commands)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    args = parser().parse_args(argv)
    if args.command == "check":
        return check(args.campaign)
    if args.command == "compare":
        from archbench.results.compare import run
        return run(args)
    return schema()


if __name__ == "__main__":
    sys.exit(main())
