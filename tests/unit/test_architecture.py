"""The package's shape: no import cycles (imports inside functions count), dependencies that flow one way, down the
floors of LAYERS (a run never imports the sweep; config imports no model), and no source file, in src/ or
benchmarks/, over 300 lines."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
MODULES = {".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): p for p in SRC.rglob("*.py")}


def imports(module: str) -> set[str]:
    """Every ablate module `module` imports, wherever the import statement sits (functions and `if TYPE_CHECKING:`
    blocks included: an import for annotations alone is a dependency too, and once closed a hidden circle)."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:  # `from ablate.x import f`: f is not a module, ablate.x is
                name = name.rpartition(".")[0]
            if name.startswith("ablate") and name != module and not module.startswith(name + "."):
                found.add(name)  # a module's own parent packages are not a dependency it chose
    return found


GRAPH = {m: imports(m) for m in MODULES}


def test_there_are_no_import_cycles():
    cycles, state = [], {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = "open"
        for n in sorted(GRAPH[m]):
            if state.get(n) == "open":
                cycles.append(path[path.index(n) :] + [n])
            elif n not in state:
                visit(n, path + [n])
        state[m] = "done"

    for m in sorted(GRAPH):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


@functools.cache
def reachable(start: str) -> frozenset[str]:
    seen, todo = set(), [start]
    while todo:
        for n in GRAPH[todo.pop()] - seen:
            seen.add(n)
            todo.append(n)
    return frozenset(seen)


# The floors, top first: each package may import only those below it. Evaluation (decoding, sentence scores, BLEU)
# is below training, which validates with it; the user's decode commands (inference) are above training, whose
# checkpoints they load; experiment (compose, import plugins, validate) is below everything that runs one; config is
# the ground floor above files and messages: it asks no registry, imports no plugin, builds no model.
LAYERS = ["__main__", "cli", "archive", "table", "sweep", "run", "inference", "training", "experiment", "evaluation", "data",
          "plugins", "model", "registry", "config", "files", "messages"]  # fmt: skip


def test_the_floors_name_every_package():
    assert {m.split(".")[1] for m in MODULES if m != "ablate"} == set(LAYERS)


def test_the_developers_guide_gives_the_floors_in_this_order():
    """docs/development.md gave evaluation above experiment and left out plugins and registry."""
    import re

    text = (SRC.parent / "docs" / "development.md").read_text()
    chain = text[text.index("Dependencies flow one way:") : text.index("(`tests/unit/test_architecture.py`")]
    assert re.findall(r"`(\w+)`", chain) == LAYERS[1:]


@pytest.mark.parametrize("lower, higher", [(f"ablate.{low}", f"ablate.{high}") for i, high in enumerate(LAYERS) for low in LAYERS[i + 1 :]])
def test_dependencies_flow_one_way(lower, higher):
    """Nothing in `lower` reaches `higher`, directly or through other modules."""
    offenders = {
        m: sorted(n for n in reachable(m) if n == higher or n.startswith(higher + "."))
        for m in GRAPH
        if m == lower or m.startswith(lower + ".")
    }
    assert not {m: o for m, o in offenders.items() if o}, f"{lower} must not depend on {higher}"


BENCHMARKS = SRC.parent / "benchmarks"


def test_no_source_file_is_over_300_lines():
    """One concept a file holds in src/ and in benchmarks/ alike (a benchmark script's command line stays in its
    script; what it measures with lives in modules beside it)."""
    files = [*MODULES.values(), *BENCHMARKS.glob("*.py")]
    assert len(files) > len(MODULES), "benchmarks/ holds no Python file: the check would pass on nothing"
    long = {str(p.relative_to(SRC.parent)): n for p in files if (n := len(p.read_text().splitlines())) > 300}
    assert not long, f"split these along a concept: {long}"


def test_the_graph_sees_imports_inside_functions():
    """The checks above are only as good as the import scan: a function-level import must be an edge."""
    assert "ablate.run.train" in GRAPH["ablate.sweep.trial"]  # `from ablate.run.train import train` inside main()
    assert "ablate.sweep.commands" in GRAPH["ablate.sweep.flags"]  # inside run_sweep()


@pytest.mark.slow  # two Python processes that import torch (seconds)
def test_sweep_processes_start_without_torch_and_never_load_lightning():
    """The sweep CLI and each worker only plan, claim and wait; importing Lightning (5-7 s of CPU on this machine)
    belongs to the trial processes, which train. Torch comes in when a sweep file's rows are checked against the
    variant registries (their classes are torch modules, a plugin's too), about 2 s; a bad flag or `--help` costs none."""
    import subprocess
    import sys

    code = (
        "import sys, ablate.cli, ablate.sweep.commands, ablate.sweep.worker, ablate.sweep.trial; "
        "print(sorted(m for m in ('torch', 'lightning') if m in sys.modules)); "
        "from ablate.sweep.load import load_sweep; load_sweep(sys.argv[1]); "
        "print(sorted(m for m in ('torch', 'lightning') if m in sys.modules))"
    )
    sweep = SRC.parent / "sweeps" / "quickstart.yaml"
    out = subprocess.run([sys.executable, "-c", code, str(sweep)], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "['torch']"]


@pytest.mark.slow  # a Python process
def test_the_cli_and_the_study_files_reader_load_neither_optuna_nor_torch():
    """`ablate.sweep` re-exported load_sweep, so `ablate --help`, `ablate train` and `ablate table`'s reader of a
    study.db (sweep/study_file.py, "read without Optuna") each loaded Optuna, SQLAlchemy and numpy at import."""
    import subprocess
    import sys

    code = (
        "import sys, ablate.cli, ablate.sweep.study_file; "
        "print(sorted(m for m in ('torch', 'lightning', 'optuna', 'sqlalchemy', 'numpy') if m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_every_command_is_a_parser_in_flags_and_a_body_in_commands():
    """A reader finds any subcommand in two steps: PACKAGE/flags.py holds its parser, PACKAGE/commands.py its body. A
    handler a parser names (`set_defaults(func=...)`) only imports its body from PACKAGE.commands and returns it (so
    `ablate --help` and a bad flag cost no torch import)."""
    found, bad = 0, []
    for flags in sorted((SRC / "ablate").glob("*/flags.py")):
        tree = ast.parse(flags.read_text())
        handlers = {
            kw.value.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "set_defaults"
            for kw in node.keywords
            if kw.arg == "func" and isinstance(kw.value, ast.Name)
        }
        commands = f"ablate.{flags.parent.name}.commands"
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in handlers):
            found += 1
            body = [n for n in fn.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
            thin = (
                len(body) == 2
                and isinstance(body[0], ast.ImportFrom)
                and body[0].module == commands
                and isinstance(body[1], ast.Return)
                and isinstance(body[1].value, ast.Call)
            )
            if not thin or commands not in MODULES:
                bad.append(f"{flags.relative_to(SRC)}: {fn.name}")
    assert found >= 9 and not bad, f"a command's body belongs in PACKAGE/commands.py, its flags.py only imports it: {bad}"
