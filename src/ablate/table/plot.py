"""`ablate table`'s figure: per group, our ΔBLEU against base with its 95% interval beside the paper's Δ."""

from __future__ import annotations

import math
from pathlib import Path

from ablate.table.compare import Table


def plot(table: Table, path: Path, title: str) -> None:
    """One panel per group: our ΔBLEU (bar, error bar = its Welch 95% interval over seeds) beside the paper's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [g for g in dict.fromkeys(ln["group"] for ln in table.lines) if g != "base"]
    fig, axes = plt.subplots(1, max(len(groups), 1), figsize=(3.2 * max(len(groups), 1), 3.4), squeeze=False)
    for ax, g in zip(axes[0], groups):
        lines = [ln["bleu"] | {"row": ln["row"]} for ln in table.lines if ln["group"] == g]
        xs = range(len(lines))
        ours = [math.nan if m["delta"] is None else m["delta"] for m in lines]
        err = [
            [0.0 if m["delta_low"] is None else m["delta"] - m["delta_low"] for m in lines],
            [0.0 if m["delta_high"] is None else m["delta_high"] - m["delta"] for m in lines],
        ]
        paper = [math.nan if m["paper_delta"] is None else m["paper_delta"] for m in lines]
        ax.bar([x - 0.2 for x in xs], ours, width=0.4, yerr=err, capsize=3, label="ours (95% CI)", color="tab:blue")
        ax.bar([x + 0.2 for x in xs], paper, width=0.4, label="paper", color="tab:gray")
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_xticks(list(xs), [m["row"] for m in lines], rotation=45, ha="right", fontsize=8)
        ax.set_title(f"({g})" if len(g) == 1 else g)
    axes[0][0].set_ylabel("ΔBLEU vs base")
    if groups:
        axes[0][0].legend(fontsize=8)
    else:  # a study of the base row alone (e.g. still running): nothing to compare yet
        axes[0][0].text(0.5, 0.5, "no row besides base", ha="center", va="center", transform=axes[0][0].transAxes)
    s = table.summary
    fig.suptitle(f"{title}\n{s['split']} split, {s['sentences'] or 'unrecorded number of'} sentences", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
