"""Nothing branches on a variant's name: outside the file that defines a registered class, no source file compares a
value with its registry key. Facts about a variant are its class attributes (see ablate.model.variants)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import ablate
from ablate.model import ATTENTION, POSITIONAL, SCALING

SRC = Path(ablate.__file__).parent


def _allowed_files() -> dict[str, set[Path]]:
    """Each registered key -> the files defining a class registered under it (the only places it may be compared)."""
    files: dict[str, set[Path]] = {}
    for registry in (ATTENTION, POSITIONAL, SCALING):
        for name, cls in registry.items():
            files.setdefault(name, set()).add(Path(inspect.getsourcefile(cls)).resolve())
    return files


def _strings(node: ast.expr) -> list[str]:
    """The str constants a comparison operand spells out: "x", or ("x", "y") / ["x"] / {"x"} for `in`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for item in node.elts for s in _strings(item)]
    return []


def name_comparisons(source: str, path: Path, allowed: dict[str, set[Path]]) -> list[str]:
    """ "file:line: ..." for each comparison in `source` (the text of `path`) with a variant name defined elsewhere."""
    hits = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                hits += [(node.lineno, s) for s in _strings(operand) if s in allowed and path.resolve() not in allowed[s]]
    return [f"{path.relative_to(SRC.parent)}:{line}: compares with variant name '{s}'" for line, s in sorted(hits)]


def test_no_source_file_branches_on_a_variant_name():
    allowed = _allowed_files()
    hits = [hit for path in sorted(SRC.rglob("*.py")) for hit in name_comparisons(path.read_text(encoding="utf-8"), path, allowed)]
    assert not hits, "branch on the variant's declared facts instead:\n" + "\n".join(hits)


def test_the_scan_finds_name_branches():
    source = (
        'def cap(m):\n'
        '    return m.max_positions if m.positional == "learned" else None\n'
        'fast = m.attention in ("linear", "local") or m.norm == "pre"\n'
    )  # fmt: skip
    hits = name_comparisons(source, SRC / "training" / "module.py", _allowed_files())
    assert hits == ["ablate/training/module.py:2: compares with variant name 'learned'",
                    "ablate/training/module.py:3: compares with variant name 'linear'",
                    "ablate/training/module.py:3: compares with variant name 'local'"]  # fmt: skip
    assert name_comparisons(source, SRC / "model" / "positional.py", _allowed_files())[0].endswith("'linear'")
