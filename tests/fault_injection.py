"""Faults for the fault tests, injected the way a researcher adds a callback (a plugin registering in CALLBACKS), so
no config key or environment variable users see exists for them: a loss that turns NaN from a step on, and a real
signal the training process sends itself at a step. Commands that do not train get their signal from this file run
as a wrapper (`signal_on_write`, below): no switch in ablate exists for it either.

`fault_plugin(folder, ...)` writes the plugin file a test names in its config's `plugins:`. Each fault is bound to
the runs it is meant for (`when`: flattened config keys and values, e.g. the out_dir or a sweep row), so a test
process that imports the plugin while loading a config (a sweep validating its rows) trains nothing differently.
A signal fires once per marker file: a run resumed with the same config does not preempt itself again."""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import lightning as L

TESTS = Path(__file__).resolve().parent


def fault_plugin(folder: Path, *, nan_from: int | None = None, signal_at: str | None = None, when: dict | None = None) -> Path:
    """A plugin file under `folder` injecting the faults asked for into the runs matching `when` (all when None):
    `nan_from` (the training loss is NaN from that global step on), `signal_at` ("STEP[@val]:SIGNAME[:RANK]": the
    process of global rank RANK, default 0, sends itself SIGNAME as optimizer step STEP starts, 0-based, or with
    @val as the validation after STEP steps does, or with 0@setup as the fit sets up, before Lightning's own signal
    handlers; SIGNAME+SIGNAME sends two, one right after the other). Returns its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(repr((str(folder), nan_from, signal_at, sorted((when or {}).items()))).encode()).hexdigest()[:12]
    path = folder / f"faults_{key}.py"
    lines = ["import sys", f"sys.path.insert(0, {str(TESTS)!r})", "import fault_injection"]
    if nan_from is not None:
        lines.append(f"fault_injection.nan_from({nan_from}, when={when!r}, name={key!r})")
    if signal_at is not None:
        lines.append(f"fault_injection.signal_at({signal_at!r}, when={when!r}, once={str(folder / f'fired_{key}')!r}, name={key!r})")
    path.write_text("\n".join(lines) + "\n")
    return path


def _matches(module: L.LightningModule, when: dict | None) -> bool:
    from ablate.config import flatten, to_dict

    config = flatten(to_dict(module.cfg))
    return all(config.get(k) == v for k, v in (when or {}).items())


def nan_from(step: int, when: dict | None = None, name: str = "") -> None:
    import lightning as L

    from ablate.registry import register
    from ablate.run.callbacks import CALLBACKS

    @register(CALLBACKS, f"test-nan-from-{name}")
    class NanLoss(L.Callback):
        """The summed loss of every training batch from global step `step` on times NaN, where the run computes it
        (before its NaN guard reads it): the guard, the save guard and the error are the run's own."""

        def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            if not _matches(pl_module, when):
                return
            compute = pl_module._step

            def poisoned(batch: dict):
                loss, nll, ntok = compute(batch)
                if pl_module.training and pl_module.global_step >= step:
                    loss = loss * float("nan")
                return loss, nll, ntok

            pl_module._step = poisoned


