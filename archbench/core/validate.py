"""Configuration input checked against the YAML schemas the package ships
(archbench/schemas/, read with importlib.resources, so an installed copy finds them), with
every error as one line naming the key: ``<where>.<key.path>: <reason>``."""

from __future__ import annotations

import re
import reprlib
from functools import lru_cache
from importlib import resources
from typing import Any, Iterator, NamedTuple

import jsonschema
import yaml

MAX_MESSAGE = 300
PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")  # printed as is in a key path; others quoted


class ConfigError(ValueError):
    """Invalid campaign or system input; the message is one line naming the key path,
    after the file it is in (``source``) when that is known."""

    def __init__(self, message: str, *, source: str | None = None) -> None:
        super().__init__(f"{source}: {message}" if source else message)
        self.source = source


class SchemaError(NamedTuple):
    """The first schema error of an instance: the key path it is at (for an unknown or
    missing key, that key's path), the reason, and the schema keyword that failed."""

    path: tuple
    message: str
    validator: str


def key_path(parts: tuple | list) -> str:
    """``a.b.0``: a key path as the error messages print it (odd keys quoted)."""
    return ".".join(str(p) if PLAIN_KEY.match(str(p)) else repr(p) for p in parts) or "(top level)"


def _is_integer(_checker: object, instance: Any) -> bool:
    """An integer is an int: 8.0 is a number, not a batch size (jsonschema accepts it)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def _canonical(value: Any) -> Any:
    """A hashable stand-in for a JSON value: equal for values JSON deems equal (1 and 1.0),
    different for those it does not (1 and true)."""
    if isinstance(value, bool) or value is None:
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_canonical(v) for v in value))
    if isinstance(value, dict):
        return ("dict", frozenset((k, _canonical(v)) for k, v in value.items()))
    return (type(value).__name__, value)


def first_repeat(items: list) -> int | None:
    """The index of the first item of ``items`` equal to an earlier one (as JSON compares
    them), None when all differ; linear time."""
    seen = set()
    for i, item in enumerate(items):
        key = _canonical(item)
        if key in seen:
            return i
        seen.add(key)
    return None


def _unique_items(validator: Any, unique: bool, instance: Any, _schema: dict) -> Iterator:
    """``uniqueItems`` in linear time, naming the repeated value (jsonschema's own compares
    items of mixed types pair by pair: minutes for a list of some ten thousand)."""
    if unique and validator.is_type(instance, "array"):
        repeat = first_repeat(instance)
        if repeat is not None:
            yield jsonschema.ValidationError(
                f"{reprlib.repr(instance[repeat])} is given twice (remove the repeat)")


# Draft 2020-12, with integers that are ints (the worker would get "--batch-per-process 8.0") and
# a uniqueItems that cannot hang.
Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, validators={"uniqueItems": _unique_items},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    """The package's schema archbench/schemas/<name>.schema.yaml (config, system,
    experiment)."""
    text = resources.files("archbench").joinpath(f"schemas/{name}.schema.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def declared_keys(schema: dict, root: dict) -> set[str]:
    """The property names ``schema`` declares, through ``$ref`` (to ``root``), ``allOf``,
    ``oneOf``, ``anyOf`` and ``if``/``then``/``else``: the keys ``unevaluatedProperties``
    lets through."""
    keys = set(schema.get("properties", {}))
    ref = schema.get("$ref", "")
    if ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        keys |= declared_keys(target, root)
    for word in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(word, []):
            keys |= declared_keys(sub, root)
    for word in ("if", "then", "else"):
        if isinstance(schema.get(word), dict):
            keys |= declared_keys(schema[word], root)
    return keys


def _unknown_keys(error: jsonschema.ValidationError, root: dict) -> list:
    """The keys of a mapping an ``additionalProperties``/``unevaluatedProperties`` error
    refuses, in the order the mapping gives them."""
    schema = error.schema
    if error.validator == "unevaluatedProperties":
        known = declared_keys(schema, root)
        return [k for k in error.instance if k not in known]
    patterns = list(schema.get("patternProperties", {}))
    return [k for k in error.instance if k not in schema.get("properties", {})
            and not any(re.search(p, str(k)) for p in patterns)]


TYPE_WORDS = {"string": "a string", "integer": "an integer", "number": "a number", "array": "a list",
              "object": "a mapping", "boolean": "true or false", "null": "null"}


def _either(words: list[str]) -> str:
    """'a', 'a or b', 'a, b or c'."""
    return " or ".join(filter(None, [", ".join(words[:-1]), words[-1]])) if words else "none"


def _forms(schema: dict, root: dict) -> list[str]:
    """What ``schema`` takes, in words: its const or enum values, else its type."""
    ref = schema.get("$ref", "")
    if ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        return _forms(target, root)
    if "const" in schema:
        return [reprlib.repr(schema["const"])]
    if "enum" in schema:
        return [reprlib.repr(v) for v in schema["enum"]]
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds or []
    return [TYPE_WORDS.get(k, k) for k in kinds] or ["another form"]


def _alternatives(error: jsonschema.ValidationError, root: dict) -> str:
    """A oneOf/anyOf refusal in words, never the schema (jsonschema's own message prints
    every alternative, or the whole mapping): alternatives that are each a required key
    name the keys ("give one of a or b, not a and b"); others the forms allowed."""
    options = [o for o in error.validator_value if isinstance(o, dict)]
    if options and all(set(o) <= {"required", "description"} and o.get("required") for o in options):
        keys = list(dict.fromkeys(k for o in options for k in o["required"]))
        given = [k for k in keys if isinstance(error.instance, dict) and k in error.instance]
        if len(given) > 1:
            return f"give one of {_either(keys)}, not {' and '.join(given)}"
        return f"missing: give one of {_either(keys)}"
    forms = list(dict.fromkeys(f for o in options for f in _forms(o, root)))
    shown = (reprlib.repr(error.instance) if not isinstance(error.instance, (dict, list))
             else TYPE_WORDS["object" if isinstance(error.instance, dict) else "array"].replace("a ", "the ", 1))
    several = error.validator == "oneOf" and not error.context  # valid under more than one
    return (f"{shown} matches more than one of the allowed forms ({_either(forms)})" if several
            else f"{shown} is none of the allowed forms ({_either(forms)})")


def schema_error(instance: Any, schema: dict) -> SchemaError | None:
    """The first error of ``instance`` against ``schema`` (None when it is valid)."""
    errors = list(Validator(schema).iter_errors(instance))
    # A failing key also makes its parent report it as "unevaluated": report the key.
    specific = [e for e in errors if e.validator != "unevaluatedProperties"]
    error = jsonschema.exceptions.best_match(specific or errors)
    if error is None:
        return None
    path, message = tuple(error.absolute_path), error.message
    if error.validator == "pattern":
        message = f"{error.instance!r} is not allowed here (shell metacharacters, quotes, newlines or an unexpected form)"
    elif error.validator in ("unevaluatedProperties", "additionalProperties"):
        unknown = _unknown_keys(error, schema)
        if unknown:
            path, message = path + (unknown[0],), "not a key allowed here"
    elif error.validator in ("oneOf", "anyOf"):
        message = _alternatives(error, schema)
    elif error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        path, message = path + (missing[0],), "missing (required)"
    if len(message) > MAX_MESSAGE:  # a huge value is named, not printed
        message = message.replace(repr(error.instance), reprlib.repr(error.instance))[:MAX_MESSAGE]
    return SchemaError(path, message, str(error.validator))


def check(instance: Any, schema: dict, where: str, *, source: str | None = None) -> None:
    """Validate ``instance``; raise ConfigError '[<source>: ]<where>.<key.path>: <reason>'
    on the first error (``where`` may be empty: the instance is the file's top level)."""
    error = schema_error(instance, schema)
    if error is None:
        return
    key = ".".join(part for part in (where, error.path and key_path(error.path)) if part)
    raise ConfigError(f"{key or '(top level)'}: {error.message}", source=source)
