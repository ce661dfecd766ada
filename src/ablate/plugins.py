"""Plugins: the user's own code that registers variants (README "Adding a variant", docs/variants.md), imported only when named.

A config names them in `plugins: [my_variants.py, my_pkg.variants]`: `.py` files (a path relative to the
config file naming it, or on the command line to the current directory) or importable module names.
`load_config` imports them before validating, so every command, sweep worker, trial and DDP rank (each
loads its config through it) knows their names; `ablate evaluate|translate` take them as `--plugins`.
Installed packages may register through the `ablate.plugins` entry-point group, loaded with any plugins.
A checkpoint or a saved config only records its plugins: nothing here is called from `from_dict`. A checkpoint also
records the sha256 of each plugin's file as the training process imported it (PLUGIN_HASHES), since the same path
may hold other code by the time its weights are resumed or scored.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

from ablate.config.compose import is_plugin_file as is_file
from ablate.config.compose import resolve_plugin as resolve
from ablate.messages.errors import ConfigError
from ablate.messages.redact import redact
from ablate.registry import NameTaken, Registry, restoring

ENTRY_POINT_GROUP = "ablate.plugins"
MODULE_PREFIX = "ablate_plugin_"  # a plugin file's module is ablate_plugin_<stem>_<hash of its path>

PLUGIN_HASHES = "plugin_sha256"  # a checkpoint's field: resolved spec -> sha256 of the plugin's file as trained with

_imported: dict[str, ModuleType] = {}  # resolved spec (absolute path or module name) -> module; once per process
_hashes: dict[str, str] = {}  # resolved spec -> sha256 of its file's contents when it was imported
_entry_points_loaded = False
_entry_modules: list[ModuleType] = []  # the entry points' modules: where their variants' code is, for error messages


def module_name(path: Path) -> str:
    """The stable module name a plugin file is imported under: the same file, the same name, in every process
    (so its classes pickle by reference)."""
    stem = re.sub(r"\W", "_", path.stem)
    return f"{MODULE_PREFIX}{stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:10]}"


def imported(spec: str) -> bool:
    return resolve(spec) in _imported


def load_plugins(specs: Iterable[str]) -> list[str]:
    """Import the installed entry points, then each plugin (a file's path resolved from here); returns the resolved
    specs."""
    load_entry_points()
    resolved = [resolve(s) for s in specs]
    for spec in resolved:
        import_plugin(spec)
    return resolved


def import_plugin(spec: str) -> ModuleType:
    """Import one resolved plugin once per process. A failure is a ConfigError naming the plugin and the
    exception, and takes back whatever the plugin registered before it failed."""
    if spec in _imported:
        return _imported[spec]
    path = Path(spec) if is_file(spec) else None
    if path is not None and not path.is_file():
        raise ConfigError(f"plugin {path}: no such file")
    if path is not None and path.suffix != ".py":
        raise ConfigError(f"plugin {path}: not a .py file (name a Python file, or a module by its dotted name)")
    digest = _sha256(path)  # a file's bytes read just before they run: what the weights are trained with
    try:
        with restoring(*_registries(), on_error_only=True):
            module = _import_file(path) if path is not None else importlib.import_module(spec)
    except (Exception, SystemExit) as e:  # anything a user's module raises while importing, SyntaxError and sys.exit() included
        raise ConfigError(_failure(spec, spec if path is not None else _module_file(spec), e)) from None
    _imported[spec] = module
    if digest := digest or _sha256(getattr(module, "__file__", None)):  # a module: its __file__, where it has one
        _hashes[spec] = digest
    return module


def _sha256(file) -> str | None:
    try:
        return hashlib.sha256(Path(file).read_bytes()).hexdigest() if file else None
    except OSError:
        return None


def installed() -> bool:
    """Whether an installed package registers through the entry-point group (read, not imported)."""
    return any(True for _ in entry_points(group=ENTRY_POINT_GROUP))


def load_entry_points() -> None:
    """Import every `ablate.plugins` entry point of the installed packages, once per process."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point '{ep.name} = {ep.value}' ({ENTRY_POINT_GROUP}" + (f", package {ep.dist.name})" if ep.dist else ")")
        try:
            with restoring(*_registries(), on_error_only=True):
                ep.load()
            _entry_modules.append(sys.modules[ep.module])
        except Exception as e:
            raise ConfigError(_failure(where, _module_file(ep.module), e)) from None


def _import_file(path: Path) -> ModuleType:
    name = module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # during its import too, as for any module (dataclasses and pickling look it up)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _failure(where: str, file: str | None, e: BaseException) -> str:
    """The message of a plugin that failed to import: the plugin (and the file of a module), the line, the exception."""
    if isinstance(e, NameTaken):
        return f"plugin {where} registers a name that is taken: {e}"
    named = where if file in (where, None) else f"{where} ({file})"
    if isinstance(e, SyntaxError):
        return f"plugin {named} failed to import: SyntaxError: {e.msg} ({Path(e.filename or '?').name}, line {e.lineno})"
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == file]
    line = f" (line {frames[-1].lineno})" if frames else ""
    return f"plugin {named} failed to import{line}: {type(e).__name__}: {e}"


