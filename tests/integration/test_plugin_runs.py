"""Plugins through the installed command line, as a user runs them: a file of the user's registering a kernel, a
relative position scheme and a logit scaling trains (`ablate train ... plugins=[FILE]`), in a two-worker sweep whose
base config names it, under DDP, and evaluates with `--plugins`; a checkpoint alone never imports it; and the
README's example works as written. The plugin notes every process that imports it, so "never imported" is checked,
not assumed. (Named apart from tests/unit/test_plugins.py: pytest's default import mode needs unique basenames.)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import tiny_experiment, trial_states
from user_plugin import plugin_source

from ablate.config import to_dict

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"

VARIANTS = plugin_source("plug")
USE = ["model.attention=plug_cosine", "model.positional=plug_distance", "model.attention_scaling=plug_half"]


def ablate(cwd: Path, *args: str, stdin: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """The installed `ablate` console script (what users run), else `python -m ablate.cli`."""
    script = Path(sys.executable).with_name("ablate")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "ablate.cli"]
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1",
           "ABLATE_CACHE": str(cwd / "home-cache")}  # fmt: skip
    for key in ("ABLATE_SWEEP_STORAGE",):  # nothing from the caller's shell may redirect the run
        env.pop(key, None)
    return subprocess.run([*cmd, *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout)


def ok(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert proc.returncode == 0, f"{proc.args}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc


def refused(proc: subprocess.CompletedProcess) -> str:
    """The one-line error of a user mistake: exit 2, no traceback."""
    assert proc.returncode == 2, f"{proc.args}: exit {proc.returncode}\n{proc.stderr[-5000:]}"
    assert "Traceback" not in proc.stderr
    return proc.stderr


def importers(folder: Path) -> list[int]:
    """The ids of the processes that imported the plugin in `folder`, one per import."""
    marker = folder / "imported.txt"
    return [int(x) for x in marker.read_text().split()] if marker.exists() else []


def experiment(folder: Path, **extra) -> Path:
    """A seconds-long experiment on a synthetic corpus, as a YAML file in `folder`."""
    cfg = to_dict(tiny_experiment(folder, train={"max_steps": 20, "val_every_steps": 10, "num_threads": 1, "val_max_sentences": 10}))
    cfg.update(extra)
    path = folder / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture
def work(tmp_path) -> Path:
    """A folder holding the user's variants.py and exp.yaml."""
    (tmp_path / "variants.py").write_text(VARIANTS)
    experiment(tmp_path)
    return tmp_path


def test_train_then_evaluate_and_translate_with_plugins_given_and_never_from_the_checkpoint(work):
    plugin = str(work / "variants.py")
    ok(ablate(work, "train", "exp.yaml", "plugins=[variants.py]", *USE, "out_dir=run"))
    saved = yaml.safe_load((work / "run" / "config.yaml").read_text())
    assert saved["plugins"] == [plugin] and saved["model"]["attention"] == "plug_cosine"
    assert len(importers(work)) == 1
    ckpt = "run/checkpoints/best.ckpt"

    (work / "imported.txt").unlink()
    names = "model.attention='plug_cosine', model.attention_scaling='plug_half', model.positional='plug_distance' are not registered"
    expected = f"checkpoint {ckpt} needs plugin {plugin} ({names}); pass --plugins {plugin}\n"
    assert refused(ablate(work, "evaluate", ckpt, "--split", "test")) == f"ablate evaluate: error: {expected}"
    assert refused(ablate(work, "translate", ckpt, stdin="red dog\n")) == f"ablate translate: error: {expected}"
    assert importers(work) == []  # the checkpoint and the run's config.yaml only record the plugin

    result = json.loads(ok(ablate(work, "evaluate", ckpt, "--split", "test", "--plugins", "variants.py")).stdout)
    assert result["sentences"] == 40 and 0 <= result["bleu"] <= 100
    out = ok(ablate(work, "translate", ckpt, "--plugins", plugin, stdin="red dog\nthe cat\n")).stdout
    assert len(out.splitlines()) == 2
    assert len(importers(work)) == 2


