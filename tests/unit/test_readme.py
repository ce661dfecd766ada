"""The README and the docs pages say what ablate does.

- The README stays a front door: under 200 lines of at most 120 characters, no folded sections, every link resolving.
- Its commands (and the docs pages' command blocks) parse with ablate's own parser, and name only subcommands it has.
- Its sample outputs are what ablate prints now: the short commands run in-process (ablate.cli.main), not in a
  subprocess, so the whole file stays within a few seconds.
- The "Adding a variant" example registers and trains as written (its commands through the real command line:
  tests/integration/test_plugin_runs.py::test_the_readme_example_works_as_written), and the docs pages' sweep files
  and relative-position example are valid.
"""

from __future__ import annotations

import logging
import re
import shlex
import sys
import types
from pathlib import Path

import pytest
import torch
from helpers import VOCAB, random_batch, tiny_model

from ablate import cli
from ablate.model import ATTENTION, build_transformer
from ablate.model.members import stack_state_dicts
from ablate.registry import restoring

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# The pages split out of the README; the study pages (table3-small*, attention-variants*) are written by their studies.
PAGES = ["runs", "sweeps", "table", "variants", "configuration", "studies", "benchmarks", "development"]
BOX = "┏┓┗┛┡┩┃│┳┻╇━─└┘┌┐├┤┬┴┼╀╁"


@pytest.fixture(autouse=True)
def _restore_ablate_logger():
    """main() sends the "ablate" logger to stderr and stops it propagating; later tests' caplog needs it back."""
    logger = logging.getLogger("ablate")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


def section(text: str, heading: str) -> str:
    """The text under a heading (any level), up to the next heading of the same or a higher level."""
    match = re.search(rf"^(#+) {re.escape(heading)}\n", text, re.M)
    assert match, f"no heading {heading!r}"
    level = len(match.group(1))
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def variant_section() -> str:
    return section(README.read_text(), "Adding a variant")


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def samples(text: str) -> list[tuple[list[str], list[str]]]:
    """Each `$ ablate ...` line in a text block, with the lines printed after it (up to the next `$` or the block's end)."""
    found = []
    for block in blocks(text, "text"):
        lines = block.splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith("$ ablate ")]
        for i, start in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else len(lines)
            found.append((shlex.split(lines[start][2:]), lines[start + 1 : end]))
    return found


def run(argv: list[str], capsys) -> tuple[int, list[str]]:
    """ablate.cli.main in this process: its exit code and what it printed (stdout, then stderr), as lines."""
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse's --help and usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, (out + err).splitlines()


def cells(lines: list[str]) -> list[list[str] | str]:
    """Printed lines with a rich table's borders dropped and its rows as cells, so the terminal's width does not matter."""
    rows = []
    for line in lines:
        if not line.strip(BOX + " "):
            continue  # a border line
        if line.lstrip()[:1] in BOX:
            rows.append([cell.strip() for cell in re.split(f"[{BOX}]", line.strip())[1:-1]])
        else:
            rows.append(line.rstrip())
    return rows


def ablate_commands(text: str) -> list[list[str]]:
    """Every `ablate ...` command in the text's bash blocks (after `&&`, a pipe, `srun` or environment assignments)."""
    commands = []
    for block in blocks(text, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0]
            for part in re.split(r"&&|\||;", line):
                words = shlex.split(part, comments=True)
                while words and (re.match(r"^[A-Z_]+=", words[0]) or words[0] in ("srun", "time")):
                    words = words[1:]
                if words[:1] == ["ablate"]:
                    commands.append(words)
    return commands


# The README as a front door.


def test_readme_is_short_flat_and_narrow():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 200
    wide = [(i, len(line)) for i, line in enumerate(lines, 1) if len(line) > 120]
    assert not wide, f"lines over 120 characters: {wide}"
    assert "<details" not in README.read_text()


