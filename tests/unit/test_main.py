"""`ablate`'s entry point: a Ctrl-C while the command line is still importing ends with one line and 130, not a
traceback, and `python -m ablate` is the same command."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from importlib.metadata import entry_points

import pytest

import ablate
from ablate import __main__ as entry

SAID = "ablate: stopped by Ctrl-C (SIGINT) while starting; nothing was written\n"

# Holds the import of ablate.cli (after touching MARKER) until a signal comes.
SLOW_IMPORT = """
import sys, time
from importlib.metadata import entry_points
from pathlib import Path

class Slow:
    def find_spec(self, name, path=None, target=None):
        if name == "ablate.cli":
            Path(sys.argv[1]).touch()
            time.sleep(60)
        return None

sys.meta_path.insert(0, Slow())
from ablate.__main__ import main
sys.exit(main())
"""


def test_the_installed_console_script_is_this_entry_point():
    assert entry_points(group="console_scripts")["ablate"].value == "ablate.__main__:main"


def test_a_ctrl_c_while_the_command_line_imports_ends_with_one_line_and_130(tmp_path):
    marker = tmp_path / "importing"
    proc = subprocess.Popen([sys.executable, "-c", SLOW_IMPORT, str(marker)], stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert (proc.returncode, err, out) == (130, SAID, "")  # was a KeyboardInterrupt traceback, killed by the signal


def test_without_a_signal_it_runs_the_command_line(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["ablate", "params", "--help"])
    try:
        entry.main()
    except SystemExit as e:
        assert e.code == 0
    assert "usage: ablate params" in capsys.readouterr().out


@pytest.mark.slow  # a whole `ablate` command (seconds): the default set stays under a minute
def test_python_dash_m_ablate_is_the_same_command():
    proc = subprocess.run([sys.executable, "-m", "ablate", "--version"], capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout.strip()) == (0, f"ablate {ablate.__version__}")


def test_a_ctrl_c_while_the_command_line_is_parsed_is_said_the_same(monkeypatch, capsys):
    from ablate import cli

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_parse", interrupted)
    assert cli.main(["params", "x.yaml"]) == 130
    assert capsys.readouterr().err == SAID
