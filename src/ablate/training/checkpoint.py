"""Reading checkpoints safely, rebuilding a model from one, and averaging the last K (Sec. 6.1).

Checkpoints are loaded with `torch.load(weights_only=True)`: a file crafted to run code when
unpickled is refused, not executed. Writes go to a temp file and are renamed into place, so an
interrupted write never replaces a good file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import re
import zipfile
from pathlib import Path
from typing import NoReturn

import torch

from ablate import plugins
from ablate.config import ConfigError, ExperimentConfig
from ablate.data.datasets import cache_dir
from ablate.data.tokenizer import Tokenizer
from ablate.experiment import from_dict
from ablate.files.atomic import replacing, stream
from ablate.files.destination import is_stream
from ablate.model import Transformer, build_transformer

log = logging.getLogger(__name__)


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or is not an ablate checkpoint; names the file."""


def load_checkpoint(path: str | os.PathLike, mmap: bool = False) -> dict:
    """`mmap`: tensors stay on disk until touched, to read a checkpoint's bookkeeping (global_step) cheaply, so its
    checksums are not read either (`check_intact`); a full load checks them."""
    path = Path(path)
    if path.is_dir():
        folder = path if path.name == "checkpoints" else path / "checkpoints"
        found = sorted(p.name for p in folder.glob("*.ckpt"))
        first = next((n for n in ("best.ckpt", "avg.ckpt", "last.ckpt") if n in found), found[0] if found else None)
        raise CheckpointError(
            f"{path} is a folder, not a checkpoint: "
            + (
                f"give a file, such as {folder / first} ({folder} holds {', '.join(found[:5])})"
                if first
                else f"{folder} holds no checkpoint"
            )
        )
    if not path.is_file():
        there = sorted(p.name for p in path.parent.glob("*.ckpt")) if path.parent.is_dir() else []
        # best.ckpt comes with a validation: a run shorter than train.val_every_steps has last.ckpt alone
        held = f" ({path.parent} holds {', '.join(there[:5])})" if there else ""
        raise CheckpointError(f"checkpoint not found: {path}{held}")
    if not zipfile.is_zipfile(path):  # torch.save's archive; torch would blame anything else on its pickling or mmap
        with open(path, "rb") as f:
            start = f.read(4)
        what = (
            "the file is empty" if not start
            else "cut short: a zip archive without its end, from a save or a copy stopped midway" if start == b"PK\x03\x04"
            else "a torch checkpoint is a zip archive, this file is not one"
        )  # fmt: skip
        raise CheckpointError(f"{path}: not a readable checkpoint ({what})")
    if not mmap:
        check_intact(path)
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as e:
        if mmap:  # not read whole before: a part whose bytes changed says so, not what unpickling them then hit
            check_intact(path)
        _unreadable(path, e)
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt or "hyper_parameters" not in ckpt:
        raise CheckpointError(f"{path}: not an ablate checkpoint (no state_dict / hyper_parameters)")
    return ckpt


def _unreadable(path: Path, e: Exception) -> NoReturn:
    if isinstance(e, pickle.UnpicklingError):  # torch refused an object that is not a tensor or plain data
        raise CheckpointError(
            f"{path}: holds Python objects that ablate will not unpickle (it reads only tensors and plain "
            "data from a checkpoint, so that opening one can never run code); it was not written by "
            "ablate, or was altered since"
        ) from None
    # truncated zip, not a torch file, ...
    first = (str(e).splitlines() or ["the file is empty" if path.stat().st_size == 0 else "no message"])[0][:200]
    raise CheckpointError(f"{path}: not a readable checkpoint ({type(e).__name__}: {first})") from None


