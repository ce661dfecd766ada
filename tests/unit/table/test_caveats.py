"""The caveats under a table (`ablate.table.caveats`): runs left out with why, and rows a limit stopped before their
convergence rule was met, with how much they were still improving."""

from __future__ import annotations

from types import SimpleNamespace

from ablate.table.caveats import capped, member_groups, skipped_runs


def test_every_run_left_out_is_named_with_why():
    assert skipped_runs({}) == []
    assert skipped_runs({"run-a": "no summary"}) == ["Left out 1 W&B run: run-a (no summary)."]
    assert skipped_runs({"a": "crashed", "b": "NaN loss"}) == ["Left out 2 W&B runs: a (crashed); b (NaN loss)."]


def run(window, stop, improving):
    return SimpleNamespace(config={"train.converge_window": window}, stop_reason=stop, improving=improving)


def test_rows_a_limit_stopped_before_the_rule_converged_them_are_named():
    rows = [
        SimpleNamespace(name="base", runs=[run(0.2, "converged", None), run(0.2, "converged", None)]),
        SimpleNamespace(name="D-drop0.2", runs=[run(0.2, "max_steps", 0.029), run(0.2, "max_steps", 0.036), run(0.2, "converged", None)]),
        SimpleNamespace(name="A-h1", runs=[run(0, "max_steps", 0.5)]),  # no rule: a limit is how it was meant to stop
    ]
    (note,) = capped(rows)
    assert "D-drop0.2 (2 of 3 runs, by max_steps; val/ppl still 2.9-3.6% better over the rule's window)" in note
    assert "base" not in note and "A-h1" not in note


def member(size, group):
    return SimpleNamespace(config={"members.size": size, "members.group": group})


def test_rows_with_seeds_trained_as_members_are_named_with_their_groups():
    rows = [
        SimpleNamespace(name="base", runs=[member(4, "g/base-1")] * 4),
        SimpleNamespace(
            name="A-h1", runs=[member(2, "g/a-1"), member(2, "g/a-1"), member(2, "g/a-3"), member(2, "g/a-3"), member(1, None)]
        ),
        SimpleNamespace(name="C-N2", runs=[member(1, None), SimpleNamespace(config={})]),  # runs: not named
    ]
    assert member_groups(rows) == ["base (4 of 4 seeds in 1 group)", "A-h1 (4 of 5 seeds in 2 groups)"]
