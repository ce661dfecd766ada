"""The one "did you mean" hint."""

from ablate.messages.hints import did_you_mean


def test_close_name_gets_one_suggestion_in_one_format():
    assert did_you_mean("addtive", ["scaled_dot_product", "additive", "local"]) == " (did you mean 'additive'?)"


def test_nothing_close_gives_an_empty_hint():
    assert did_you_mean("zzz", ["relu", "gelu"]) == ""
    assert did_you_mean("relu", []) == ""


def test_cutoff_zero_always_suggests_the_closest():
    assert did_you_mean("train.heads", ["model.heads"]) == ""
    assert did_you_mean("train.heads", ["model.heads"], cutoff=0.0) == " (did you mean 'model.heads'?)"


def test_accepts_any_iterable_of_names():
    assert did_you_mean("rotory", {"rotary": 1, "alibi": 2}) == " (did you mean 'rotary'?)"
    assert did_you_mean("rotory", (n for n in ["rotary"])) == " (did you mean 'rotary'?)"
