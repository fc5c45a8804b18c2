"""Property-based: malformed campaign and system input (as data and as file text) is
rejected with one line naming the file or key path and the reason; what is accepted
plans only measurements a node can run, with integers where integers are meant and
finite numbers throughout. No other exception ever escapes."""

from __future__ import annotations

import copy
import math
import re

import yaml
from conftest import REPO, count_input
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archbench.core.hardware import hardware_threads
from archbench.plan import systems
from archbench.plan.campaign import ConfigError, load_campaign, load_campaign_file

TINY_TEXT = (REPO / "tests" / "campaigns" / "tiny.yaml").read_text()
LOCAL_TEXT = (REPO / "config" / "systems" / "local.yaml").read_text()
TINY = yaml.safe_load(TINY_TEXT)
LOCAL = yaml.safe_load(LOCAL_TEXT)
# the file, or a key path's first key, then the key path (odd keys quoted as repr quotes them)
QUOTED = r"'(?:[^'\\]|\\.)*'" + "|" + r'"(?:[^"\\]|\\.)*"'
KEY_PATH = re.compile(rf"^([\w./+ -]+|{QUOTED})(\.([\w-]+|{QUOTED}))*: \S")
INTEGER_FIELDS = ("batch_per_process", "intra_threads", "inter_threads", "processes_per_node",
                  "nodes", "workers", "warmup_steps", "measured_steps", "repetition",
                  "global_batch", "image_size", "problem_size", "tile_size", "num_classes")
PER_NODE_COUNTS = ("intra_threads", "inter_threads", "processes_per_node")

# Numbers a typo or a converter produces: floats for integers, huge, non-finite, negative.
nasty_numbers = st.sampled_from([8.0, 2.0, 0.5, 1e20, 1e30, float("inf"), float("-inf"),
                                 float("nan"), 10**20, 1_000_000, -1, 0, True])
junk = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True)
    | nasty_numbers | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6)


def paths(node, prefix=()):
    """Every key path in a nested dict/list."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


@st.composite
def mutated(draw, base):
    """``base`` with one to three mutations: replace a value (junk, or a nasty number in
    place of a number), delete a key, add a key."""
    config = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        candidates = [p for p in paths(config) if p]
        if not candidates:
            break
        path = draw(st.sampled_from(candidates))
        parent = config
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "number", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(junk)
        elif action == "number" and isinstance(parent[path[-1]], (int, float)):
            parent[path[-1]] = draw(nasty_numbers)
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = draw(junk)
    return config


def finite_throughout(value) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite_throughout(v) for v in value.values())
    if isinstance(value, list):
        return all(finite_throughout(v) for v in value)
    return True


def assert_sane(campaign) -> None:
    """What an accepted campaign plans is runnable as planned."""
    planned = {m["experiment"] for m in campaign.measurements}
    assert planned == set(campaign.config["experiments"]), "an experiment plans nothing"
    for m in campaign.measurements:
        system = campaign.systems[m["system"]]
        hardware = hardware_threads(system)
        assert finite_throughout(m), m
        for name in INTEGER_FIELDS:
            value = m.get(name)
            assert value is None or (isinstance(value, int) and not isinstance(value, bool)), (name, value)
        for name in PER_NODE_COUNTS:
            assert (m.get(name) or 0) <= hardware, (name, m[name], hardware)
        assert 0 < m["timeout_minutes"] <= 10080
        assert m.get("memory_limit_mb", 2048) >= 2048
        assert m.get("batch_per_process") is None or m["batch_per_process"] <= 2**20
        assert m.get("measured_steps") is None or m["measured_steps"] <= 10**6


def outcome(kind: str, load) -> None:
    """Run ``load``; an accepted campaign must be sane, a rejection one clean line."""
    try:
        campaign = load()
    except ConfigError as exc:
        count_input(kind, "rejected")
        message = str(exc)
        assert "\n" not in message and "Traceback" not in message, message
        assert KEY_PATH.match(message), message
        return
    count_input(kind, "accepted")
    assert_sane(campaign)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(TINY))
def test_malformed_campaigns(config):
    outcome("campaign (data)", lambda: load_campaign(config))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(LOCAL))
def test_malformed_system_definitions(system):
    config = {**copy.deepcopy(TINY), "system_definitions": {"local": system}}
    outcome("system (data)", lambda: load_campaign(config))


@st.composite
def mutated_text(draw, text: str) -> bytes:
    """YAML text with one to three textual mutations: a line repeated (a duplicate key),
    a value replaced by a number or junk, an alias bomb, bytes that are not UTF-8, a cut."""
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, max(0, len(lines) - 1)))
        action = draw(st.sampled_from(["repeat", "value", "bomb", "bytes", "cut", "anchor"]))
        if action == "repeat" and lines:
            lines.insert(at, lines[at])
        elif action == "value" and lines and ":" in lines[at]:
            key = lines[at].split(":", 1)[0]
            value = draw(st.sampled_from(["8.0", "1e20", "1.0e+20", ".inf", ".nan", "-.inf", "0",
                                          "1000000", "[]", "{}", "~", "'x'", "[1, 2.5]", "*nope"]))
            lines[at] = f"{key}: {value}"
        elif action == "bomb":
            levels = draw(st.integers(3, 9))
            bomb = ["bomb0: &b0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"] + [
                f"bomb{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 10) + "]" for i in range(1, levels)]
            lines[at:at] = bomb
        elif action == "anchor" and lines and ":" in lines[at] and not lines[at].startswith(" "):
            lines[at] = lines[at] + " &self"
            lines.insert(at + 1, "again: *self")
        elif action == "cut":
            lines = lines[:at]
    data = "\n".join(lines).encode()
    if draw(st.booleans()) and draw(st.booleans()):
        cut = draw(st.integers(0, len(data)))
        data = data[:cut] + draw(st.sampled_from([b"\xff", b"\xc3(", b"\x00", b"\x80abc"])) + data[cut:]
    return data


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutated_text(TINY_TEXT))
def test_malformed_campaign_files(tmp_path, data):
    path = tmp_path / "campaign.yaml"
    path.write_bytes(data)
    outcome("campaign (file)", lambda: load_campaign_file(path))


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutated_text(LOCAL_TEXT))
def test_malformed_system_files(tmp_path, monkeypatch, data):
    monkeypatch.setattr(systems, "SYSTEM_DIR", tmp_path)
    (tmp_path / "local.yaml").write_bytes(data)
    outcome("system (file)", lambda: load_campaign(copy.deepcopy(TINY)))


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_arbitrary_bytes_as_campaign_file(tmp_path, data):
    path = tmp_path / "campaign.yaml"
    path.write_bytes(data)
    try:
        load_campaign_file(path)
    except ConfigError as exc:
        count_input("campaign (random bytes)", "rejected")
        assert "\n" not in str(exc) and str(exc).startswith(str(path))
    else:
        count_input("campaign (random bytes)", "accepted")


def test_most_mutations_were_rejected():
    """The generators really produce bad input (this runs after the property tests)."""
    from conftest import INPUTS_TRIED
    for kind in ("campaign (data)", "system (data)", "campaign (file)", "system (file)"):
        assert INPUTS_TRIED.get((kind, "rejected"), 0) > 50, (kind, INPUTS_TRIED)
        assert INPUTS_TRIED.get((kind, "accepted"), 0) > 5, (kind, INPUTS_TRIED)
