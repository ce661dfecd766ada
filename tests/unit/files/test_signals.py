"""SIGTERM raised as an exception, so a write in progress removes its temporary; the exit code a signal gives, also
when the write it cut short raised another error as it unwound (torch.save closing its file); stale temporaries of
dead writers removed by the next write of the same file, a live writer's kept."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ablate.files import signals
from ablate.files.atomic import remove_stale, replacing


def test_sigterm_raises_terminated_and_a_write_in_progress_leaves_the_old_file(tmp_path):
    target = tmp_path / "avg.ckpt"
    target.write_text("old")
    previous = signal.getsignal(signal.SIGTERM)
    signals.raise_on_sigterm()
    try:
        with pytest.raises(signals.Terminated), replacing(target) as tmp:
            tmp.write_text("half")
            os.kill(os.getpid(), signal.SIGTERM)  # between the temporary write and the rename
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["avg.ckpt"]


def test_exit_code_follows_the_chain_to_the_signal():
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("[enforce fail at inline_container.cc:672]")  # noqa: B904 (what torch does)
    except RuntimeError as e:
        assert signals.exit_code(e) == (130, "Ctrl-C (SIGINT)")
    assert signals.exit_code(signals.Terminated()) == (143, "SIGTERM")
    assert signals.exit_code(ValueError("x")) is None


def test_stale_temporaries_of_dead_writers_go_and_live_ones_stay(tmp_path):
    target = tmp_path / "results.csv"
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process has it
    with replacing(target) as tmp:
        live = tmp.name  # this process's own: alive
        stale = tmp.with_name(tmp.name.replace(f"-{os.getpid()}.", f"-{dead}."))
        stale.write_text("left by a kill")
        assert remove_stale(target) == [stale] and tmp.exists() and not stale.exists()
        tmp.write_text("new")
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["results.csv"] and live.endswith(".tmp")
    other = tmp_path / ".results.csv.zzzzzz-1.abcd.tmp"  # another host's: never ours to judge
    other.write_text("x")
    assert remove_stale(target) == [] and other.exists()


def test_a_signal_held_while_files_move_in_acts_when_the_last_is_in(tmp_path):
    """signals.held: a SIGTERM (or Ctrl-C) that arrives between two renames that belong together waits for the second
    and is raised after it, by the handler in force before; none arriving, nothing is raised and the handlers are back."""
    previous = signal.getsignal(signal.SIGTERM), signal.signal(signal.SIGINT, signal.default_int_handler)
    signals.raise_on_sigterm()
    moved = []
    try:
        with pytest.raises(signals.Terminated), signals.held():
            moved.append("table3.md")
            os.kill(os.getpid(), signal.SIGTERM)
            moved.append("table3.json")
        with pytest.raises(KeyboardInterrupt), signals.held():
            signal.raise_signal(signal.SIGINT)
            moved.append("study.db")
        with signals.held():
            moved.append("quiet")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
    assert moved == ["table3.md", "table3.json", "study.db", "quiet"]
