"""The artifact maps (docs/studies/<study>.md) against their campaigns, so a map cannot go
stale silently: every experiment a map's tables name is one its campaign runs (or a
system it runs on), and every experiment the campaign runs is named; every `key: value`
a map states is set so by the campaign, its systems or its measurements; the counts a map
and the studies' README state are the campaign's."""

from __future__ import annotations

import fnmatch
import re
from collections import Counter

import pytest
import yaml
from conftest import REPO

from archbench.plan.campaign import load_campaign_file
from archbench.plan.systems import resolve_system

STUDIES = ("bsc-2019", "cesga-2018", "cscs-2017", "kth-ornl-2019", "osu-2019")
CODE = re.compile(r"`([^`\n]+)`")
SETTING = re.compile(r"([a-z_]+): (.+)")
COUNTS = re.compile(r"\(([\d,]+) measurements: (\d+) configurations x (\d+)\s")


@pytest.fixture(scope="module", params=STUDIES)
def study(request):
    campaign = load_campaign_file(REPO / "config" / "campaigns" / f"{request.param}.yaml")
    text = (REPO / "docs" / "studies" / f"{request.param}.md").read_text()
    return request.param, campaign, text


def tables(text: str) -> list[list[list[str]]]:
    """The Markdown tables of ``text``: rows of cells, the header first, no rule row."""
    found, rows = [], []
    for line in [*text.split("\n"), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
        elif rows:
            found.append(rows)
            rows = []
    return found


def column(text: str, word: str) -> list[tuple[list[str], str]]:
    """(row, cell) of every table column whose header names ``word``."""
    out = []
    for table in tables(text):
        for i, head in enumerate(table[0]):
            if word in head.lower():
                out += [(row, row[i]) for row in table[1:]]
    return out


def experiments_named(text: str) -> list[str]:
    return [name for _, cell in column(text, "experiment") for name in CODE.findall(cell)]


def test_every_experiment_a_map_names_is_run(study):
    name, campaign, text = study
    experiments = {m["experiment"] for m in campaign.measurements}
    systems = {m["system"] for m in campaign.measurements}
    named = experiments_named(text)
    assert named, name
    for token in named:
        assert token in systems or fnmatch.filter(experiments, token), (name, token)


def test_every_experiment_the_campaign_runs_is_in_its_map(study):
    name, campaign, text = study
    named = experiments_named(text)
    for experiment in {m["experiment"] for m in campaign.measurements}:
        assert any(fnmatch.fnmatch(experiment, token) for token in named), (name, experiment)


def settings(campaign) -> dict[str, list]:
    """Every value each key takes: in the campaign file (any depth), its systems' files
    and its measurements."""
    values: dict[str, list] = {}

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                values.setdefault(str(key), []).append(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(campaign.config)
    walk([resolve_system(s, None, REPO / "config" / "systems") for s in campaign.config["systems"]])
    walk(campaign.measurements)
    return values


def agrees(stated: object, value: object) -> bool:
    """A map's value is the campaign's, or one of its list's."""
    return stated == value or (isinstance(value, list) and stated in value)


def test_every_setting_a_map_states_is_the_campaigns(study):
    name, campaign, text = study
    known = settings(campaign)
    stated = [SETTING.fullmatch(code) for code in CODE.findall(text)]
    stated = [m for m in stated if m]
    assert stated or name == "bsc-2019"  # BSC's map states no setting as `key: value`
    for match in stated:
        key, value = match.group(1), yaml.safe_load(match.group(2))
        assert key in known, (name, key)
        assert any(agrees(value, v) for v in known[key]), (name, key, value)


def test_the_counts_a_map_states_are_the_campaigns(study):
    name, campaign, text = study
    measurements, configurations, repetitions = (
        int(n.replace(",", "")) for n in COUNTS.search(text).groups())
    assert measurements == len(campaign.measurements)
    assert configurations == sum(m["repetition"] == 0 for m in campaign.measurements)
    assert repetitions == campaign.config["defaults"]["repetitions"]
    per_experiment = Counter(m["experiment"] for m in campaign.measurements if m["repetition"] == 0)
    for row, cell in column(text, "configurations"):
        (experiment,) = CODE.findall(row[0])
        assert int(cell) == per_experiment[experiment], (name, experiment)


def test_the_studies_readme_counts_each_campaign():
    rows = [r for t in tables((REPO / "docs" / "studies" / "README.md").read_text())
            for r in t[1:] if ".md](" in r[1]]
    assert len(rows) == len(STUDIES)
    for row in rows:
        study = re.search(r"\(([^)]+)\.md\)", row[1]).group(1)
        campaign = load_campaign_file(REPO / "config" / "campaigns" / f"{study}.yaml")
        assert int(row[2]) == len(campaign.measurements), study


def test_published_files_a_map_cites_exist_and_the_campaign_imports_its_claims(study):
    name, campaign, text = study
    cited = {c for c in CODE.findall(text) if c.startswith("data/published/") and c.endswith(".csv")}
    for path in cited:
        assert (REPO / path).is_file(), (name, path)
    claims = [p for p in campaign.config["imports"] if p.endswith("-claims.csv")]
    assert claims == [f"data/published/{name}/{name}-claims.csv"]


# settings a map must state, as `key: value`, because the paper's result depends on them
STATED = {"cesga-2018": ("variable_update", "ps_placement", "ps_variable_placement"),
          "cscs-2017": ("ps_placement", "ps_variable_placement")}


@pytest.mark.parametrize("name", sorted(STATED))
def test_maps_state_how_the_parameter_servers_run(name):
    """CESGA 2018 Table 3 (synchronous, the PS on a node of its own) and CSCS 2017
    (PSs beside the workers, variables placed greedily): the map says so in the
    campaign's own keys, which the test above holds to the campaign's values."""
    text = (REPO / "docs" / "studies" / f"{name}.md").read_text()
    keys = {m.group(1) for m in map(SETTING.fullmatch, CODE.findall(text)) if m}
    assert set(STATED[name]) <= keys