def test_resume_takes_the_plugins_given_and_refuses_other_ones(work):
    ok(ablate(work, "train", "exp.yaml", "plugins=[variants.py]", *USE, "out_dir=run", "train.max_steps=10"))
    err = refused(ablate(work, "train", "exp.yaml", *USE, "out_dir=run", "--resume"))
    assert "model.attention='plug_cosine' is not one of" in err and "plugins=[FILE] on the command line" in err
    (work / "moved").mkdir()
    shutil.copy(work / "variants.py", work / "moved" / "variants.py")
    err = refused(ablate(work, "train", "exp.yaml", "plugins=[moved/variants.py]", *USE, "out_dir=run", "--resume"))
    assert f"--resume: the config differs from the run's saved one in plugins: ['{work / 'variants.py'}'] -> " in err
    ok(ablate(work, "train", "exp.yaml", "plugins=[variants.py]", *USE, "out_dir=run", "train.max_steps=10", "--resume"))


def test_a_plugin_edited_since_training_is_refused_on_resume_and_named_by_evaluate(work):
    plugin = work / "variants.py"
    ok(ablate(work, "train", "exp.yaml", "plugins=[variants.py]", *USE, "out_dir=run", "train.max_steps=10"))
    then = hashlib.sha256(plugin.read_bytes()).hexdigest()
    plugin.write_text(VARIANTS.replace("* scale", "* scale * 0"))  # its kernel edited: every logit 0
    now = hashlib.sha256(plugin.read_bytes()).hexdigest()
    err = refused(ablate(work, "train", "exp.yaml", "plugins=[variants.py]", *USE, "out_dir=run", "train.max_steps=10", "--resume"))
    assert f"--resume: plugin {plugin} (sha256 {then[:12]} -> {now[:12]}) changed since " in err
    assert err.rstrip().endswith("use --force to resume anyway with it as it is now")

    ckpt = "run/checkpoints/last.ckpt"
    proc = ok(ablate(work, "evaluate", ckpt, "--split", "test", "--plugins", "variants.py"))
    edited = f"checkpoint {ckpt}: plugin {plugin} changed since training (sha256 {then[:12]} then, {now[:12]} now)"
    assert edited in proc.stderr and json.loads(proc.stdout)["sentences"] == 40
    (work / "other").mkdir()
    shutil.copy(plugin, work / "other" / "variants.py")  # another file registering its variants' names
    proc = ok(ablate(work, "evaluate", ckpt, "--split", "test", "--plugins", "other/variants.py"))
    assert (
        f"it was trained with {plugin} (sha256 {then[:12]}), and its variants now come from {work / 'other' / 'variants.py'}" in proc.stderr
    )

    forced = ok(
        ablate(work, "train", "exp.yaml", "plugins=[variants.py]", *USE, "out_dir=run", "train.max_steps=20", "--resume", "--force")
    )
    assert f"resuming with plugin {plugin} (sha256 {then[:12]} -> {now[:12]}) as it is now" in forced.stderr
    proc = ok(ablate(work, "evaluate", ckpt, "--split", "test", "--plugins", "variants.py"))
    assert "changed since training" not in proc.stderr  # the resumed checkpoint records the plugin it trained on with


def test_a_broken_or_clashing_plugin_is_named_by_the_command_line(work):
    (work / "broken.py").write_text("import torch\n\nraise RuntimeError('needs CUDA 13')\n")
    err = refused(ablate(work, "params", "exp.yaml", "plugins=[broken.py]"))
    assert err == f"ablate params: error: plugin {work / 'broken.py'} failed to import (line 3): RuntimeError: needs CUDA 13\n"
    (work / "other").mkdir()
    shutil.copy(work / "variants.py", work / "other" / "variants.py")
    err = refused(ablate(work, "params", "exp.yaml", "plugins=[variants.py,other/variants.py]"))
    assert f"plugin {work / 'other' / 'variants.py'} registers a name that is taken: " in err
    assert f"PlugCosine ({work / 'other' / 'variants.py'}) as 'plug_cosine': the name is taken by " in err
    assert f"PlugCosine ({work / 'variants.py'})" in err