def _module_file(name: str) -> str | None:
    """The file of a module named by its dotted name (for error messages), or None when it cannot be found."""
    try:
        spec = importlib.util.find_spec(name)
    except Exception:  # its parent package does not import either
        return None
    return spec.origin if spec is not None and spec.has_location else None


def _registries() -> tuple[Registry, ...]:
    from ablate.model import ACTIVATIONS, ATTENTION, POSITIONAL, SCALING

    return ATTENTION, POSITIONAL, SCALING, ACTIVATIONS


# -- what a saved config needs -------------------------------------------------------------------------------------


def _variant_tables() -> dict[str, Registry]:
    """A model section's variant keys and the registries their names are looked up in."""
    from ablate.model import ACTIVATIONS, ATTENTION, POSITIONAL, SCALING

    return {"attention": ATTENTION, "attention_scaling": SCALING, "positional": POSITIONAL, "activation": ACTIVATIONS}


def unregistered(model: dict) -> list[str]:
    """The variant keys of a (saved) model section whose names no registry holds now: ["model.attention='x'"]."""
    tables = _variant_tables()
    return [f"model.{key}='{model[key]}'" for key, table in tables.items() if key in model and model[key] not in table]


def needed(source: str, saved: dict) -> str | None:
    """Why a saved config cannot be rebuilt with the plugins imported so far, and how to pass the missing ones;
    None when every variant it names is registered."""
    names = unregistered(saved.get("model") or {})
    if not names:
        return None
    missing = [str(p) for p in saved.get("plugins") or [] if not imported(str(p))]
    what = f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} not registered"
    if missing:
        noun = "plugin" if len(missing) == 1 else "plugins"
        return f"{source} needs {noun} {', '.join(missing)} ({what}); pass --plugins {' '.join(missing)}"
    recorded = saved.get("plugins") or []
    by = f"by its plugins ({', '.join(map(str, recorded))})" if recorded else "and the run records no plugin"
    return f"{source}: {what} {by}; pass the file or module that registers it: --plugins FILE_OR_MODULE"


def contents(specs: Iterable[str]) -> dict[str, str]:
    """The sha256 of each of `specs` (resolved) imported in this process, of its file as imported; one whose file is
    unknown (a module without one) is left out. What a checkpoint records as PLUGIN_HASHES."""
    return {s: _hashes[s] for s in specs if s in _imported and s in _hashes}


