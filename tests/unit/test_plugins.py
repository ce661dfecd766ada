"""Plugins in-process: where a named file is found, that it is imported once and only when named, and that every
way it can fail names the plugin. The command line, sweeps and DDP ranks are in tests/integration/test_plugin_runs.py."""

from __future__ import annotations

import hashlib
import pickle
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from helpers import VOCAB, random_batch, tiny_model
from user_plugin import plugin_source

from ablate import plugins
from ablate.config import ConfigError, diff, to_dict, to_yaml, with_defaults
from ablate.experiment import from_dict, load_config
from ablate.files.yaml_file import read_yaml
from ablate.model import ATTENTION, SCALING, build_transformer
from ablate.registry import restoring

VARIANTS = plugin_source("ut")
NAMES = {"model.attention": "ut_cosine", "model.positional": "ut_distance", "model.attention_scaling": "ut_half"}
USE = [f"{key}={name}" for key, name in NAMES.items()]


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """Each test starts with no plugin imported; what it registers or imports is taken back after it."""
    monkeypatch.setattr(plugins, "_imported", {})
    monkeypatch.setattr(plugins, "_hashes", {})
    monkeypatch.setattr(plugins, "_entry_points_loaded", True)  # the entry-point test turns this back on
    monkeypatch.setattr(plugins, "_entry_modules", [])
    modules = set(sys.modules)
    with restoring(*plugins._registries()):
        yield
    for name in set(sys.modules) - modules:
        if name.startswith((plugins.MODULE_PREFIX, "ut_")):
            del sys.modules[name]


