"""The framework comparison reads the framework registry: any registered framework is
compared against its experiment's base (``framework_base``, TensorFlow by default), with
the ratio computed from the records' throughputs; the base a campaign names is honoured;
a base the campaign cannot compare against is refused when it is planned, in one line."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from fabricated import framework_speed
from test_compare import configuration, run_record
from test_experiments import expand

from archbench.core.fields import config_id
from archbench.plan.campaign import ConfigError
from archbench.plan.containers import pinned_names, version_labels
from archbench.results import artifacts
from archbench.results.collect import records_to_frame
from archbench.results.figures import build_figure
from archbench.results.tables import build_table
from archbench.workloads.training import frameworks

# img/s of the three repetitions of one configuration in each framework
THROUGHPUTS = {"tensorflow": (10.0, 11.0, 12.0), "pytorch": (8.0, 9.0, 10.0),
               "jax": (20.0, 22.0, 24.0)}


@pytest.fixture
def third(monkeypatch) -> str:
    """A throwaway third framework, "jax" (short label JX, its own setting ``jit_cache``)."""
    entry = dataclasses.replace(frameworks.FRAMEWORKS["pytorch"], label="JAX", short_label="JX",
                                tuning=("jit_cache",), pins=("jax", "jaxlib"),
                                module="jax", distributions=("jax",))
    monkeypatch.setitem(frameworks.FRAMEWORKS, "jax", entry)
    return "jax"


def records(names=tuple(THROUGHPUTS), experiment: str = "threads") -> list[dict]:
    """Three repetitions of one configuration in each framework of ``names``, as records."""
    out = []
    for name in names:
        conf = {**configuration(experiment=experiment), "framework": name}
        conf["config_id"] = config_id(conf)
        out += [run_record(conf, rep, value) for rep, value in enumerate(THROUGHPUTS[name])]
    return out


def mean(name: str) -> float:
    return sum(THROUGHPUTS[name]) / len(THROUGHPUTS[name])


def test_a_third_registered_framework_is_compared_against_the_base(third):
    table = build_table("framework_comparison", records_to_frame(records()))
    assert list(table["framework"]) == ["pytorch", "jax"]  # the registry's order
    assert set(table["base"]) == {"tensorflow"}
    jax = table[table["framework"].eq("jax")].iloc[0]
    assert jax["ratio"] == pytest.approx(mean("jax") / mean("tensorflow"))  # 22 / 11
    assert (jax["img_s_tensorflow"], jax["img_s_jax"], jax["n_jax"]) == (11.0, 22.0, 3)
    assert pd.isna(jax["img_s_pytorch"]) and jax["status"] == "ok"
    assert jax["ratio_ci95_low"] < 2.0 < jax["ratio_ci95_high"]
    pytorch = table[table["framework"].eq("pytorch")].iloc[0]
    assert pytorch["ratio"] == pytest.approx(9.0 / 11.0) and pd.isna(pytorch["img_s_jax"])
    assert "jit_cache" in table and "loader_workers" in table  # each framework's own setting
    headers = artifacts.display_frame(table).columns
    assert {"TF img/s", "PT img/s", "JX img/s", "JX CV"} <= set(headers)


def test_the_base_a_campaign_names_is_honoured(third):
    config = {"experiments": {"threads": {"type": "thread_scaling", "framework_base": "pytorch"},
                              "other": {"type": "thread_scaling"}}}
    bases = artifacts.framework_bases(config)
    assert bases == {"threads": "pytorch"}
    df = records_to_frame(records() + records(experiment="other"))
    table = build_table("framework_comparison", df, framework_bases=bases)
    pairs = {(e, f, b): r for e, f, b, r in
             zip(table["experiment"], table["framework"], table["base"], table["ratio"])}
    assert set(pairs) == {("threads", "tensorflow", "pytorch"), ("threads", "jax", "pytorch"),
                          ("other", "pytorch", "tensorflow"), ("other", "jax", "tensorflow")}
    assert pairs["threads", "tensorflow", "pytorch"] == pytest.approx(11.0 / 9.0)
    assert pairs["threads", "jax", "pytorch"] == pytest.approx(22.0 / 9.0)
    assert pairs["other", "jax", "tensorflow"] == pytest.approx(2.0)
    # the campaign's defaults name it for every experiment that does not name its own
    assert artifacts.framework_bases({"defaults": {"framework_base": "jax"}, **config}) == {
        "threads": "pytorch", "other": "jax"}


def test_the_figure_draws_the_base_once_and_each_framework_against_it(third):
    figure = build_figure("framework_comparison", records_to_frame(records()))
    (ax,) = [ax for ax in figure.axes if ax.get_visible()]
    bars = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers
            if c.get_label() in ("TensorFlow", "PyTorch", "JAX")}
    assert bars == {"TensorFlow": [11.0], "PyTorch": [9.0], "JAX": [22.0]}
    shown = [t.get_text() for a in figure.axes for t in a.texts]
    assert "2.00x" in shown and "0.82x" in shown


def test_the_registry_names_the_pins_and_speeds_of_any_framework(third):
    assert pinned_names()[-3:] == ("jax", "jaxlib", "horovod")
    labels = version_labels()
    assert labels["jax"] == ("jax",) and labels["jaxlib"] == ("jaxlib",)
    assert labels["tensorflow"] == ("tensorflow", "tensorflow-cpu") and labels["torch"] == ("torch",)
    assert framework_speed("jax") == 1.0 and framework_speed("pytorch") == 0.8


@pytest.mark.parametrize("experiment, message", [
    ({"framework": ["tensorflow", "pytorch"], "framework_base": "jaxx"}, "framework_base"),
    ({"framework": ["tensorflow"], "framework_base": "pytorch"},
     "experiments.e.framework_base: pytorch is not in framework (tensorflow)"),
])
def test_a_base_the_campaign_cannot_compare_against_is_refused(experiment, message):
    experiment = {"type": "thread_scaling", "models": ["alexnet"], "batch_per_process": [8],
                  "threads": [1], **experiment}
    with pytest.raises(ConfigError) as info:
        expand(experiment)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_named_base_in_the_framework_axis_is_planned():
    ms = expand({"type": "thread_scaling", "models": ["alexnet"], "batch_per_process": [8],
                 "threads": [1], "framework": ["tensorflow", "pytorch"], "framework_base": "pytorch"})
    assert {m["framework"] for m in ms} == {"tensorflow", "pytorch"}
