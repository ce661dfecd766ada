"""The table's renderings: Markdown, CSV, LaTeX and the JSON they are made from."""


def test_the_json_floats_are_steady_across_cpus():
    """The committed table's JSON re-rendered on another CPU differed in the last bit of a fit's slope."""
    from ablate.table.render import steady

    report = {"slope": 1.268706533304371, "rows": [{"p": (0.1 + 0.2, 3)}], "inf": float("inf"), "n": 7, "s": "x"}
    assert (
        steady(report)
        == steady({**report, "slope": 1.2687065333043708})
        == {
            "slope": 1.26870653330,
            "rows": [{"p": [0.3, 3]}],
            "inf": float("inf"),
            "n": 7,
            "s": "x",
        }
    )
