"""A record is what its plan says: the one check of a record against the measurement it
was planned as, used by the supervisor when it takes its worker's record, by collection
and the quarantine at workflow start, and by comparisons of results folders that keep
their spec files.

A record's plan is its measurement: the ``measurement`` of its spec file
(``results/specs/<campaign>/<digest>.json``, :mod:`archbench.execute.specfiles`), which is
the campaign's measurement for the record's path; for a ``best`` measurement, the
measurement the workflow chose for it (``results/best/<system>/<experiment>.json``).
A record agrees with its plan when

- every record field the measurement states has the measurement's value: the fields of
  the configuration id (framework, model, batch per process, nodes, processes per node,
  threads, vendor library on or off, data, strategy, kernel, problem and tile size,
  device, GPUs, parameter servers, variable update) and every other planned setting a record holds
  (image size, global batch, workers, steps, experiment, system, repetition, ...), but
  the vendor library a training record names, which is the one that ran (:data:`FOUND`);
  ``device`` and ``framework`` unstated read as ``cpu`` and ``tensorflow``, as the
  tables read them;
- each environment variable the measurement sets has its value in the record's ``env``;
- a record that states a throughput states it in its kind's unit: img/s for training
  (:data:`archbench.workloads.training.outcome.THROUGHPUT_UNIT`), the kernel spec's unit
  for a kernel (``KernelSpec.unit``).

Settings planned under ``tuning`` (hashed into the configuration id) are no record
fields; those a run reports come back as metrics and are not compared here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from archbench.core.fields import CONFIG_FIELDS, READ_AS
from archbench.core.provenance import config_hash
from archbench.core.record import DEFAULTS, raw_path, schema
from archbench.plan.placeholders import choice_file, is_placeholder
from archbench.workloads.kernels import KERNELS
from archbench.workloads.training.models import LANGUAGE_MODELS
from archbench.workloads.training.outcome import THROUGHPUT_UNIT

# A record's environment holds the planned variables and the host's: compared one by one.
ENV = "env"
# Planned fields a record states as found: the vendor library that ran (the probe's
# finding; where it differs from the system's declaration, ``vendor_mismatch`` says so).
FOUND = ("vendor_library",)


def throughput_unit(record: Mapping[str, Any]) -> str | None:
    """The unit of a record's kind (img/s for training, tokens/s for a language model, the kernel spec's unit for a
    kernel), or None when its kind names none (an unknown kernel, named elsewhere)."""
    if record.get("kind") == "train":
        return LANGUAGE_MODELS[record["model"]].unit if record.get("model") in LANGUAGE_MODELS \
            else THROUGHPUT_UNIT
    spec = KERNELS.get(record.get("kernel") or "")
    return spec.unit if spec is not None else None


def compared_fields(measurement: Mapping[str, Any]) -> list[str]:
    """The record fields a measurement fixes: the identity fields (``CONFIG_FIELDS``) it
    states or that have a meaning unstated (:data:`archbench.core.fields.READ_AS`), then every other record
    field it states (its environment apart), but those it states as found (:data:`FOUND`)."""
    known = schema()["properties"]
    identity = [f for f in CONFIG_FIELDS if (f in measurement or f in READ_AS) and f not in FOUND]
    rest = [k for k in measurement if k in known and k not in (*CONFIG_FIELDS, *FOUND, ENV)]
    return identity + rest


def _value(fields: Mapping[str, Any], name: str) -> Any:
    """A field's value as the tables read it: absent as the record default, None as READ_AS."""
    value = fields.get(name, DEFAULTS.get(name))
    return READ_AS.get(name) if value is None else value


