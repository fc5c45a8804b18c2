"""Configuration input checked against the YAML schemas of config/schemas/, with every
error as one line naming the key: ``<where>.<key.path>: <reason>``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIR = ROOT / "config" / "schemas"


class ConfigError(ValueError):
    """Invalid campaign or system input; the message is one line naming the key path."""


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    """Read config/schemas/<name>.schema.yaml."""
    return yaml.safe_load((SCHEMA_DIR / f"{name}.schema.yaml").read_text())


def check(instance: Any, schema: dict, where: str) -> None:
    """Validate ``instance``; raise ConfigError '<where>.<key.path>: <reason>' on the first error."""
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(instance))
    # A failing key also makes its parent report it as "unevaluated": report the key.
    specific = [e for e in errors if e.validator != "unevaluatedProperties"]
    error = jsonschema.exceptions.best_match(specific or errors)
    if error is None:
        return
    path = ".".join(str(p) for p in error.absolute_path)
    key = f"{where}.{path}" if path else where
    message = error.message
    if error.validator == "pattern":
        message = f"{error.instance!r} is not allowed here (shell metacharacters, quotes, newlines or an unexpected form)"
    if error.validator in ("unevaluatedProperties", "additionalProperties"):
        message = message.replace("were unexpected", "are not allowed").replace(
            "was unexpected", "is not allowed")
    raise ConfigError(f"{key}: {message}")