def check_intact(path: str | os.PathLike) -> None:
    """A CheckpointError where a part of the checkpoint (a zip archive) fails its CRC-32: bytes changed after torch.save
    wrote them (a disk or a copy gone wrong). torch.load does not check: damaged weights load as garbage (NaN), an
    evaluation scores 0 and a resumed run "diverges". Reads the whole file once (GB/s, beside a load's cost)."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, EOFError, OSError) as e:  # unreadable in another way: torch.load's own error names it
        log.debug("%s: not checked (%s)", path, e)
        return
    if bad is not None:
        raise CheckpointError(
            f"{path}: damaged: its part {bad} fails its checksum (its bytes changed after it was written, by a disk or a "
            "copy gone wrong); use another checkpoint of the run"
        )


def save_atomic(obj: dict, path: str | os.PathLike, new_only: bool = False) -> None:
    if is_stream(path):  # `ablate average -o /dev/stdout`, a pipe: written into, nothing replaced (nor truncated)
        with stream(path) as f:
            torch.save(obj, f)
        return
    with replacing(path, new_only) as tmp, open(tmp, "wb") as f:  # replacing syncs it, and names the file on a full disk
        torch.save(obj, f)


def checkpoint_config(ckpt: dict, source: str | os.PathLike) -> dict:
    """The saved config of a loaded checkpoint (hyper_parameters.config, a dict with a `model` section); a
    CheckpointError naming `source` (the file) and the field when it is missing or damaged, before anything reads it."""
    hp = ckpt.get("hyper_parameters")
    if not isinstance(hp, dict):
        raise CheckpointError(f"{source}: field hyper_parameters is damaged (a {type(hp).__name__}, not a mapping)")
    if "config" not in hp and isinstance(hp.get("configs"), list):  # ablate.training.member_module's: K members' weights
        members = [c.get("out_dir") for c in hp["configs"] if isinstance(c, dict)]
        raise CheckpointError(
            f"{source} is a member group's checkpoint ({len(hp['configs'])} members' weights stacked), which only the group "
            f"resumes from: give a member's own, in MEMBER/checkpoints/ (its members: {', '.join(map(str, members[:4]))}"
            + (" ..." if len(members) > 4 else "")
            + ")"
        )
    config = _field(hp, "config", dict, source)
    if not isinstance(config.get("model"), dict):
        raise CheckpointError(f"{source}: field hyper_parameters.config.model is damaged or missing ({config.get('model')!r:.60})")
    return config


def _field(hp: dict, name: str, kind: type, source: str | os.PathLike):
    if name not in hp:
        raise CheckpointError(f"{source}: field hyper_parameters.{name} is missing")
    value = hp[name]
    if not isinstance(value, kind) or isinstance(value, bool) or (kind is int and value < 1):
        raise CheckpointError(f"{source}: field hyper_parameters.{name} is damaged ({value!r:.60}, a {type(value).__name__})")
    return value


def tokenizer_from_checkpoint(ckpt: dict, source: str = "checkpoint") -> Tokenizer:
    """The SentencePiece model stored inside the checkpoint, written once to a content-addressed cache file (written
    again when its bytes no longer match its name)."""
    proto = ckpt.get("tokenizer_model")
    if proto is None or (isinstance(proto, bytes) and not proto):
        raise CheckpointError(f"{source}: holds no tokenizer (was it written by `ablate train`?)")
    if not isinstance(proto, bytes):
        raise CheckpointError(f"{source}: field tokenizer_model is damaged (a {type(proto).__name__}, not a SentencePiece model's bytes)")
    digest = hashlib.sha256(proto).hexdigest()[:16]
    path = cache_dir() / "tokenizers" / "from-checkpoints" / f"{digest}.model"
    if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest()[:16] != digest:  # absent, or damaged since
        path.parent.mkdir(parents=True, exist_ok=True)
        with replacing(path) as tmp:
            tmp.write_bytes(proto)
    try:
        return Tokenizer(path)
    except (RuntimeError, ValueError, OSError) as e:  # sentencepiece: "could not parse ModelProto"; wrong special ids
        path.unlink(missing_ok=True)  # never a cached tokenizer
        why = str(e).replace(str(path), "its bytes").splitlines()[0][:200]
        raise CheckpointError(f"{source}: field tokenizer_model is damaged (not a usable SentencePiece model: {why})") from None


def model_from_checkpoint(path: str | os.PathLike) -> tuple[Transformer, ExperimentConfig, Tokenizer]:
    """Rebuild the Transformer, its config and tokenizer from a checkpoint written by `ablate train`; a plugin whose
    contents differ from those the checkpoint records is a warning, naming it."""
    ckpt = load_checkpoint(path)
    config, vocab_size = checkpoint_config(ckpt, path), _field(ckpt["hyper_parameters"], "vocab_size", int, path)
    if problem := plugins.needed(f"checkpoint {path}", config):  # not damage: a variant from a plugin not imported
        raise ConfigError(problem)
    changed = plugins.changed_since_training(f"checkpoint {path}", ckpt.get(plugins.PLUGIN_HASHES), config["model"])
    for line in changed:
        log.warning(line)  # evaluate, translate, table --split test: scored with the code imported now, said once
    try:
        cfg = from_dict(config)
    except (ConfigError, ValueError, TypeError) as e:
        raise CheckpointError(f"{path}: field hyper_parameters.config does not load: {str(e).removeprefix('saved config: ')}") from None
    model = build_transformer(cfg.model, vocab_size)
    state = {k.removeprefix("model."): v for k, v in weights(ckpt, path).items() if k.startswith("model.")}
    try:
        model.load_state_dict(state)
    except RuntimeError as e:  # torch's first line alone ("Error(s) in loading state_dict") named no key
        found = [line.strip().rstrip(".")[:400] for line in str(e).splitlines()[1:] if line.strip()]
        shown = [entry for i, entry in enumerate(found) if i == 0 or len("; ".join(found[: i + 1])) <= 400]
        more = f"; and {len(found) - len(shown)} more" if len(found) > len(shown) else ""
        why = "; a plugin changed since training (said above): its parameters may be what differs" if changed else ""
        raise CheckpointError(f"{path}: weights do not fit the saved config ({'; '.join(shown) or str(e)}{more}){why}") from None
    return model.eval(), cfg, tokenizer_from_checkpoint(ckpt, str(path))


def weights(ckpt: dict, source: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The checkpoint's state_dict, a CheckpointError naming `source` where it is not a mapping of names to tensors."""
    state = ckpt["state_dict"]
    if not isinstance(state, dict):
        raise CheckpointError(f"{source}: field state_dict is damaged (a {type(state).__name__}, not a mapping)")
    for k, v in state.items():
        if not isinstance(v, torch.Tensor):
            raise CheckpointError(f"{source}: field state_dict is damaged ({k!r:.60} is not a tensor: {v!r:.40})")
    return state


