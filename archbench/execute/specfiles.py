"""Measurement specs fixed when a run plans them: one immutable file per spec, named by
the digest of its bytes.

The run that plans a measurement writes its spec to
``results/specs/<campaign>/<digest>.json`` (``<digest>``: the first 16 hex digits of the
SHA-256 of the file) and its job names that file. A spec file is never rewritten: an
invocation with other settings (a dry run, a run Snakemake's lock refuses, a concurrent
one) plans other digests and writes other files, so nothing it does can change what a
live run measures. The supervisor checks that the file still hashes to its name and
belongs to the record it writes before it runs anything.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable

from archbench.core.files import atomic_write_text
from archbench.core.record import raw_path

DIGEST_CHARS = 16
RECORD_KEYS = {"system", "experiment", "config_id", "repetition"}


class SpecError(ValueError):
    """A spec file that is missing, altered, or not the spec of the record asked for."""


def spec_text(spec: dict) -> str:
    """The bytes a spec is stored as (and its digest taken of): sorted-key JSON, one line."""
    return json.dumps(spec, sort_keys=True) + "\n"


def digest(text: str) -> str:
    """The name a spec's text is stored under: the start of its SHA-256."""
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def spec_dir(campaign: str, results: str = "results") -> str:
    """Where a campaign's spec files live."""
    return f"{results}/specs/{campaign}"


def write_specs(texts: Iterable[str], directory: str | os.PathLike) -> int:
    """Write each spec text to ``<directory>/<digest>.json`` unless that file exists (it
    then holds the same bytes); return how many were written."""
    directory = Path(directory)
    present = set(os.listdir(directory)) if directory.is_dir() else set()
    written = 0
    for text in texts:
        name = f"{digest(text)}.json"
        if name not in present:
            atomic_write_text(directory / name, text)
            present.add(name)
            written += 1
    return written


def read_spec(path: str | os.PathLike, record: str | os.PathLike) -> dict:
    """The spec in ``path`` for the record ``record``. Raises SpecError when the file is
    missing, does not hash to its name (altered since it was planned), or is the spec of
    another record."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: unreadable spec file ({exc}); rerun the workflow to plan it again") from exc
    if digest(text) != path.stem:
        raise SpecError(f"{path}: the spec was altered after it was planned (its digest is "
                        f"{digest(text)}); rerun the workflow to plan it again")
    spec = json.loads(text)  # its digest is that of valid JSON written by spec_text
    if not isinstance(spec, dict) or not isinstance(spec.get("measurement"), dict) \
            or not RECORD_KEYS <= set(spec["measurement"]):
        raise SpecError(f"{path}: not a measurement spec (no 'measurement' object)")
    planned = raw_path(spec["measurement"])
    if not Path(record).as_posix().endswith(planned):
        raise SpecError(f"{path}: the spec of {planned}, not of {record}")
    return spec
