"""The words `ablate table`'s notes share (`ablate.table.wording`)."""

from __future__ import annotations

import pytest

from ablate.table.wording import count, p_words


@pytest.mark.parametrize(
    "p, words", [(0.0342, "p 0.034"), (0.001, "p 0.001"), (0.00099, "p < 0.001"), (0.0, "p < 0.001"), (1.0, "p 1.000")]
)
def test_p_values_read_to_three_places_and_never_as_zero(p, words):
    assert p_words(p) == words


@pytest.mark.parametrize("n, words", [(0, "0 runs"), (1, "1 run"), (2, "2 runs")])
def test_a_counted_noun_is_plural_unless_one(n, words):
    assert count(n, "run") == words