def signal_at(spec: str, when: dict | None = None, once: str | None = None, name: str = "") -> None:
    at, signame, *rank = spec.split(":")
    at_step, _, phase = at.partition("@")
    signums = [signal.Signals[f"SIG{name.removeprefix('SIG')}"] for name in signame.split("+")]
    import lightning as L

    from ablate.registry import register
    from ablate.run.callbacks import CALLBACKS

    @register(CALLBACKS, f"test-signal-at-{name}")
    class SelfSignal(L.Callback):
        def _fire(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            if trainer.global_step != int(at_step) or trainer.global_rank != (int(rank[0]) if rank else 0):
                return
            if not _matches(pl_module, when) or (once and os.path.exists(once)):
                return
            if once:
                Path(once).touch()
            for signum in signums:  # each handled before the next is sent (Python runs a handler as os.kill returns)
                os.kill(os.getpid(), signum)

        def setup(self, trainer, pl_module, stage: str) -> None:
            if phase == "setup" and stage == "fit":
                self._fire(trainer, pl_module)

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            if phase not in ("val", "setup"):
                self._fire(trainer, pl_module)

        def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
            if phase == "val" and not trainer.sanity_checking:
                self._fire(trainer, pl_module)


# -- signals while a command writes --------------------------------------------------------------------------------

WRITE_POINTS = ("before", "between", "after")


def signal_on_write(point: str, signame: str, pattern: str = "*", record: str | None = None) -> None:
    """From now on, this process sends itself SIGNAME once, at `point` of the first write of a target matching
    `pattern` (fnmatch on its absolute path): "before" as `ablate.files.atomic.replacing` is entered (nothing of that
    file written yet; with "*", before the command's first write), "between" when its temporary is written and synced
    and is about to be renamed over the target, "after" just after that rename (an archive's folder moved into place
    counts: every os.replace is watched). The signal is delivered to the main thread before this returns, so the
    command's handler acts at exactly that point. With `record`, what the target held when the signal fired (and, at
    "between", what the rename would have put there) is written there as JSON: the test's oracle.

    SIGNAME "await:FIFO" sends nothing: at the point the process writes its record, says so on the named pipe FIFO
    and waits there for a signal from outside (a test sends the real one, as a user's Ctrl-C or a job's SIGTERM).

    Call it before the command imports its modules (they import `replacing` by name); `main` below does."""
    from ablate.files import atomic

    if point not in WRITE_POINTS:
        raise ValueError(f"point {point!r} is not one of {WRITE_POINTS}")
    fifo = signame.removeprefix("await:") if signame.startswith("await:") else None
    signum = None if fifo else signal.Signals[f"SIG{signame.removeprefix('SIG')}"]
    fired = []

    def fire(at: str, target, new=None) -> None:
        if fired or at != point or not fnmatch.fnmatch(os.path.abspath(target), pattern):
            return
        fired.append(at)
        if record:  # the target as the signal found it, and at "between" what the rename would have put there
            seen = {"point": at, "target": os.path.abspath(target), "now": digest(target)}
            if new is not None:
                seen["new"] = digest(new)
            Path(record).write_text(json.dumps(seen))
        if fifo is None:
            signal.pthread_kill(threading.main_thread().ident, signum)  # handled (raised) before this call returns
            return
        with open(fifo, "w") as announce:
            announce.write(f"{at} {os.path.abspath(target)}\n")
        while True:  # the handler raises out of pause(); a signal before it raises at the next bytecode
            signal.pause()

    original = atomic.replacing

    @contextlib.contextmanager
    def replacing(target, *args, **kwargs):
        fire("before", target)
        with original(target, *args, **kwargs) as tmp:
            yield tmp

    real_replace, real_link = os.replace, os.link

    def replace(src, dst, **kwargs):
        fire("between", dst, src)
        real_replace(src, dst, **kwargs)
        fire("after", dst)

    def link(src, dst, **kwargs):  # a file written new_only (no --force) is linked in, not renamed
        fire("between", dst, src)
        real_link(src, dst, **kwargs)
        fire("after", dst)

    atomic.replacing = replacing
    os.replace, os.link = replace, link  # every module calls them through os: atomic's and the archive's moves alike


def digest(path) -> str | None:
    """sha256 of a file's bytes, or of a folder's files (relative paths and bytes), or None when nothing is there."""
    path = Path(path)
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    if not path.is_dir():
        return None
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(path)).encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def main(argv: list[str]) -> int:
    """`python tests/fault_injection.py POINT SIGNAME PATTERN RECORD -- ABLATE ARGS...`: `ablate ARGS` with
    `signal_on_write(POINT, SIGNAME, PATTERN, RECORD)` in force."""
    point, signame, pattern, record, dashes, *args = argv
    if dashes != "--":
        raise SystemExit(main.__doc__)
    signal_on_write(point, signame, pattern, record)
    from ablate.cli import main as ablate

    return ablate(args)


if __name__ == "__main__":
    sys.argv[0] = "ablate"
    sys.exit(main(sys.argv[1:]))