def _same(a: Any, b: Any) -> bool:
    """Equal values of one type family (True is not 1, 4 is 4.0)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def said(field: str, recorded: Any, planned: Any) -> str:
    """The reason a record differs from its plan in ``field``."""
    return f"{field}: record says {recorded!r}, its plan says {planned!r}"


def mismatch(record: Mapping[str, Any], measurement: Mapping[str, Any]) -> str:
    """"" when ``record`` is what ``measurement`` plans (see the module docstring), else
    one line naming the first field that differs and both values, e.g.
    ``framework: record says 'tensorflow', its plan says 'pytorch'``."""
    for name in compared_fields(measurement):
        planned, recorded = _value(measurement, name), _value(record, name)
        if not _same(recorded, planned):
            return said(name, recorded, planned)
    env, planned_env = record.get(ENV) or {}, measurement.get(ENV) or {}
    for name, planned in (planned_env.items() if isinstance(planned_env, Mapping) else ()):
        if not _same(env.get(name), planned):
            return said(f"{ENV}.{name}", env.get(name), planned)
    return wrong_unit(record)


def wrong_unit(record: Mapping[str, Any]) -> str:
    """"" when a record states no throughput, or states it in its kind's unit; else the
    reason, e.g. ``throughput_unit: record says 'GFLOP/s', a train record's unit is 'img/s'``."""
    unit = record.get("throughput_unit") or ""
    expected = throughput_unit(record)
    if (record.get("throughput") is None and not unit) or expected is None or unit == expected:
        return ""
    return f"throughput_unit: record says {unit!r}, a {record.get('kind')} record's unit is {expected!r}"


def resolved(measurement: Mapping[str, Any], layouts: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The measurement a record of ``measurement`` ran: itself, or for a ``best``
    placeholder the layout chosen for it in ``layouts`` (a layouts file's content, keyed
    by record path), the placeholder when none could be chosen (its failure record says
    so), None when the choice is unknown (no layouts file: nothing to check against)."""
    if not is_placeholder(measurement):
        return measurement
    if layouts is None:
        return None
    entry = layouts.get(raw_path(measurement))
    if not isinstance(entry, dict):
        return None
    return measurement if "error" in entry else entry


def read_layouts(path: str | os.PathLike) -> dict | None:
    """A layouts file's content, None when it is missing or unreadable."""
    try:
        layouts = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return layouts if isinstance(layouts, dict) else None


def layouts_path(results: str | os.PathLike, measurement: Mapping[str, Any]) -> Path:
    """Where the workflow chose a placeholder's configuration (a `best` measurement's
    layout, a trial's point), under results folder ``results``."""
    return choice_file(results, measurement)


def plans_of(results: str | os.PathLike,
             measurements: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, list[Mapping[str, Any]]]:
    """What was planned for each record path, from (path, measurement) pairs: each
    measurement :func:`resolved` with the layouts files of results folder ``results``
    (each read once), those whose choice is unknown left out. A path may have several."""
    layouts: dict[Path, dict | None] = {}
    found: dict[str, list[Mapping[str, Any]]] = {}
    for path, measurement in measurements:
        if is_placeholder(measurement):
            where = layouts_path(results, measurement)
            if where not in layouts:
                layouts[where] = read_layouts(where)
            plan = resolved(measurement, layouts[where])
        else:
            plan = measurement
        if plan is not None:
            found.setdefault(path, []).append(plan)
    return found


def spec_measurements(results: str | os.PathLike) -> Iterator[tuple[str, dict]]:
    """(record path, measurement) of every spec file of results folder ``results``
    (``specs/<campaign>/<digest>.json``), the record path as ``<results>/raw/...``; files
    that are no spec are skipped."""
    for path in sorted(Path(results, "specs").glob("*/*.json")):
        try:
            measurement = json.loads(path.read_text(encoding="utf-8"))["measurement"]
            record = str(Path(results, raw_path(measurement)))
        except (OSError, ValueError, TypeError, KeyError):
            continue
        if isinstance(measurement, dict):
            yield record, measurement


def mismatch_any(record: Mapping[str, Any], plans: list[Mapping[str, Any]]) -> str:
    """"" when ``record`` is what one of ``plans`` (the specs of its path) says, else the
    reason against the plan whose configuration hash it states (or the first)."""
    reasons = [mismatch(record, plan) for plan in plans]
    if not plans or "" in reasons:
        return ""
    stated = [reason for plan, reason in zip(plans, reasons) if record.get("config_hash")
              == config_hash({k: v for k, v in plan.items() if k != "repetition"})]
    return (stated or reasons)[0]
