"""`ablate sweep`'s live view of its study (the picture of ablate.sweep.picture, refreshed every second): a rich Live
display on a terminal, plain lines elsewhere (CI, SLURM logs: a line per running trial when it starts, at each of its
validations, when it ends and every ABLATE_PROGRESS_EVERY seconds; never an escape code).
"""

from __future__ import annotations

import math
import os
import queue
import threading
from datetime import datetime
from typing import IO

import optuna
from rich.console import Console
from rich.text import Text

from ablate.messages.redact import redact
from ablate.sweep.picture import plain_summary, plain_trial, render
from ablate.sweep.snapshot import RUNNING, Snapshot, snapshot
from ablate.sweep.storage import make_storage


def plain_every_s() -> float:
    """ABLATE_PROGRESS_EVERY: plain output's line per running trial this often (seconds, default 60). Read when a
    sweep starts printing, so a bad value stops that sweep with its name, not every command that imports this."""
    raw = os.environ.get("ABLATE_PROGRESS_EVERY", "60")
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not value > 0:  # nan too; inf: a trial's line only at its validations and phases
        raise ValueError(f"ABLATE_PROGRESS_EVERY={raw!r} is not a number of seconds above 0 (e.g. ABLATE_PROGRESS_EVERY=30)")
    return value


class PlainPrinter:
    """Line-by-line progress for logs: a trial's line when it starts, reaches a new validation or changes phase, and at
    least every `every_s` seconds while it runs; the counts and best row whenever they change and with those lines."""

    def __init__(self, out: IO[str], every_s: float | None = None):
        self.out, self.every_s = out, plain_every_s() if every_s is None else every_s
        self._last: dict[int, tuple[float, tuple]] = {}
        self._ended: set[int] | None = None  # trials already over when the printer first looked are not announced
        self._summary: tuple | None = None
        self._summary_at = 0.0

    def update(self, snap: Snapshot) -> None:
        now, stamp = snap.taken, datetime.fromtimestamp(snap.taken).strftime("%H:%M:%S")
        lines = []
        ended = {v.number for v in snap.trials if v.state not in RUNNING}
        if self._ended is not None:
            lines += [plain_trial(v) for v in snap.trials if v.number in ended - self._ended]
        self._ended = ended
        for v in snap.running:
            key = (v.state == "starting", v.val_step)  # a line when training starts and at each new validation
            printed, seen = self._last.get(v.number, (0.0, None))
            if key != seen or now - printed >= self.every_s:
                lines.append(plain_trial(v))
                self._last[v.number] = (now, key)
        summary = (tuple(snap.counts.items()), None if snap.best is None else (snap.best.number, snap.best.value))
        if lines or summary != self._summary or now - self._summary_at >= self.every_s:
            lines.append(plain_summary(snap))
            self._summary, self._summary_at = summary, now
        for line in lines:
            self.out.write(f"[{stamp}] {line}\n")
        self.out.flush()


class LiveView:
    """Shows a running sweep from a thread of the parent `ablate sweep` process, which only waits for its workers.

    On a terminal, the workers' messages come through `post` (printed directly they would tear the display) and are
    shown above it, passwords masked. Reading the study or a progress file never stops the sweep: a failed read keeps
    the last picture.
    """

    def __init__(self, url: str, study_name: str, console: Console, live: bool, every_s: float = 1.0):
        self.url, self.study_name, self.console, self.live, self.every_s = url, study_name, console, live, every_s
        self._printer = None if live else PlainPrinter(console.file)  # here, not in the thread: a bad setting stops the sweep
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ablate-live-view", daemon=True)
        self._posted: queue.SimpleQueue[str] = queue.SimpleQueue()

    def post(self, line: str) -> None:
        """A line to show above the display (thread-safe)."""
        self._posted.put(line)

    def __enter__(self) -> LiveView:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _posted_lines(self) -> list[str]:
        lines = []
        while not self._posted.empty():
            lines.append(redact(self._posted.get()))
        return lines

    def _run(self) -> None:
        study, snap = None, None

        def take() -> Snapshot | None:
            nonlocal study
            try:
                if study is None:
                    study = optuna.load_study(study_name=self.study_name, storage=make_storage(self.url))
                return snapshot(study)
            except Exception:  # a locked or unreachable storage: keep the last picture, try again next time
                return snap

        if (printer := self._printer) is not None:
            while True:
                stopping = self._stop.wait(self.every_s)
                snap = take()
                if snap is not None:
                    printer.update(snap)
                if stopping:
                    return
        from rich.live import Live

        with Live(Text("starting workers..."), console=self.console, auto_refresh=False, transient=False) as live:
            while True:
                stopping = self._stop.wait(self.every_s)
                for line in self._posted_lines():
                    live.console.print(line, markup=False, highlight=False)
                snap = take()
                if snap is not None:
                    live.update(render(snap), refresh=True)
                if stopping:
                    return