def _recorded(record) -> dict[str, str]:
    """A checkpoint's PLUGIN_HASHES; absent (saved before ablate recorded them) or damaged: {}, nothing known."""
    return {k: v for k, v in record.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(record, dict) else {}


def edited(record, model: dict) -> list[tuple[str, str, str]]:
    """(spec, sha256 recorded, sha256 now) of each plugin imported now that defines a variant the model section
    `model` names, whose file's contents are not those `record` (a checkpoint's PLUGIN_HASHES) holds for the same
    spec: edited since. A plugin none of whose variants the model uses (another row's, added to a sweep's plugin file)
    changes nothing the model computes."""
    recorded, now = _recorded(record), contents(_providers(model)[1])
    return [(s, recorded[s], h) for s, h in now.items() if s in recorded and recorded[s] != h]


def changed_since_training(source: str, record, model: dict) -> list[str]:
    """A warning line for each way the plugins imported now differ from those `source` (a checkpoint, whose
    PLUGIN_HASHES is `record` and model section `model`) was trained with: a recorded file edited since, or variants
    now registered by another file whose contents none of the recorded had (`--plugins` names any file registering the
    names). A plugin recorded but not imported, and with nothing in its place, is said by `needed` where it is needed."""
    recorded, now = _recorded(record), contents(_imported)
    lines = [
        f"{source}: plugin {s} changed since training (sha256 {a[:12]} then, {b[:12]} now); going on with it as it is now"
        for s, a, b in edited(recorded, model)
    ]
    missing = [f"{s} (sha256 {h[:12]})" for s, h in recorded.items() if s not in now and h not in now.values()]
    instead = [s for s, h in now.items() if s not in recorded and h not in recorded.values()]
    outside, providers = _providers(model)
    instead = [s for s in instead if s in providers] or instead  # a class in a module the plugin imports: any of them
    if missing and instead and outside:  # a model of ablate's own variants only runs no plugin's code
        lines.append(
            f"{source}: the plugin's contents changed since training: it was trained with {', '.join(missing)}, and its "
            f"variants now come from {', '.join(f'{s} (sha256 {now[s][:12]})' for s in instead)}; going on with them as they are"
        )
    return lines


def _providers(model: dict) -> tuple[bool, set[str]]:
    """Whether a variant key of the model section `model` names a class from outside ablate, and the imported plugins
    whose module defines one."""
    specs = {m.__name__: s for s, m in _imported.items()}
    named = [table.get(model.get(key)) for key, table in _variant_tables().items() if isinstance(model.get(key), str)]
    modules = [str(getattr(c, "__module__", "")) for c in named if c is not None]
    return any(m.partition(".")[0] != "ablate" for m in modules), {specs[m] for m in modules if m in specs}


def _modules() -> list[ModuleType]:
    """The plugins' modules, with the top package of one inside a package (`my_pkg.variants`: its siblings too); never
    ablate's own, whose variants are built in whatever imported them."""
    found = [*_imported.values(), *_entry_modules]
    found += [sys.modules[top] for m in found if (top := m.__name__.partition(".")[0]) != m.__name__ and top in sys.modules]
    return [m for m in found if m.__name__.partition(".")[0] != "ablate"]


def from_plugins(model: dict) -> list[str]:
    """The variant keys of the model section `model` whose classes come from a plugin (a file, a module or package, an
    installed entry point), each with its file: ["model.positional='mine' (/home/me/mine.py)"]."""
    packages = {m.__name__.partition(".")[0] for m in _modules()}  # a plugin package's submodules too
    named = []
    for key, table in _variant_tables().items():
        cls = table.get(model.get(key)) if isinstance(model.get(key), str) else None
        if cls is not None and cls.__module__.partition(".")[0] in packages:
            module = sys.modules.get(cls.__module__)
            named.append(f"model.{key}='{model[key]}' ({getattr(module, '__file__', None) or cls.__module__})")
    return named


def raised_in(e: BaseException) -> str | None:
    """Where the traceback of `e` (or of the error it was raised from) last passed through a plugin's code (its file,
    or any file of its package): "FILE, line N, in forward: CODE"; None when it never did."""
    files, folders = set(), []
    for m in _modules():
        files.add(getattr(m, "__file__", None))
        folders += [str(Path(p)) + os.sep for p in getattr(m, "__path__", [])]  # a package's: every module in it
    while e is not None:
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename in files or f.filename.startswith(tuple(folders))]
        if frames:
            f = frames[-1]
            return f"{f.filename}, line {f.lineno}, in {f.name}" + (f": {f.line.strip()}" if f.line else "")
        e = e.__cause__ or e.__context__
    return None


def error_said(e: BaseException, one_line: bool = False) -> str | None:
    """An error raised in a plugin's code as every command says it, secrets masked: "a plugin raised TYPE: MESSAGE",
    then "  at FILE, line N, in forward: CODE"; None for any other error. `one_line`: the message on one line (a trial's
    fail reason keeps the line after it, where)."""
    if (where := raised_in(e)) is None:
        return None
    message = " ".join(redact(str(e)).split()) if one_line else redact(str(e))
    return f"a plugin raised {type(e).__name__}: {message}\n  at {redact(where)}"


# Where a file of plugins is named: in a run's config or on its command line, or in a sweep file, which takes no
# overrides on its command line and sets config keys for every row through `overrides`.
NAMED_IN = {
    "run": "plugins=[FILE] on the command line, or `plugins: [FILE]` in the config",
    "sweep": "`overrides: {plugins: [FILE]}` in the sweep file, or `plugins: [FILE]` in its base config",
}


def hint(model: dict, named_in: str = "run") -> str:
    """For a config naming unregistered variants: how a variant from the user's own file gets registered, in a run's
    terms or a sweep file's (`named_in`, a key of NAMED_IN)."""
    names = unregistered(model)
    if not names:
        return ""
    return f"\n  (if {' or '.join(names)} is defined in a file of your own, name the file so it is imported: {NAMED_IN[named_in]})"
