"""Configuration input checked against the YAML schemas of config/schemas/, with every
error as one line naming the key: ``<where>.<key.path>: <reason>``."""

from __future__ import annotations

import reprlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIR = ROOT / "config" / "schemas"
MAX_MESSAGE = 300


class ConfigError(ValueError):
    """Invalid campaign or system input; the message is one line naming the key path,
    after the file it is in (``source``) when that is known."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        super().__init__(f"{source}: {message}" if source else message)
        self.source = source


def _is_integer(_checker: object, instance: Any) -> bool:
    """An integer is an int: 8.0 is a number, not a batch size (jsonschema accepts it)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


# Draft 2020-12, with integers that are ints (the worker would get "--batch-size 8.0").
Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    """Read config/schemas/<name>.schema.yaml."""
    return yaml.safe_load((SCHEMA_DIR / f"{name}.schema.yaml").read_text())


def check(instance: Any, schema: dict, where: str, *, source: str | None = None) -> None:
    """Validate ``instance``; raise ConfigError '[<source>: ]<where>.<key.path>: <reason>'
    on the first error."""
    errors = list(Validator(schema).iter_errors(instance))
    # A failing key also makes its parent report it as "unevaluated": report the key.
    specific = [e for e in errors if e.validator != "unevaluatedProperties"]
    error = jsonschema.exceptions.best_match(specific or errors)
    if error is None:
        return
    key = ".".join(str(p) for p in (where, *error.absolute_path) if p != "")
    message = error.message
    if error.validator == "pattern":
        message = f"{error.instance!r} is not allowed here (shell metacharacters, quotes, newlines or an unexpected form)"
    if error.validator in ("unevaluatedProperties", "additionalProperties"):
        message = message.replace("were unexpected", "are not allowed").replace(
            "was unexpected", "is not allowed")
    if len(message) > MAX_MESSAGE:  # a huge value is named, not printed
        message = message.replace(repr(error.instance), reprlib.repr(error.instance))[:MAX_MESSAGE]
    raise ConfigError(f"{key}: {message}" if key else message, source=source)
