"""Strict reading of the YAML files archbench is given (campaigns, systems, sidecars).

PyYAML alone silently keeps the last of two equal keys, builds ``.inf``/``.nan`` floats,
and lets a few lines of anchors and aliases stand for billions of values ("billion
laughs"), which any code walking the result then expands. :func:`load_yaml_file` refuses
all of that with one line naming the file (and the line or key), before anything else
reads the data:

- the file must be a readable regular file of at most ``MAX_BYTES``, in UTF-8;
- a mapping may not repeat a key (merge keys ``<<`` apart);
- the document, with every alias expanded, may hold at most ``MAX_NODES`` values, and
  no alias may contain itself;
- every number must be finite, and no key or text may hold a control character.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Iterator

import yaml

from archbench.core.validate import ConfigError, key_path

MAX_BYTES = 1024 * 1024  # PyYAML reads about 100-300 KiB a second: a few seconds at most
MAX_NODES = 100_000  # values in the document once aliases are expanded


class StrictLoader(yaml.SafeLoader):
    """SafeLoader refusing a key that appears twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in first_line:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key '{key}' appears twice (first on line {first_line[key]})",
                        key_node.start_mark)
                first_line[key] = line
            except TypeError:  # an unhashable key: the base class says so
                break
        return super().construct_mapping(node, deep=deep)


def expanded_size(node: yaml.Node, memo: dict[int, int] | None = None,
                  open_nodes: set[int] | None = None) -> int:
    """The number of values ``node`` stands for with every alias expanded (each shared
    node is counted once per use, but computed once). Raises ValueError on an alias that
    contains itself."""
    memo = {} if memo is None else memo
    open_nodes = set() if open_nodes is None else open_nodes
    key = id(node)
    if key in memo:
        return memo[key]
    if key in open_nodes:
        raise ValueError(f"line {node.start_mark.line + 1}: an alias contains itself")
    open_nodes.add(key)
    if isinstance(node, yaml.MappingNode):
        children = [child for pair in node.value for child in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    else:
        children = []
    size = 1 + sum(expanded_size(child, memo, open_nodes) for child in children)
    open_nodes.discard(key)
    memo[key] = size
    return size


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # tab and newline are text


def bad_values(data: Any, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """(key path, what is wrong) for every non-finite number and every key or text holding
    a control character (YAML's escapes can write NUL or ESC into a string) in ``data``."""
    if isinstance(data, float) and not math.isfinite(data):
        yield path, f"{data} is not a finite number"
    elif isinstance(data, str) and CONTROL.search(data):
        yield path, f"{data!r} holds a control character"
    elif isinstance(data, dict):
        for k, v in data.items():
            if isinstance(k, str) and CONTROL.search(k):
                yield path, f"key {k!r} holds a control character"
            yield from bad_values(v, path + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from bad_values(v, path + (i,))


def check_values(data: Any, source: str | None = None) -> None:
    """Raise ConfigError at the first of :func:`bad_values`."""
    for path, problem in bad_values(data):
        raise ConfigError(f"{key_path(path)}: {problem}", source=source)


def load_yaml_text(text: str, where: str) -> Any:
    """Parse ``text`` strictly (see the module docstring); errors name ``where``."""
    loader = None
    try:
        loader = StrictLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        size = expanded_size(node)
        if size > MAX_NODES:
            raise ConfigError(f"holds {size} values once its aliases are expanded "
                              f"(at most {MAX_NODES})", source=where)
        data = loader.construct_document(node)
    except ConfigError:
        raise
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML ({yaml_reason(exc)})", source=where) from exc
    except ValueError as exc:
        raise ConfigError(f"not valid YAML ({exc})", source=where) from exc
    except RecursionError as exc:
        raise ConfigError("not valid YAML (nested too deeply)", source=where) from exc
    finally:
        if loader is not None:
            loader.dispose()
    check_values(data, where)
    return data


def yaml_reason(exc: yaml.YAMLError) -> str:
    """One line saying what PyYAML found wrong, and on which line."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    text = f"{context}: {problem}" if context and problem != context else problem
    text = " ".join(str(text).split())
    return f"line {mark.line + 1}: {text}" if mark is not None else text


def read_text_file(path: str | os.PathLike, where: str | None = None) -> str:
    """The UTF-8 text of a regular file; one-line ConfigError naming ``where`` (default
    the path) when it is missing, a directory, too large, unreadable or not UTF-8."""
    path = Path(path)
    where = where or str(path)
    try:
        if path.is_dir():
            raise ConfigError("is a directory, not a file", source=where)
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ConfigError(f"{size} bytes; at most {MAX_BYTES} are read", source=where)
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read ({exc.strerror or exc})", source=where) from exc
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {raw[exc.start]:#04x} at offset "
                          f"{exc.start})", source=where) from exc


def load_yaml_file(path: str | os.PathLike, where: str | None = None) -> Any:
    """Read and strictly parse one YAML file; errors are one ConfigError line naming
    ``where`` (default the path)."""
    where = where or str(path)
    return load_yaml_text(read_text_file(path, where), where)
