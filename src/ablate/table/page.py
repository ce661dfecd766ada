"""The Markdown table inside a page a person also writes (a study's reading, a paper repository's README):
`ablate table` owns only what lies between its two marker lines, so the text around the table survives every
re-render, and a page with no markers is never overwritten, since it may be all the author's."""

from __future__ import annotations

import re
from pathlib import Path

from ablate.files.atomic import replacing
from ablate.files.destination import refuse_link

BEGIN = "<!-- ablate table: begin -->"
END = "<!-- ablate table: end -->"
# Pages written before the markers existed are all table; their first line is the default title's start.
_UNMARKED_OUTPUT = "# Table 3 layout:"


def check(path: Path) -> None:
    """Fail now, naming the file and lines, if the table cannot be placed in `path`: before a long evaluation."""
    _splice(_read(path), "", path)


def write(path: Path, table: str) -> None:
    """Write `table` between the markers of the page at `path` (the whole page when new), keeping the rest;
    atomically, so an interrupt leaves the old page or the new one. A symlinked page is refused, naming it."""
    path, text = spliced(path, table)
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def spliced(path: Path, table: str) -> tuple[Path, str]:
    """The file to write (never through a symlink: ablate.files.destination) and the page's text with `table` in it;
    for a caller that writes it together with other files."""
    if any(line.strip() in (BEGIN, END) for line in table.splitlines()):
        raise ValueError(f"{path}: the table itself holds a marker line ({BEGIN} or {END}); choose another --title")
    refuse_link(path)
    return path, _splice(_read(path), table, path)


def awaiting(path: Path) -> bool:
    """Whether the page at `path` holds no table yet: missing, blank, or its markers with only blank lines between
    them (a place made for the table), so writing it loses nothing."""
    text = _read(path)
    if text is None:  # none, or blank: nothing there either
        return True
    lines = [line.strip() for line in re.split(r"(?<=\n)", text)]
    if lines.count(BEGIN) != 1 or lines.count(END) != 1 or lines.index(END) < lines.index(BEGIN):
        return False
    return not any(lines[lines.index(BEGIN) + 1 : lines.index(END)])


def _read(path: Path) -> str | None:
    """The page's text (a byte-order mark dropped), or None where there is none yet or it is blank."""
    if not path.exists():
        return None
    try:
        page = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}), so the table cannot be placed in it") from None
    return page if page.strip() else None


def _splice(page: str | None, table: str, path: Path) -> str:
    block = f"{BEGIN}\n{table.rstrip()}\n{END}\n"
    if page is None:
        return block
    lines = re.split(r"(?<=\n)", page)  # on "\n" only, as an editor numbers lines (str.splitlines also splits on \x0c...)
    begins = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if not begins and not ends:
        if page.startswith(_UNMARKED_OUTPUT):
            return block
        raise ValueError(
            f"{path} exists and has no '{BEGIN}' / '{END}' lines, so it may be your own text and is not overwritten: "
            "put the two lines where the table belongs (the text around them is kept), or choose another --out/--name"
        )
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        where = f"'{BEGIN}' on line(s) {_numbers(begins)}, '{END}' on line(s) {_numbers(ends)}"
        raise ValueError(f"{path}: the table goes between one '{BEGIN}' line and one '{END}' line after it; found {where}")
    return "".join(lines[: begins[0]]) + block + "".join(lines[ends[0] + 1 :])


def _numbers(indices: list[int]) -> str:
    return ", ".join(str(i + 1) for i in indices) or "none"
