"""The paper's Table 3 rows, and when a row named as one of them is that row (`ablate.config.paper.unlike`)."""

from __future__ import annotations

import pytest

from ablate.config.paper import TABLE3, unlike

PAPER = {p.name: p for p in TABLE3}


@pytest.mark.parametrize(
    "row, changed",
    [
        ("A-h1", {"model.heads", "model.d_k", "model.d_v"}),  # the paper's keys, at any scale of their values
        ("B-dk16", {"model.d_k"}),
        ("E-learned", {"model.positional"}),
        ("big", {"model.d_model", "model.d_ff", "model.heads", "model.dropout", "model.d_k", "train.max_steps"}),  # d_k follows
        ("big", {"model.d_model", "model.d_ff", "model.heads", "model.dropout", "train.final_average"}),  # its last-20 average
        ("C-d256", {"model.d_model"}),  # d_k and d_v following d_model
        ("D-ls0.0", {"train.label_smoothing", "train.converge_window", "train.val_every_steps"}),  # trained to another basis
    ],
)
def test_a_row_that_changes_what_the_paper_row_changes_is_that_row(row, changed):
    assert unlike(PAPER[row], changed) is None


@pytest.mark.parametrize(
    "row, changed, why",
    [
        ("A-h1", {"model.attention"}, "changes model.attention, which the paper's A-h1 does not"),
        (
            "A-h1",
            {"model.heads", "model.attention", "train.lr_scale"},
            "changes model.attention, train.lr_scale, which the paper's A-h1 does not",
        ),
        ("B-dk16", {"model.d_v"}, "changes model.d_v, which the paper's B-dk16 does not"),  # d_k alone: d_v is no free ride
        ("B-dk16", set(), "leaves model.d_k as the base has it, which the paper's B-dk16 changes"),
        ("D-ls0.2", {"train.max_steps"}, "leaves train.label_smoothing as the base has it, which the paper's D-ls0.2 changes"),
        ("A-h4", {"model.d_k", "model.d_v"}, "leaves model.heads as the base has it, which the paper's A-h4 changes"),  # a 4-head base
        ("big", {"model.dropout"}, "leaves model.d_model, model.d_ff, model.heads as the base has it, which the paper's big changes"),
        ("C-N2", {"model.enc_layers"}, "leaves model.dec_layers as the base has it, which the paper's C-N2 changes"),
    ],
)
def test_a_row_named_as_a_paper_row_that_varies_something_else_is_not_that_row(row, changed, why):
    """A variant of one's own given a paper row's name (cosine attention as `A-h1`) was set beside the paper's A-h1."""
    assert unlike(PAPER[row], changed) == why
