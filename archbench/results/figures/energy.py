"""Throughput against energy per image: one point per training configuration and energy
source, img/s (the campaign's statistic, error bars min to max) over J/img, a panel per
system, device and model, a colour and marker per source (what it covers), each point
named by what varies between the configurations (in panels of a dozen points or fewer). Numbers come from the table ``energy``."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from archbench.results.figures.labels import label, varying
from archbench.results.figures.style import MARKERS, grid, no_data, palette, shared_legend, style, value_label
from archbench.results.tables.energy import GROUP, energy as energy_table
from archbench.workloads.energy import KEYS

PANELS = ["system", "device", "model"]
NAMED_POINTS = 12  # a panel with more points names none (the energy table names them all)
NAME = "Throughput against energy per image"


def energy(summary: pd.DataFrame) -> Figure:
    """img/s against J/img per configuration and energy source (table ``energy``); a
    figure saying so when no configuration's energy was measured."""
    table = energy_table(summary)
    points = table[table["status"].eq("measured").fillna(False).astype(bool)]
    if points.empty:
        return no_data(NAME)
    points = points.assign(sensor=points["source"] + " " + points["covers"])
    named = varying(points, [c for c in GROUP if c not in PANELS], PANELS)
    points = points.assign(configuration=label(points, named or ["model"]))
    sensors = [f"{s} {c}" for s, c in KEYS if f"{s} {c}" in set(points["sensor"])]
    colours = dict(zip(sensors, palette(len(sensors))))
    markers = dict(zip(sensors, MARKERS))
    with style():
        figure, panels = grid(points, PANELS)
        for panel in panels:
            ax = panel.ax
            for sensor, part in panel.rows.groupby("sensor", sort=False):
                low = (part["img_s"] - part["img_s_min"]).clip(lower=0)
                high = (part["img_s_max"] - part["img_s"]).clip(lower=0)
                ax.errorbar(part["j_per_img"], part["img_s"], yerr=[low, high], fmt="none",
                            ecolor=colours[sensor], capsize=2)
                ax.plot(part["j_per_img"], part["img_s"], marker=markers[sensor], linestyle="none",
                        color=colours[sensor], label=sensor)
                for _, row in part.iterrows() if len(panel.rows) <= NAMED_POINTS else ():
                    ax.annotate(row["configuration"], (row["j_per_img"], row["img_s"]), fontsize=6,
                                xytext=(3, 3), textcoords="offset points")
            ax.set_xlabel("J/img (energy over the window / its images)")
            ax.set_ylabel(value_label(table, summary))
            ax.set_xlim(left=0)
            ax.set_ylim(bottom=0)
        shared_legend(figure, [p.ax for p in panels])
        figure.suptitle(NAME)
    return figure