def write(path: Path, source: str = VARIANTS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def saved_with_plugin(folder: Path) -> dict:
    """The saved config of a run naming the plugin in `folder`; then, as if in a new process, no plugin imported,
    none of its variants registered and no import noted."""
    with restoring(*plugins._registries()):
        saved = to_dict(load_config(overrides=["plugins=[variants.py]", *USE]))
    plugins._imported.clear()
    (folder / "imported.txt").unlink()
    return saved


def imports(folder: Path) -> int:
    """How many times the plugin in `folder` was imported (it appends a line to imported.txt each time)."""
    marker = folder / "imported.txt"
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def test_a_plugin_named_in_a_yaml_is_found_beside_it_and_its_variants_build(tmp_path, monkeypatch):
    plugin = write(tmp_path / "conf" / "lib" / "variants.py")
    exp = tmp_path / "conf" / "exp.yaml"
    exp.write_text("plugins: [lib/variants.py]\nmodel:\n  attention: ut_cosine\n  positional: ut_distance\n  attention_scaling: ut_half\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    cfg = load_config([Path("..") / "conf" / "exp.yaml"])
    assert cfg.plugins == [str(plugin.resolve())]  # absolute: saved in config.yaml, read by trials anywhere
    assert f"- {plugin.resolve()}" in to_yaml(cfg)
    m = cfg.model
    model = build_transformer(tiny_model(attention=m.attention, positional=m.positional, attention_scaling=m.attention_scaling), VOCAB)
    src, tgt = random_batch()
    assert torch.isfinite(model(src, tgt)).all()


def test_a_plugin_on_the_command_line_is_relative_to_the_cwd_with_or_without_brackets(tmp_path, monkeypatch):
    plugin = write(tmp_path / "variants.py")
    monkeypatch.chdir(tmp_path)
    assert load_config(overrides=["plugins=[variants.py]", *USE]).plugins == [str(plugin)]
    assert load_config(overrides=["plugins=./variants.py", *USE]).plugins == [str(plugin)]
    assert load_config(plugins=["variants.py"]).plugins == [str(plugin)]  # sections, as a sweep's overrides pass them


def test_a_plugin_is_imported_once_per_process_under_a_stable_name(tmp_path, monkeypatch):
    plugin = write(tmp_path / "variants.py")
    monkeypatch.chdir(tmp_path)
    load_config(overrides=["plugins=[variants.py]", *USE])
    load_config(overrides=[f"plugins=[{plugin}]", *USE])  # the same file by another spelling: no clash, no re-import
    assert imports(tmp_path) == 1
    cls = ATTENTION["ut_cosine"]
    assert cls.__module__ == plugins.module_name(plugin) and cls.__module__.startswith("ablate_plugin_variants_")
    assert sys.modules[cls.__module__].__file__ == str(plugin)
    assert pickle.loads(pickle.dumps(cls)) is cls  # by reference, as a DDP or dataloader process would need


def test_a_plugin_may_be_a_module_name(tmp_path, monkeypatch):
    write(tmp_path / "ut_pkg" / "__init__.py", "")
    write(tmp_path / "ut_pkg" / "variants.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = load_config(overrides=["plugins=[ut_pkg.variants]", *USE])
    assert cfg.plugins == ["ut_pkg.variants"] and "ut_half" in SCALING


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


MODEL = {key.removeprefix("model."): name for key, name in NAMES.items()}
ZEROED = VARIANTS.replace("* scale", "* scale * 0")  # the kernel edited: every logit 0


def test_a_plugin_records_the_sha256_of_its_file_as_it_was_imported(tmp_path, monkeypatch):
    plugin = write(tmp_path / "variants.py")
    write(tmp_path / "ut_pkg" / "__init__.py", "")
    module = write(tmp_path / "ut_pkg" / "kernels.py", "SCALE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    recorded = {str(plugin): sha(plugin), "ut_pkg.kernels": sha(module)}  # a module: its __file__'s contents
    plugins.load_plugins([str(plugin), "ut_pkg.kernels"])
    assert plugins.contents([str(plugin), "ut_pkg.kernels", str(tmp_path / "never.py")]) == recorded
    write(plugin, ZEROED)  # edited while a run trains: the record is of the code that ran
    assert plugins.contents([str(plugin)]) == {str(plugin): recorded[str(plugin)]}


def test_a_plugin_file_edited_since_a_checkpoint_was_trained_is_named_with_both_hashes(tmp_path):
    plugin = write(tmp_path / "variants.py")
    then = sha(plugin)
    write(plugin, ZEROED)
    plugins.load_plugins([str(plugin)])
    now = sha(plugin)
    assert plugins.edited({str(plugin): then}, MODEL) == [(str(plugin), then, now)]
    # A model none of whose variants the plugin defines (ablate's own; a sweep's other row) runs none of its code.
    assert plugins.edited({str(plugin): then}, {}) == [] and plugins.changed_since_training("c", {str(plugin): then}, {}) == []
    assert plugins.changed_since_training("checkpoint c.ckpt", {str(plugin): then}, MODEL) == [
        f"checkpoint c.ckpt: plugin {plugin} changed since training (sha256 {then[:12]} then, {now[:12]} now); going on with it as it is now"
    ]
    assert plugins.changed_since_training("checkpoint c.ckpt", {str(plugin): now}, MODEL) == []
    for unknown in (None, {str(plugin): 3}, "damaged"):  # a checkpoint saved before the record, or a damaged one: unknown
        assert plugins.edited(unknown, MODEL) == [] and plugins.changed_since_training("c", unknown, MODEL) == []


def test_another_file_registering_a_checkpoints_variants_is_named_where_its_contents_differ(tmp_path):
    trained = write(tmp_path / "variants.py")
    record = {str(trained): sha(trained)}
    with restoring(*plugins._registries()):
        plugins.load_plugins([str(write(tmp_path / "copy" / "variants.py"))])
        assert plugins.changed_since_training("checkpoint c.ckpt", record, MODEL) == []  # a copy: the same code
    plugins._imported.clear()
    other, extra = write(tmp_path / "other" / "variants.py", ZEROED), write(tmp_path / "extra.py", "UNRELATED = 1\n")
    plugins.load_plugins([str(extra), str(other)])
    assert plugins.changed_since_training("checkpoint c.ckpt", record, MODEL) == [
        f"checkpoint c.ckpt: the plugin's contents changed since training: it was trained with {trained} (sha256 "
        f"{record[str(trained)][:12]}), and its variants now come from {other} (sha256 {sha(other)[:12]}); going on with them as they are"
    ]
    assert plugins.changed_since_training("checkpoint c.ckpt", record, {}) == []  # ablate's own variants run no plugin


def test_nothing_is_imported_unless_named_and_the_error_says_how(tmp_path):
    write(tmp_path / "variants.py")
    with pytest.raises(ConfigError) as err:
        load_config(overrides=USE)
    assert "model.attention='ut_cosine' is not one of" in str(err.value)
    assert "plugins=[FILE] on the command line, or `plugins: [FILE]` in the config" in str(err.value)
    assert imports(tmp_path) == 0
    assert plugins.hint({"attention": "ut_cosine"}, "sweep").endswith(
        "name the file so it is imported: `overrides: {plugins: [FILE]}` in the sweep file, or `plugins: [FILE]` in its base config)"
    )


def test_a_saved_config_only_records_its_plugins(tmp_path, monkeypatch):
    plugin = write(tmp_path / "variants.py")
    monkeypatch.chdir(tmp_path)
    saved = saved_with_plugin(tmp_path)  # then as in a new process: the record alone must not import it
    with pytest.raises(ConfigError) as err:
        from_dict(saved)
    assert f"the saved config needs plugin {plugin} (" in str(err.value) and f"pass --plugins {plugin}" in str(err.value)
    assert imports(tmp_path) == 0


def test_a_syntax_error_names_the_file_and_the_line(tmp_path):
    plugin = write(tmp_path / "broken.py", "import torch\nx = (\n")
    with pytest.raises(ConfigError, match=rf"^plugin {plugin} failed to import: SyntaxError: .* \(broken.py, line 2\)$"):
        load_config(overrides=[f"plugins=[{plugin}]"])


def test_a_raising_plugin_is_named_with_its_exception_and_leaves_nothing_registered(tmp_path):
    source = VARIANTS + "\nraise RuntimeError('no GPU kernel for this machine')\n"
    plugin = write(tmp_path / "variants.py", source)
    with pytest.raises(ConfigError) as err:
        load_config(overrides=[f"plugins=[{plugin}]"])
    line = len(source.splitlines())
    assert str(err.value) == f"plugin {plugin} failed to import (line {line}): RuntimeError: no GPU kernel for this machine"
    assert "ut_cosine" not in ATTENTION and plugins.module_name(plugin) not in sys.modules
    write(plugin)  # fixed: it now imports, with no clash against the failed attempt
    assert load_config(overrides=[f"plugins=[{plugin}]", *USE]).model.attention == "ut_cosine"


def test_a_name_taken_by_a_built_in_is_refused_naming_both(tmp_path):
    plugin = write(tmp_path / "mine.py", VARIANTS.replace('"ut_half"', '"learned"'))
    with pytest.raises(ConfigError) as err:
        load_config(overrides=[f"plugins=[{plugin}]"])
    msg = str(err.value)
    assert msg.startswith(f"plugin {plugin} registers a name that is taken: cannot register ")
    assert f".UtHalf ({plugin}) as 'learned': the name is taken by ablate.model.scaling.LearnedTemperature" in msg
    assert "ut_cosine" not in ATTENTION  # what it registered before the clash is taken back


def test_a_name_taken_by_another_plugin_names_both_files(tmp_path):
    first, second = write(tmp_path / "a" / "variants.py"), write(tmp_path / "b" / "variants.py")
    with pytest.raises(ConfigError) as err:
        load_config(overrides=[f"plugins=[{first},{second}]"])
    msg = str(err.value)
    assert f"plugin {second} registers a name that is taken" in msg
    assert f"UtCosine ({second}) as 'ut_cosine': the name is taken by " in msg and f"UtCosine ({first})" in msg


def test_a_missing_file_an_unknown_or_raising_module_and_a_wrong_type_are_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=rf"^plugin {tmp_path / 'nope.py'}: no such file$"):
        load_config(overrides=["plugins=[nope.py]"])
    with pytest.raises(ConfigError, match=r"^plugin ut_nope.variants failed to import: ModuleNotFoundError: No module named 'ut_nope'$"):
        load_config(overrides=["plugins=[ut_nope.variants]"])
    module = write(tmp_path / "ut_raising.py", "import os\n\nos.environ['UT_NOPE']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=rf"^plugin ut_raising \({module}\) failed to import \(line 3\): KeyError: 'UT_NOPE'$"):
        load_config(overrides=["plugins=[ut_raising]"])
    (tmp_path / "exp.yaml").write_text("plugins: {variants.py: true}\n")
    with pytest.raises(ConfigError, match=r"exp.yaml: plugins must be a list of .py files or module names, got \{'variants.py': True\}$"):
        load_config(["exp.yaml"])


def test_a_checkpoint_names_the_plugins_it_needs_and_how_to_pass_them(tmp_path, monkeypatch):
    """What `ablate evaluate|translate` say before building a model (the CLI itself: tests/integration)."""
    plugin = write(tmp_path / "variants.py")
    monkeypatch.chdir(tmp_path)
    with restoring(*plugins._registries()):
        saved = to_dict(load_config(overrides=["plugins=[variants.py]", *USE]))
        assert plugins.needed("checkpoint m.ckpt", saved) is None
    plugins._imported.clear()
    (tmp_path / "imported.txt").unlink()
    names = "model.attention='ut_cosine', model.attention_scaling='ut_half', model.positional='ut_distance' are not registered"
    assert plugins.needed("checkpoint m.ckpt", saved) == f"checkpoint m.ckpt needs plugin {plugin} ({names}); pass --plugins {plugin}"
    assert plugins.needed("checkpoint m.ckpt", {**saved, "plugins": []}) == (
        f"checkpoint m.ckpt: {names} and the run records no plugin; pass the file or module that registers it: --plugins FILE_OR_MODULE"
    )
    assert imports(tmp_path) == 0
    plugins.load_plugins(["variants.py"])  # what --plugins does
    assert plugins.needed("checkpoint m.ckpt", saved) is None and imports(tmp_path) == 1


def test_decode_commands_take_plugins_after_the_checkpoint():
    from ablate.cli import build_parser

    for command in ("evaluate", "translate"):
        args = build_parser().parse_args([command, "m.ckpt", "--plugins", "a.py", "pkg.mod", "--plugins", "b.py"])
        assert (args.checkpoint, args.plugins) == ("m.ckpt", ["a.py", "pkg.mod", "b.py"])
    assert build_parser().parse_args(["translate", "m.ckpt"]).plugins == []


def test_installed_packages_register_through_entry_points(tmp_path, monkeypatch):
    write(tmp_path / "ut_ep_variants.py")
    dist = tmp_path / "ut_ep-1.0.dist-info"
    write(dist / "METADATA", "Metadata-Version: 2.1\nName: ut-ep\nVersion: 1.0\n")
    write(dist / "entry_points.txt", "[ablate.plugins]\nut_ep = ut_ep_variants\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_entry_points_loaded", False)
    cfg = load_config(overrides=USE)
    assert cfg.plugins == [] and ATTENTION["ut_cosine"].__module__ == "ut_ep_variants"
    load_config(overrides=USE)
    assert imports(tmp_path) == 1
    named = plugins.from_plugins({"attention": "ut_cosine", "positional": "sinusoidal"})  # a divergence's suspects
    assert named == [f"model.attention='ut_cosine' ({tmp_path / 'ut_ep_variants.py'})"]


def test_an_error_in_any_file_of_a_plugin_package_is_placed_in_it(tmp_path, monkeypatch):
    """The new plugin error line knew single files only: a package plugin's error (raised in a module of the package,
    not its __init__.py) was worded as ablate's own, with no line."""
    write(tmp_path / "ut_pkgbad" / "__init__.py", "from .impl import boom\n")
    impl = write(tmp_path / "ut_pkgbad" / "impl.py", "def boom():\n    raise ValueError('no')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins.load_plugins(["ut_pkgbad"])
    with pytest.raises(ValueError) as err:
        sys.modules["ut_pkgbad"].boom()
    assert plugins.raised_in(err.value) == f"{impl}, line 2, in boom: raise ValueError('no')"
    try:
        raise RuntimeError("in ablate's code") from err.value
    except RuntimeError as e:
        assert plugins.raised_in(e) == plugins.raised_in(err.value)  # the error it was raised from counts
    assert plugins.raised_in(ValueError("elsewhere")) is None
    # the docs' `my_pkg.variants` form: an error in a sibling module of the package is the plugin's too
    write(tmp_path / "ut_pkgtwo" / "__init__.py", "")
    helper = write(tmp_path / "ut_pkgtwo" / "helpers.py", "def boom():\n    raise ValueError('no')\n")
    write(tmp_path / "ut_pkgtwo" / "variants.py", "from .helpers import boom\n")
    plugins.load_plugins(["ut_pkgtwo.variants"])
    with pytest.raises(ValueError) as err:
        sys.modules["ut_pkgtwo.variants"].boom()
    assert plugins.raised_in(err.value) == f"{helper}, line 2, in boom: raise ValueError('no')"


def test_a_module_of_ablate_named_as_a_plugin_makes_no_built_in_a_plugins(monkeypatch):
    """Named as a plugin, a module inside ablate made every built-in variant count as 'from your files'."""
    plugins.load_plugins(["ablate.model.scaling"])
    assert plugins.from_plugins({"attention": "scaled_dot_product", "attention_scaling": "inv_sqrt_dk"}) == []


def test_a_broken_entry_point_is_named(tmp_path, monkeypatch):
    write(tmp_path / "ut_ep_broken.py", "raise ImportError('needs triton')\n")
    dist = tmp_path / "ut_ep_broken-1.0.dist-info"
    write(dist / "METADATA", "Metadata-Version: 2.1\nName: ut-ep-broken\nVersion: 1.0\n")
    write(dist / "entry_points.txt", "[ablate.plugins]\nbroken = ut_ep_broken\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_entry_points_loaded", False)
    with pytest.raises(
        ConfigError,
        match=r"^plugin entry point 'broken = ut_ep_broken' \(ablate.plugins, package ut-ep-broken\) "
        rf"\({tmp_path / 'ut_ep_broken.py'}\) failed to import \(line 1\): ImportError: needs triton$",
    ):
        load_config()


def test_other_plugins_are_a_config_change_for_resume(tmp_path, monkeypatch):
    """--resume refuses a config differing from the saved one by config.diff over with_defaults (ablate.run.rundir);
    the plugins key is compared like any other (the refusal itself, through the CLI: tests/integration)."""
    first, moved = write(tmp_path / "variants.py"), write(tmp_path / "copy" / "variants.py", VARIANTS.replace("ut_", "ut2_"))
    monkeypatch.chdir(tmp_path)
    cfg = load_config(overrides=["plugins=[variants.py]", *USE])
    saved = with_defaults(read_yaml(write(tmp_path / "config.yaml", to_yaml(cfg)), "config"))
    assert diff(saved, to_dict(cfg)) == {}
    other = load_config(overrides=[f"plugins=[{moved}]", *[u.replace("ut_", "ut2_") for u in USE]])
    assert diff(saved, to_dict(other))["plugins"] == ([str(first)], [str(moved)])
    assert diff(with_defaults({"model": {"heads": 8}}), to_dict(load_config())) == {}  # an old run (no plugins key): none


def test_installed_says_whether_a_package_registers_through_the_entry_points(monkeypatch):
    from ablate import plugins

    monkeypatch.setattr(plugins, "entry_points", lambda group: [] if group == plugins.ENTRY_POINT_GROUP else ["other"])
    assert plugins.installed() is False
    monkeypatch.setattr(plugins, "entry_points", lambda group: ["an entry point"] if group == plugins.ENTRY_POINT_GROUP else [])
    assert plugins.installed() is True


def test_a_plugin_calling_sys_exit_is_named_not_an_exit_with_no_word(tmp_path):
    """Front-door review: a plugin's sys.exit(3) at import ended every command with exit code 3 and no message."""
    plugin = write(tmp_path / "quits.py", "import sys\nsys.exit(3)\n")
    with pytest.raises(ConfigError, match=rf"^plugin {plugin} failed to import \(line 2\): SystemExit: 3$"):
        load_config(overrides=[f"plugins=[{plugin}]"])


def test_a_plugins_error_is_said_in_two_lines_with_secrets_masked(tmp_path):
    """One wording for `ablate` commands and a sweep's trials (whose fail reason keeps the message on one line)."""
    plugin = write(tmp_path / "ut_secret.py", "def boom():\n    raise ValueError('postgresql://me:hunter2@db/x\\nsecond line')\n")
    module = plugins.import_plugin(str(plugin))
    with pytest.raises(ValueError) as err:
        module.boom()
    said = plugins.error_said(err.value)
    assert said.startswith("a plugin raised ValueError: postgresql://me:***@db/x\nsecond line\n  at ")
    assert said.endswith(f"{plugin}, line 2, in boom: raise ValueError('postgresql://me:***@db/x\\nsecond line')")
    assert "hunter2" not in said and "hunter2" not in plugins.error_said(err.value, one_line=True)
    assert plugins.error_said(err.value, one_line=True).split("\n")[0].endswith("@db/x second line")
    assert plugins.error_said(ValueError("ablate's own")) is None