def average_checkpoints(paths: list[str | os.PathLike]) -> dict:
    """Mean of the model weights of several checkpoints of one run; the rest is taken from the last."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    ckpts = [load_checkpoint(p) for p in paths]
    configs = [checkpoint_config(c, p) for p, c in zip(paths, ckpts)]
    models = [c["model"] for c in configs]
    last = weights(ckpts[-1], paths[-1])
    for p, c, model in zip(paths, ckpts, models):
        w = weights(c, p)
        # The same model section may hold another vocabulary (data.vocab_size): other shapes, or other tokens per row.
        if w.keys() != last.keys() or model != models[-1] or any(w[k].shape != v.shape for k, v in last.items()):
            raise CheckpointError(f"{p}: a different model from {paths[-1]}; only checkpoints of one run can be averaged")
        if c.get("tokenizer_model") != ckpts[-1].get("tokenizer_model"):
            raise CheckpointError(f"{p}: another tokenizer than {paths[-1]}'s; only checkpoints of one run can be averaged")
    _refuse_other_runs_and_repeats(paths, ckpts, configs)
    keys = last.keys()
    avg = {}
    for k in keys:
        tensors = [c["state_dict"][k] for c in ckpts]
        avg[k] = torch.stack([t.double() for t in tensors]).mean(0).to(tensors[0].dtype) if tensors[0].is_floating_point() else tensors[-1]
    out = {k: v for k, v in ckpts[-1].items() if k not in ("optimizer_states", "lr_schedulers", "callbacks", "loops")}
    out["state_dict"] = avg
    out["averaged_from"] = [str(p) for p in paths]
    return out


def run_identity(config: dict) -> tuple:
    """What tells one run's checkpoints from another's of the same model and data where a checkpoint holds no run id
    (saved before ablate wrote one): its seed, and its place in a member group."""
    return config.get("seed"), (config.get("members") or {}).get("index")


def _refuse_other_runs_and_repeats(paths: list, ckpts: list[dict], configs: list[dict]) -> None:
    """Two runs of one model and data (seeds, a group's members, rows differing only in train.*) pass the shape and
    tokenizer checks, and their mean is no run's weights; a checkpoint named twice, or its step saved twice (last.ckpt
    and step=N.ckpt), weighs double. Run ids are compared where both checkpoints hold one (a run resumed across the
    version that began writing them has both kinds)."""
    run = [run_identity(c) for c in configs]
    ids = [c.get("run_id") if isinstance(c.get("run_id"), str) else None for c in ckpts]  # damaged: unknown
    seen: dict = {}
    for p, c, who, run_id in zip(paths, ckpts, run, ids):
        if who != run[-1]:
            raise CheckpointError(
                f"{p}: another run than {paths[-1]}'s (seed {who[0]}, member {who[1]}; not seed {run[-1][0]}, member "
                f"{run[-1][1]}); only checkpoints of one run can be averaged"
            )
        if run_id and ids[-1] and run_id != ids[-1]:
            raise CheckpointError(
                f"{p}: another run than {paths[-1]}'s (the same seed and model, trained apart: run id {run_id[:8]}, not "
                f"{ids[-1][:8]}); only checkpoints of one run can be averaged"
            )
        for key in (("path", os.path.realpath(p)), ("step", c.get("global_step"))):
            if key[1] is not None and key in seen:
                what = "the same file as" if key[0] == "path" else f"step {key[1]}, as does"
                raise CheckpointError(f"{p}: {what} {seen[key]}, so it would count twice in the mean; name each step once")
            seen[key] = p


def step_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """The run's periodic checkpoints (checkpoints/step=N.ckpt), oldest first."""
    found = []
    for p in (Path(run_dir) / "checkpoints").glob("step=*.ckpt"):
        m = re.fullmatch(r"step=(\d+)\.ckpt", p.name)
        if m:
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]
