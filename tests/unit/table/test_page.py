"""The Markdown page `ablate table` writes into: only the part between its markers is the table's; a page without
markers that ablate did not write is never overwritten; broken markers are an error naming the lines; an empty place
between the markers is filled, a table already there replaced only with --force."""

from __future__ import annotations

import pytest
from test_compare import write_runs

from ablate.cli import main
from ablate.table import page
from ablate.table.page import BEGIN, END


def test_a_new_page_is_the_table_between_markers(tmp_path):
    path = tmp_path / "t.md"
    page.write(path, "# Table\n\n| row |\n")
    assert path.read_text() == f"{BEGIN}\n# Table\n\n| row |\n{END}\n"


def test_the_text_around_the_markers_is_kept_and_the_table_replaced(tmp_path):
    path = tmp_path / "t.md"
    path.write_text(f"# My study\n\nWhat we found.\n\n{BEGIN}\nold table\n{END}\n\n## Reading\n\nIt holds.\n")
    page.write(path, "new table\n")
    assert path.read_text() == f"# My study\n\nWhat we found.\n\n{BEGIN}\nnew table\n{END}\n\n## Reading\n\nIt holds.\n"
    page.write(path, "newer table\n")  # and again: the same page with only the table changed
    assert path.read_text() == f"# My study\n\nWhat we found.\n\n{BEGIN}\nnewer table\n{END}\n\n## Reading\n\nIt holds.\n"


def test_a_page_without_markers_is_not_overwritten(tmp_path):
    path = tmp_path / "t.md"
    path.write_text("# My notes\n\nWeeks of writing.\n")
    with pytest.raises(ValueError, match=r"t\.md exists and has no .*not overwritten"):
        page.check(path)
    with pytest.raises(ValueError, match="not overwritten"):
        page.write(path, "table\n")
    assert path.read_text() == "# My notes\n\nWeeks of writing.\n"
    assert [p.name for p in tmp_path.iterdir()] == ["t.md"]  # no temporary left behind


def test_a_page_ablate_wrote_before_the_markers_is_replaced_whole(tmp_path):
    path = tmp_path / "t.md"
    path.write_text("# Table 3 layout: study, valid split (4 runs)\n\n| row |\n")
    page.write(path, "# Table 3 layout: study, valid split (5 runs)\n")
    assert path.read_text() == f"{BEGIN}\n# Table 3 layout: study, valid split (5 runs)\n{END}\n"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (f"a\n{BEGIN}\nb\n", "line(s) 2, .* line(s) none"),
        (f"{END}\nb\n{BEGIN}\n", "line(s) 3, .* line(s) 1"),
        (f"{BEGIN}\n{BEGIN}\nb\n{END}\n", "line(s) 1, 2, .* line(s) 4"),
    ],
)
def test_broken_markers_are_an_error_naming_their_lines(tmp_path, text, where):
    path = tmp_path / "t.md"
    path.write_text(text)
    with pytest.raises(
        ValueError, match=rf"t\.md: the table goes between .*found '{BEGIN}' on {where.replace('(', '[(]').replace(')', '[)]')}"
    ):
        page.write(path, "table\n")
    assert path.read_text() == text


def test_ablate_table_renders_into_a_written_page_and_refuses_an_unmarked_one(tmp_path, capsys):
    root = write_runs(tmp_path / "study")
    out = tmp_path / "docs"
    out.mkdir()
    (out / "study.md").write_text(f"# Our reading\n\nHeads matter.\n\n{BEGIN}\n{END}\n\nMore below.\n")
    assert main(["table", str(root), "--out", str(out), "--name", "study"]) == 0
    text = (out / "study.md").read_text()
    assert text.startswith(f"# Our reading\n\nHeads matter.\n\n{BEGIN}\n# Table 3 layout: study") and text.endswith(
        f"{END}\n\nMore below.\n"
    )
    assert "| A-h1 |" in text
    # Filling the empty place replaced nothing; a table that is there is replaced only when asked, the text kept.
    assert main(["table", str(root), "--out", str(out), "--name", "study", "--title", "Heads"]) == 2
    err = capsys.readouterr().err
    assert f"error: {out / 'study.md'}, " in err and "already there with other content and would be replaced" in err
    assert (out / "study.md").read_text() == text
    assert main(["table", str(root), "--out", str(out), "--name", "study", "--title", "Heads", "--force"]) == 0
    text = (out / "study.md").read_text()
    assert text.startswith(f"# Our reading\n\nHeads matter.\n\n{BEGIN}\n# Heads\n") and text.endswith(f"{END}\n\nMore below.\n")

    (out / "notes.md").write_text("mine\n")
    assert main(["table", str(root), "--out", str(out), "--name", "notes"]) == 2
    assert "notes.md exists and has no" in capsys.readouterr().err
    assert (out / "notes.md").read_text() == "mine\n" and not (out / "notes.csv").exists()  # refused before writing anything


@pytest.mark.parametrize(
    ("text", "awaiting"),
    [
        (None, True),
        ("\n \n", True),
        (f"# Mine\n{BEGIN}\n\n{END}\nmore\n", True),
        (f"# Mine\n{BEGIN}\n# a table\n{END}\n", False),
        ("# Mine\n", False),
        (f"{END}\n{BEGIN}\n", False),
    ],
)
def test_a_page_awaits_a_table_only_where_writing_it_loses_nothing(tmp_path, text, awaiting):
    path = tmp_path / "t.md"
    if text is not None:
        path.write_text(text)
    assert page.awaiting(path) is awaiting


def test_a_table_holding_a_marker_line_is_refused_so_the_next_render_still_finds_its_place(tmp_path):
    with pytest.raises(ValueError, match="the table itself holds a marker line"):
        page.write(tmp_path / "t.md", f"# title\n{END}\n")
    assert not (tmp_path / "t.md").exists()


def test_awkward_pages(tmp_path):
    """A byte-order mark, a blank page, a symlinked page, a line separator inside a line, bytes that are not UTF-8."""
    bom = tmp_path / "bom.md"
    bom.write_bytes(f"\ufeff{BEGIN}\nold\n{END}\nkept\n".encode())
    page.write(bom, "new\n")
    assert bom.read_text() == f"{BEGIN}\nnew\n{END}\nkept\n"

    blank = tmp_path / "blank.md"
    blank.write_text("\n  \n")
    page.write(blank, "new\n")
    assert blank.read_text() == f"{BEGIN}\nnew\n{END}\n"

    real = tmp_path / "real.md"
    real.write_text(f"intro\n{BEGIN}\n{END}\n")
    (tmp_path / "link.md").symlink_to(real)
    with pytest.raises(ValueError, match="link.md is a symbolic link"):  # issue 38: never written through a link
        page.write(tmp_path / "link.md", "new\n")
    assert (tmp_path / "link.md").is_symlink() and real.read_text() == f"intro\n{BEGIN}\n{END}\n"

    odd = tmp_path / "odd.md"
    odd.write_text(f"a\u2028b\n{BEGIN}\n{BEGIN}\n{END}\n")  # an editor shows BEGIN on lines 2 and 3
    with pytest.raises(ValueError, match=r"on line\(s\) 2, 3,"):
        page.check(odd)

    latin = tmp_path / "latin.md"
    latin.write_bytes("Gr\xfc\xdfe\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin\.md: not UTF-8 text"):
        page.check(latin)
    assert latin.read_bytes() == "Gr\xfc\xdfe\n".encode("latin-1")