def test_a_sweep_imports_the_plugin_its_base_yaml_names_in_every_worker_and_trial(tmp_path):
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "variants.py").write_text(VARIANTS)
    experiment(tmp_path / "exp", plugins=["variants.py"])  # relative to exp/exp.yaml, not to where the sweep runs
    (tmp_path / "sweeps").mkdir()
    sweep = {"name": "plugins", "base": "../exp/exp.yaml", "out_dir": str(tmp_path / "study"), "overrides": {"logging.wandb": False},
             "variants": {"cosine": {"model.attention": "plug_cosine"}, "distance": {"model.positional": "plug_distance"},
                          "half": {"model.attention_scaling": "plug_half"}}}  # fmt: skip
    (tmp_path / "sweeps" / "plugins.yaml").write_text(yaml.safe_dump(sweep))
    proc = ok(ablate(tmp_path, "sweep", "sweeps/plugins.yaml", "--workers", "2", timeout=600))
    logs = "".join(f"--- {log}\n{log.read_text()[-2000:]}" for log in (tmp_path / "study").rglob("train.log"))
    # Each row once; a worker may also open a trial it finds no row left for (failed at once, as in test_sweep.py).
    assert trial_states(tmp_path / "study" / "study.db").count("COMPLETE") == 3, proc.stderr[-5000:] + logs
    plugin = str(tmp_path / "exp" / "variants.py")
    saved = [yaml.safe_load(path.read_text())["plugins"] for path in (tmp_path / "study" / "trials").glob("*/config.yaml")]
    assert saved == [[plugin]] * 3
    # The sweep's own process, its two worker processes and the three trial processes each imported it, once.
    pids = importers(tmp_path / "exp")
    assert len(pids) == len(set(pids)) >= 6


def test_every_ddp_rank_imports_the_plugin(work):
    """Lightning starts rank 1 by re-running the command line, which loads the config (and so the plugin) again."""
    proc = ablate(work, "train", "exp.yaml", "plugins=[variants.py]", *USE, "out_dir=ddp", "train.devices=2", "train.strategy=ddp",
                  "train.accelerator=cpu", "train.max_steps=6", "train.val_every_steps=3")  # fmt: skip
    assert len(set(importers(work))) == 2, proc.stderr[-3000:]
    ok(proc)
    assert (work / "ddp" / "checkpoints" / "last.ckpt").exists()


def test_the_readme_example_works_as_written(tmp_path):
    """Save the README's kernel as the file it names, run its commands (on a tiny experiment of the same name)."""
    section = README.read_text().split("## Adding a variant", 1)[1].split("\n## ", 1)[0]
    name = re.search(r"Save this as `(\w+\.py)`", section).group(1)
    (tmp_path / name).write_text(re.search(r"```python\n(.*?)```", section, re.S).group(1))
    commands = [shlex.split(line) for block in re.findall(r"```bash\n(.*?)```", section, re.S) for line in block.splitlines()]
    train, evaluate = (next(c for c in commands if c[:2] == ["ablate", verb]) for verb in ("train", "evaluate"))
    experiment(tmp_path)
    Path(tmp_path, train[2]).parent.mkdir(parents=True, exist_ok=True)
    shutil.move(tmp_path / "exp.yaml", tmp_path / train[2])  # the experiment the README names, made tiny
    ok(ablate(tmp_path, *train[1:]))
    assert json.loads(ok(ablate(tmp_path, *evaluate[1:])).stdout)["sentences"] == 40
