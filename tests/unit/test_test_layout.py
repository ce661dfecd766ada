"""The tests mirror the package (docs/development.md, "Tests"): tests/unit/PACKAGE/ holds the tests of
src/ablate/PACKAGE/, and every module under src/ablate/ is imported by at least one test file, by its own name or
through a name its package re-exports from it. A module reached only through others (a command's parser, a callback
inside a trial) is listed in COVERED_END_TO_END with the tests that reach it; an entry that stops being true fails."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC, TESTS = ROOT / "src", ROOT / "tests"
MODULES = {".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): p for p in SRC.rglob("*.py")}

# module -> why no test imports it and which tests reach it. Each must exist, be imported by no test, and name tests
# that exist: write a test of the module and the entry must go.
COVERED_END_TO_END = {
    "ablate.archive.flags": "the `ablate archive` parser: through ablate.cli.main in tests/unit/test_cli.py and tests/unit/archive/test_archive.py",
    "ablate.inference.flags": "the `ablate translate`/`evaluate` parsers: through ablate.cli.main in tests/unit/test_cli.py and tests/faults/test_damaged_checkpoint.py",
    "ablate.inference.commands": "`ablate translate`/`evaluate`'s bodies, whose interface is the command line: tests/unit/test_cli.py and tests/faults/test_damaged_checkpoint.py",
    "ablate.sweep.flags": "the `ablate sweep`/`status` parsers: through ablate.cli.main in tests/unit/test_cli.py and tests/unit/sweep/test_status.py",
    "ablate.table.flags": "the `ablate table` parser: through ablate.cli.main in tests/unit/test_cli.py and tests/unit/table/test_table_command.py",
    "ablate.training.flags": "the `ablate average` parser: through ablate.cli.main in tests/unit/test_cli.py and tests/unit/training/test_checkpoint.py",
    "ablate.table.commands": "`ablate table`'s body, whose interface is the command line: tests/unit/table/test_table_command.py",
    "ablate.sweep.status": "`ablate status`, whose interface is the command line: tests/unit/sweep/test_status.py",
    "ablate.table.latex": "`ablate table`'s .tex: tests/unit/table/test_compare.py (test_cli_writes_markdown_latex_csv_json_and_plot)",
    "ablate.archive.commands": "`ablate archive`'s body, whose interface is the command line: tests/unit/archive/test_archive.py",
}


def reexports(package: str) -> dict[str, str]:
    """Name -> the module a package's __init__ takes it from (`from ablate.config import compose` counts for
    ablate.config.compose)."""
    path = MODULES.get(package)
    if path is None or path.name != "__init__.py":
        return {}
    return {
        a.asname or a.name: node.module
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ImportFrom) and node.module in MODULES
        for a in node.names
    }


def imported_by(test_file: Path) -> set[str]:
    """The ablate modules a test file imports by name (anywhere in it, functions included), with their parent packages
    (importing ablate.sweep.plan imports ablate.sweep) and the modules of the names it takes from a package."""
    found = set()
    for node in ast.walk(ast.parse(test_file.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            names += [m for a in node.names if (m := reexports(node.module).get(a.name))]
        else:
            continue
        for name in names:
            while name:
                if name in MODULES:
                    found.add(name)
                name = name.rpartition(".")[0]
    return found


TEST_FILES = sorted(TESTS.rglob("*.py"))
IMPORTED = {t: imported_by(t) for t in TEST_FILES}


def test_every_module_is_imported_by_a_test():
    anywhere = set().union(*IMPORTED.values())
    missing = sorted(set(MODULES) - anywhere - set(COVERED_END_TO_END))
    assert not missing, f"no test imports these modules: write a test of each (tests/unit/PACKAGE/test_MODULE.py): {missing}"


def test_each_end_to_end_entry_is_still_needed_and_names_tests_that_exist():
    anywhere = set().union(*IMPORTED.values())
    assert not set(COVERED_END_TO_END) - set(MODULES), "entries for modules that are gone"
    assert not set(COVERED_END_TO_END) & anywhere, (
        f"now imported by a test, so drop the entry: {sorted(set(COVERED_END_TO_END) & anywhere)}"
    )
    for module, why in COVERED_END_TO_END.items():
        named = [w.strip("(),;") for w in why.split() if w.startswith("tests/")]
        assert named and all((ROOT / n).is_file() for n in named), f"{module}: names no test file that exists: {why}"


def test_unit_test_folders_mirror_the_packages():
    packages = {p.parent.name for p in SRC.glob("ablate/*/__init__.py")}
    folders = {d.name for d in (TESTS / "unit").iterdir() if d.is_dir() and d.name != "__pycache__"}
    assert folders == packages, (
        f"tests/unit/ folders without a package: {sorted(folders - packages)}; packages without a folder: {sorted(packages - folders)}"
    )
    for folder in folders:  # a test in tests/unit/sweep/ tests the sweep: it imports it, or runs its commands
        for test in sorted((TESTS / "unit" / folder).glob("test_*.py")):
            ours = any(m == f"ablate.{folder}" or m.startswith(f"ablate.{folder}.") for m in IMPORTED[test])
            assert ours or "ablate.cli" in IMPORTED[test], (
                f"{test.relative_to(ROOT)} imports nothing of ablate.{folder} and runs no command"
            )


def test_the_scan_sees_imports_by_name_in_functions_and_through_packages():
    """The checks are only as good as the scan."""
    unit = TESTS / "unit"
    assert "ablate.sweep.plan" in IMPORTED[unit / "sweep" / "test_plan.py"]
    assert "ablate.table.controls" in IMPORTED[unit / "table" / "test_controls.py"]  # inside a test function
    assert "ablate.config.compose" in reexports("ablate.config").values()
    assert "ablate.sweep.status" not in set().union(*IMPORTED.values())  # reached through the command line alone


def test_every_test_file_has_a_name_of_its_own():
    """pytest imports test files by their base name (its default `prepend` import mode): a second file of one name
    anywhere under tests/ fails to collect, in whichever run meets both."""
    names = [p.name for p in TESTS.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_the_development_guide_layout_names_every_module():
    # docs/development.md's layout says it lists every file: each module's name appears in its package's block.
    text = (ROOT / "docs" / "development.md").read_text()
    layout = text[text.index("```\nsrc/ablate/cli.py") : text.index("experiments/ ")]
    blocks: dict[str, str] = {}
    for part in layout.split("\nsrc/ablate/")[1:]:
        head = part.split(" ", 1)[0]  # "run/" opens a package's block; "cli.py" is a top-level module's line
        package = head.removesuffix("/") if head.endswith("/") else ""
        blocks[package] = blocks.get(package, "") + part
    missing = []
    for path in MODULES.values():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        package = "/".join(path.relative_to(SRC / "ablate").parts[:-1])
        if path.name not in blocks.get(package, ""):
            missing.append(str(path.relative_to(SRC)))
    assert not missing, f"docs/development.md's layout leaves out: {', '.join(sorted(missing))}"
