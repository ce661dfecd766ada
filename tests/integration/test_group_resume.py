"""`ablate train --members K --resume` is checked as a run's resume is (ablate.run.resume_checks), for the group and
each member: a changed config is refused unless forced, one that reshapes the model or changes the members always, an
edited corpus unless accepted; a refusal changes no file, and a forced or accepted resume trains on."""

from __future__ import annotations

import json
import re

import pytest
from helpers import run_cli, snapshot, write_experiment

pytestmark = pytest.mark.slow  # a group trains, then resumes


def test_a_group_resume_is_checked_as_a_runs_and_a_refusal_changes_nothing(tmp_path, capsys):
    path = write_experiment(tmp_path, "exp", max_steps=6, val_every_steps=3, log_every_steps=3)
    group = tmp_path / "exp"
    rc, out = run_cli(capsys, "train", str(path), "--members", "2")
    assert rc == 0, out
    before = snapshot(group)
    for extra, named in [
        (["train.lr_scale=3.0"], rf"train.lr_scale: 2.0 -> 3.0 \({group / 'config.yaml'}\); use --force"),
        (["train.warmup=[10, 20]"], rf"{group / 'seed=1,warmup=10'} holds no config.yaml, so it is not a member"),
        (["--members", "3"], "the group .* trains 2 members and this command asks for 3.*even with --force"),
        (["seeds=[5, 6]"], rf"{group / 'seed=5'} holds no config.yaml, so it is not a member of the group"),
        (["model.d_ff=48", "--force"], "model.d_ff change the shapes of the model's parameters"),
    ]:
        overrides, flags = [e for e in extra if "=" in e], [e for e in extra if "=" not in e]
        members = [] if "--members" in flags or any("=[" in e for e in overrides) else ["--members", "2"]
        rc, out = run_cli(capsys, "train", str(path), *overrides, *members, "--resume", *flags)
        assert rc != 0 and "Traceback" not in out and re.search(named, out), out
        assert snapshot(group) == before, extra  # refused before any file changed: no folder made, nothing rewritten

    for lang in ("en", "de"):  # one more pair
        with open(tmp_path / "corpus" / f"train.{lang}", "a") as f:
            f.write("one more line\n")
    rc, out = run_cli(capsys, "train", str(path), "--members", "2", "--resume")
    assert rc != 0 and "the run's data changed since it started" in out and "train.en" in out
    assert snapshot(group) == before
    rc, out = run_cli(capsys, "train", str(path), "--members", "2", "--resume", "--accept-data-change")
    assert rc == 0, out
    for member in ("seed=1", "seed=2"):
        assert json.loads((group / member / "fingerprint.json").read_text())["recorded"] == "resume-1"

    rc, out = run_cli(capsys, "train", str(path), "train.max_steps=9", "train.lr_scale=3.0", "--members", "2", "--resume", "--force")
    assert rc == 0, out
    for folder in (group, group / "seed=1", group / "seed=2"):
        assert "lr_scale: 2.0" in (folder / "config.before-resume-2.yaml").read_text(), folder
        assert "lr_scale: 3.0" in (folder / "config.yaml").read_text(), folder
    assert json.loads((group / "seed=2" / "summary.json").read_text())["steps"] == 9