@pytest.mark.parametrize("page", ["README.md"] + [f"docs/{name}.md" for name in PAGES])
def test_links_resolve(page):
    path = ROOT / page
    text = path.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r"^\[[^\]]+\]: (\S+)$", text, re.M)
    for target in targets:
        if re.match(r"https?://", target):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{page} links to {target}, which does not exist"
        if anchor and linked.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M)
            slugs = {re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", h.strip().lower())) for h in headings}
            assert anchor in slugs, f"{page} links to {target}: no such heading in {file or page}"


def test_the_data_directory_outlives_the_install_command_and_a_new_shell_is_told_how_to_set_it():
    """The first block set ABLATE_DATA_DIR for its one command, so the tour's commands in a new shell had none."""
    text = README.read_text()
    for block in blocks(text, "bash"):
        joined = block.replace("\\\n", " ")
        assert "ABLATE_DATA_DIR=" not in joined or "export ABLATE_DATA_DIR=" in joined, f"set for one command only:\n{block}"
    tour = section(text, "A five-minute tour")
    assert "`. .venv/bin/activate && export ABLATE_DATA_DIR=../shared/data`" in " ".join(tour.split())


def test_a_stock_machine_is_told_how_to_get_torchs_cpu_build():
    text = " ".join(README.read_text().split())
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in text


@pytest.mark.parametrize("page", ["README.md", "benchmarks/README.md", *(f"docs/{p.name}" for p in sorted(DOCS.glob("*.md")))])
def test_docs_name_paths_relative_to_the_repository_not_one_machines(page):
    """`/work/shared/data`, `../main/studies/NAME`: paths of the machine the docs were written on."""
    text = (ROOT / page).read_text(encoding="utf-8")
    found = re.findall(r"(?<![\w.])/work/\S*|\.\./main/\S*", text)
    assert not found, f"{page}: {found}"


def test_readme_names_every_page_split_out_of_it():
    text = README.read_text()
    for name in PAGES:
        assert f"docs/{name}.md" in text


# The commands are ablate's.


def test_commands_parse_with_ablates_own_parser():
    parser = cli.build_parser()
    texts = {"README.md": README.read_text()} | {name: (DOCS / f"{name}.md").read_text() for name in PAGES}
    seen = 0
    for page, text in texts.items():
        for command in ablate_commands(text):
            try:
                parser.parse_args(command[1:])
            except SystemExit:
                pytest.fail(f"{page}: `{shlex.join(command)}` does not parse")
            seen += 1
    assert seen >= 15


def test_help_lists_the_subcommands_the_readme_uses_and_the_docs_cover_every_one(capsys):
    code, lines = run(["--help"], capsys)
    assert code == 0
    listing = next(line for line in lines if line.strip().startswith("{"))  # the positional argument's choices
    listed = set(listing.strip().strip("{}").split(","))
    readme = README.read_text()
    used = {command[1] for command in ablate_commands(readme)} | set(re.findall(r"`ablate (\w+)", readme))
    assert used <= listed, f"the README uses subcommands ablate lacks: {used - listed}"
    docs = readme + "".join((DOCS / f"{name}.md").read_text() for name in PAGES)
    assert all(f"ablate {name}" in docs for name in listed)


# The sample outputs are what ablate prints.


def test_readme_and_docs_samples_are_what_ablate_prints(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    if "ablate.run.train" not in sys.modules:
        # The samples of `ablate train` are errors of the config, met before training: they need the command line and
        # the config loader, not Lightning, whose import alone takes seconds. A sample that trained would fail here.
        stub = types.ModuleType("ablate.run.train")
        stub.train = lambda *args, **kwargs: pytest.fail("a README sample of `ablate train` started training")
        monkeypatch.setitem(sys.modules, "ablate.run.train", stub)
    found = samples(README.read_text()) + samples((DOCS / "configuration.md").read_text())
    assert {tuple(argv[:2]) for argv, _ in found} >= {("ablate", "train"), ("ablate", "sweep"), ("ablate", "params")}
    for argv, printed in found:
        code, lines = run(argv[1:], capsys)
        assert cells(lines) == cells(printed), f"`{shlex.join(argv)}` prints:\n" + "\n".join(lines)
        assert code == (2 if any(": error: " in line for line in printed) else 0)


@pytest.mark.parametrize(
    ("page", "claim", "argv"),
    [
        ("README.md", r"`ablate params` prints (\d[\d,]*\d) parameters", ["params", "experiments/quickstart.yaml"]),
        (
            "docs/configuration.md",
            r"data.vocab_size=41000` prints (\d[\d,]*\d)",
            ["params", "experiments/base.yaml", "data.vocab_size=41000"],
        ),
    ],
    ids=["quickstart", "base"],
)
def test_parameter_counts_are_what_ablate_params_prints(page, claim, argv, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    said = re.search(claim, (ROOT / page).read_text()).group(1)
    code, lines = run(argv, capsys)
    assert code == 0
    [total] = [row for row in cells(lines) if isinstance(row, list) and row[:1] == ["total"]]
    assert total[1] == said


# The examples work.


def test_readme_variant_example_registers_and_trains():
    block = blocks(variant_section(), "python")[0]
    with restoring(ATTENTION):
        exec(compile(block, "README.md", "exec"), {"__name__": "readme_example"})
        assert "cosine" in ATTENTION
        model = build_transformer(tiny_model(attention="cosine"), VOCAB)
        src, tgt = random_batch()
        logits = model(src, tgt)
        assert logits.shape == (3, 6, VOCAB) and torch.isfinite(logits).all()
        logits.sum().backward()


def test_docs_registry_table_names_the_class_each_registry_takes():
    """@register refuses a class that does not subclass its registry's base (a TypeError naming the base), so the
    table says which: SCALING's and absolute POSITIONAL's rows had not."""
    import importlib

    rows = re.findall(r"^(\| `(\w+)` \| `([\w.]+)` \|.*\|)$", section((DOCS / "variants.md").read_text(), "Registries"), re.M)
    assert {name for _, name, _ in rows} >= {"ATTENTION", "POSITIONAL", "SCALING", "ACTIVATIONS"}
    for row, name, module in rows:
        base = getattr(importlib.import_module(module), name).base
        assert base is torch.nn.Module or f"subclass `{base.__name__}`" in row, f"{name}'s row does not name {base.__name__}"


def test_docs_sweep_examples_are_valid_sweep_files(tmp_path, monkeypatch):
    from ablate.sweep.load import load_sweep
    from ablate.sweep.plan import Search, Variants, plan_for

    examples = blocks(section((DOCS / "sweeps.md").read_text(), "The sweep file"), "yaml")
    assert len(examples) == 2
    monkeypatch.chdir(ROOT)
    for i, block in enumerate(examples):
        path = tmp_path / f"example{i}.yaml"
        path.write_text(block)
        sweep = load_sweep(path)
        assert type(plan_for(sweep)) is (Variants, Search)[i]


def test_docs_relative_position_example_keeps_every_invariant():
    from ablate.model import POSITIONAL

    [block] = blocks(section((DOCS / "variants.md").read_text(), "A relative position scheme"), "python")
    with restoring(POSITIONAL):
        exec(compile(block, "docs/variants.md", "exec"), {"__name__": "docs_example"})
        model = build_transformer(tiny_model(positional="log_distance", attention_window=2), VOCAB).eval()
        src, tgt = random_batch(pad_tail=False)
        full = model(src, tgt)
        memory, src_mask = model.encode(src)
        cache = model.new_cache()
        steps = [model.decode(tgt[:, i : i + 1], memory, src_mask, cache, start=i) for i in range(tgt.size(1))]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
        model.train()
        model(src, tgt).sum().backward()
        weights = [m.position.weight for m in model.modules() if getattr(m, "position", None) is not None]
        assert weights and all(w.grad is not None for w in weights)


@pytest.mark.parametrize("batched", [False, True], ids=["member-by-member", "batched"])
def test_docs_relative_position_example_trains_as_members(batched, monkeypatch):
    """Its `members` argument: each member of a member model computes what its own model computes, loss and
    gradients, on the CPU's member-by-member path and on the batched one an accelerator takes (its `bias` there)."""
    from member_models import batched_everywhere, collated, members_of, own_batches

    from ablate.model import POSITIONAL
    from ablate.model.loss import translation_loss
    from ablate.model.member_loss import member_translation_loss

    [block] = blocks(section((DOCS / "variants.md").read_text(), "A relative position scheme"), "python")
    if batched:
        batched_everywhere(monkeypatch)
    with restoring(POSITIONAL):
        exec(compile(block, "docs/variants.md", "exec"), {"__name__": "docs_example"})
        plains, group = members_of(tiny_model(positional="log_distance"), 2)
        for k, plain in enumerate(plains):  # members unlike the initial ones, so a member's own weight is what is read
            for m in plain.modules():
                if getattr(m, "position", None) is not None:
                    m.position.weight.data += 0.5 * (k + 1)
        group.load_state_dict(stack_state_dicts([p.state_dict() for p in plains]))
        singles, batch = collated(own_batches(2))
        loss, nll, ntok = member_translation_loss(group, batch, torch.zeros(2, dtype=torch.float64))
        (loss / ntok).sum().backward()
        grads = dict(group.named_parameters())
        for k, (plain, single) in enumerate(zip(plains, singles)):
            ref_loss, _, ref_ntok = translation_loss(plain, single, 0.0)
            (ref_loss / ref_ntok).backward()
            torch.testing.assert_close(loss[k], ref_loss, rtol=1e-12, atol=0)
            for name, p in plain.named_parameters():
                torch.testing.assert_close(grads[name].grad[k], p.grad, rtol=1e-9, atol=1e-12, msg=f"member {k}: {name}")


def test_readme_plugin_commands_import_the_file_it_says_to_save(tmp_path, monkeypatch):
    from ablate import plugins
    from ablate.experiment import load_config

    text = variant_section()
    name = re.search(r"Save this as `(\w+\.py)`", text).group(1)
    (tmp_path / name).write_text(blocks(text, "python")[0])
    commands = ablate_commands(text)
    train, evaluate = (next(c for c in commands if c[:2] == ["ablate", verb]) for verb in ("train", "evaluate"))
    assert evaluate[evaluate.index("--plugins") + 1] == name
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(plugins, "_imported", {})
    try:
        with restoring(ATTENTION):
            cfg = load_config(overrides=[arg for arg in train[2:] if "=" in arg])
            assert cfg.plugins == [str(tmp_path / name)] and cfg.model.attention == "cosine"
    finally:
        sys.modules.pop(plugins.module_name(tmp_path / name), None)
