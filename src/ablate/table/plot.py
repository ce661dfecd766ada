"""`ablate table`'s figure: per group, our ΔBLEU against base with the interval its verdict rests on, beside the
paper's Δ."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from ablate.config.paper import BASE_VARIANTS
from ablate.table.compare import Table
from ablate.table.paired_bootstrap import SENTENCES_ONLY

CONTROLS = "controls: vs the base's\nruns of their seeds"  # `ablate.table.controls`: the base-... rows


def panels(table: Table) -> list[tuple[str, list[dict]]]:
    """(group, its rows' BLEU dicts with "row") in table order, one per group but the base's."""
    lines = [ln for ln in table.lines if not ln["diverged"]]  # no score to plot: the notes name them
    groups = [g for g in dict.fromkeys(ln["group"] for ln in lines) if g != "base"]
    return [(g, [ln["bleu"] | {"row": ln["row"]} for ln in lines if ln["group"] == g]) for g in groups]


def verdict_delta(m: dict) -> float | None:
    """The Δ the verdict reads: the paired test's (paired by schedule, over the base groups on the row's schedules
    only), else the Welch Δ over seeds."""
    return m["test_delta"] if m["test_low"] is not None else m["delta"]


def significant(m: dict, alpha: float) -> bool:
    """What '*' marks: p Holm <= alpha from a test that held seed noise (one seed a side holds sentence noise only)."""
    return m["p_holm"] is not None and m["p_holm"] <= alpha and m["seed_variance"] != SENTENCES_ONLY


def verdict_interval(m: dict) -> tuple[float, float] | None:
    """The paired test's 95% interval (seed and sentence noise: what the verdict reads), else the Welch interval over
    seeds (runs without per-sentence records), else none (one seed and no test)."""
    if m["test_low"] is not None:
        return m["test_low"], m["test_high"]
    if m["delta_low"] is not None:
        return m["delta_low"], m["delta_high"]
    return None


def plot(table: Table, path: Path, title: str) -> None:
    import matplotlib.pyplot as plt

    fig = figure(table, title)
    fig.savefig(path, dpi=120, format="png")  # the path may be a temporary's, without the suffix
    plt.close(fig)


def figure(table: Table, title: str):
    """One panel per group: our ΔBLEU (bar with its 95% interval; '*' where p Holm <= alpha from a test with seed
    noise; hatched and without an error bar where there is no interval) beside the paper's Δ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = panels(table)
    alpha = table.summary["bootstrap"]["alpha"]
    fig, axes = plt.subplots(1, max(len(shown), 1), figsize=(3.2 * max(len(shown), 1), 3.6), squeeze=False)
    for ax, (g, lines) in zip(axes[0], shown):
        xs = [x - 0.2 for x in range(len(lines))]
        ours = [math.nan if verdict_delta(m) is None else verdict_delta(m) for m in lines]
        spans = [verdict_interval(m) for m in lines]
        bars = ax.bar(xs, ours, width=0.4, label="ours (95% CI)", color="tab:blue")
        for x, d, span, bar, m in zip(xs, ours, spans, bars, lines):
            if span is None:  # one seed or no spread, no test: a point estimate, not an exact value
                bar.set(hatch="//", facecolor="white", edgecolor="tab:blue")
                continue
            if math.isnan(d):
                continue
            ax.errorbar(x, d, yerr=[[max(0.0, d - span[0])], [max(0.0, span[1] - d)]], fmt="none", ecolor="black", capsize=3, lw=1)
            if significant(m, alpha):
                up = d >= 0
                ax.annotate(
                    "*", (x, span[1] if up else span[0]), xytext=(0, 2 if up else -3), textcoords="offset points",
                    ha="center", va="bottom" if up else "top",
                )  # fmt: skip
        paper = [math.nan if m["paper_delta"] is None else m["paper_delta"] for m in lines]
        ax.bar([x + 0.4 for x in xs], paper, width=0.4, label="paper", color="tab:gray")
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xticks([x + 0.2 for x in xs], [m["row"] for m in lines], rotation=45, ha="right", fontsize=8)
        ax.set_title(f"({g})" if len(g) == 1 else CONTROLS if g == BASE_VARIANTS else g)
        ax.margins(y=0.1)  # room for a '*' beyond a whisker
    axes[0][0].set_ylabel("ΔBLEU vs base")
    if shown:
        axes[0][0].legend(fontsize=8)
    else:  # a study of the base row alone (e.g. still running): nothing to compare yet
        axes[0][0].text(0.5, 0.5, "no row besides base", ha="center", va="center", transform=axes[0][0].transAxes)
    s = table.summary
    where = f"{s['dataset']} {s['split']}" if s.get("dataset") else f"{s['split']} split"
    fig.suptitle(f"{title}\n{where}, {s['sentences'] or 'unrecorded number of'} sentences", fontsize=9)
    legend = (
        f"Error bars: the paired test's 95% interval (the Welch interval over seeds where a row has no test); "
        f"*: p Holm <= {alpha} (with seed noise in the test); hatched: "
        + (
            "one seed (or member group) or no spread"
            if any(ln["seeds"] > 1 and verdict_interval(ln["bleu"]) is None for ln in table.lines if ln["row"] != "base")
            else "one seed"
        )
        + " and no test, no interval."
    )
    fig.text(0.5, 0.01, textwrap.fill(legend, int(50 * fig.get_figwidth() / 3.2)), ha="center", va="bottom", fontsize=7)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig
