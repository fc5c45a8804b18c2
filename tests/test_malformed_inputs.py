"""Property-based: malformed campaign and system files are rejected with one line naming
the key path and the reason; no other exception ever escapes."""

from __future__ import annotations

import copy
import re

import yaml
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archbench import systems
from archbench.campaign import ConfigError, load_campaign, load_campaign_file

TINY = yaml.safe_load((REPO / "tests" / "campaigns" / "tiny.yaml").read_text())
LOCAL = yaml.safe_load((REPO / "config" / "systems" / "local.yaml").read_text())
KEY_PATH = re.compile(r"^[\w./-]+(\.[\w-]+)*: \S")

junk = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True)
    | st.text(max_size=12),
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
    """``base`` with one to three mutations: replace a value, delete a key, add a key."""
    config = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        candidates = [p for p in paths(config) if p]
        if not candidates:
            break
        path = draw(st.sampled_from(candidates))
        parent = config
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(junk)
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10))] = draw(junk)
    return config


def assert_clean_rejection(exc: ConfigError) -> None:
    message = str(exc)
    assert "\n" not in message and "Traceback" not in message
    assert KEY_PATH.match(message), message


REJECTED = {"campaign": 0, "system": 0, "text": 0}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(TINY))
def test_malformed_campaigns(config):
    try:
        load_campaign(config)
    except ConfigError as exc:
        REJECTED["campaign"] += 1
        assert_clean_rejection(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(LOCAL))
def test_malformed_system_definitions(system):
    config = {**copy.deepcopy(TINY), "system_definitions": {"local": system}}
    try:
        load_campaign(config)
    except ConfigError as exc:
        REJECTED["system"] += 1
        assert_clean_rejection(exc)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.text(max_size=200))
def test_arbitrary_text_as_campaign_file(tmp_path, text):
    path = tmp_path / "campaign.yaml"
    path.write_text(text)
    try:
        load_campaign_file(path)
    except ConfigError as exc:
        REJECTED["text"] += 1
        assert "\n" not in str(exc)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(mutated(LOCAL), st.booleans())
def test_malformed_system_files(tmp_path, monkeypatch, system, as_text):
    monkeypatch.setattr(systems, "SYSTEM_DIR", tmp_path)
    text = yaml.safe_dump(system) if not as_text else yaml.safe_dump(system)[: len(str(system)) // 2] + ": ["
    (tmp_path / "local.yaml").write_text(text)
    try:
        load_campaign(copy.deepcopy(TINY))
    except ConfigError as exc:
        assert "\n" not in str(exc) and "local" in str(exc)


def test_most_mutations_were_rejected():
    """The generators really produce bad input (this runs after the property tests)."""
    assert REJECTED["campaign"] > 100 and REJECTED["system"] > 50
