"""What `--resume` checks before any file changes (ablate.run.resume_checks), shared by a run and a member group: a
changed config is refused unless forced and always where it reshapes the model, and a forced one is kept beside the
new; an edited corpus is refused unless accepted."""

from __future__ import annotations

import hashlib
import logging

import pytest
import torch
import yaml
from helpers import tiny_sections

from ablate import plugins
from ablate.config import to_yaml
from ablate.experiment import load_config
from ablate.model.scaling import SCALING
from ablate.registry import restoring
from ablate.run.fingerprint import record_fingerprint
from ablate.run.resume_checks import (
    checked_config_changes,
    checked_data,
    checked_plugins,
    fingerprint_to_record,
    keep_forced_config,
    remove_interrupted_saves,
    resume_attempt,
    set_aside_results,
    shape_changes,
)
from ablate.run.rundir import changes_from_saved_config

MODEL = {"enc_layers": 1, "dec_layers": 1, "d_model": 16, "d_ff": 32, "heads": 2, "dropout": 0.0}


def config(out, model: dict | None = None, **sections):
    return load_config(model={**MODEL, **(model or {})}, data={"vocab_size": 64}, out_dir=str(out), **sections)


def _saved(out, cfg) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(to_yaml(cfg))


def saved_run(out, **train):
    cfg = load_config(model=MODEL, data={"vocab_size": 64}, out_dir=str(out), train=train)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(to_yaml(cfg))
    return cfg


def test_a_config_change_is_refused_naming_key_and_file_unless_forced(tmp_path):
    same = saved_run(tmp_path, lr_scale=1.0)
    assert checked_config_changes(tmp_path, same, force=False) == {}
    changed = load_config(model=MODEL, data={"vocab_size": 64}, out_dir=str(tmp_path), train={"lr_scale": 2.0})
    with pytest.raises(ValueError, match=rf"train.lr_scale: 1.0 -> 2.0 \({tmp_path / 'config.yaml'}\); use --force"):
        checked_config_changes(tmp_path, changed, force=False)
    assert checked_config_changes(tmp_path, changed, force=True) == {"train.lr_scale": (1.0, 2.0)}


def test_a_change_that_reshapes_the_model_is_refused_even_forced(tmp_path):
    saved_run(tmp_path)
    wider = load_config(model={**MODEL, "d_ff": 64}, data={"vocab_size": 64}, out_dir=str(tmp_path))
    with pytest.raises(ValueError, match="model.d_ff change the shapes of the model's parameters.*even with --force"):
        checked_config_changes(tmp_path, wider, force=True)


def test_a_forced_config_is_the_runs_from_now_on_and_the_old_one_is_kept(tmp_path):
    saved_run(tmp_path, lr_scale=1.0)
    before = (tmp_path / "config.yaml").read_text()
    changed = load_config(model=MODEL, data={"vocab_size": 64}, out_dir=str(tmp_path), train={"lr_scale": 2.0})
    keep_forced_config(tmp_path, changed, {}, 1)  # nothing changed: nothing written
    assert not list(tmp_path.glob("config.before-*"))
    keep_forced_config(tmp_path, changed, {"train.lr_scale": (1.0, 2.0)}, 2)
    assert (tmp_path / "config.before-resume-2.yaml").read_text() == before
    assert (tmp_path / "config.yaml").read_text() == to_yaml(changed)


def test_an_edited_corpus_is_refused_unless_accepted_and_no_fingerprint_is_recorded_anew(tmp_path, caplog):
    cfg = load_config(**tiny_sections(tmp_path), out_dir=str(tmp_path / "run"))
    run = tmp_path / "run"
    run.mkdir()
    ckpt = run / "last.ckpt"
    with caplog.at_level(logging.WARNING):
        assert checked_data(run, cfg.data, b"tok", ckpt, accept=False) is None  # a run from before fingerprints
    assert "has no fingerprint" in caplog.text and fingerprint_to_record(None, 3) == "resume-3"
    record_fingerprint(run, cfg.data, b"tok", "start")
    assert checked_data(run, cfg.data, b"tok", ckpt, accept=False) == [] and fingerprint_to_record([], 3) is None
    with open(tmp_path / "corpus" / "train.en", "a") as f:
        f.write("one more line\n")
    with pytest.raises(ValueError, match=r"the run's data changed since it started .*train\.en.*--accept-data-change"):
        checked_data(run, cfg.data, b"tok", ckpt, accept=False)
    changed = checked_data(run, cfg.data, b"tok", ckpt, accept=True)
    assert changed and fingerprint_to_record(changed, 3) == "resume-3"


def test_interrupted_saves_go_and_attempts_count_the_resumes_before(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / ".last.ckpt.tmp").write_bytes(b"half")
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"whole")
    remove_interrupted_saves(tmp_path)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["last.ckpt"]
    assert resume_attempt(tmp_path) == 1
    (tmp_path / "resume-1").mkdir()
    assert resume_attempt(tmp_path) == 2


def test_a_resume_sets_the_runs_earlier_results_aside_so_a_stopped_resume_reads_unfinished(tmp_path):
    """A finished run resumed with more steps and stopped (exit 75) kept its old summary.json, and `ablate table`
    counted it finished at its old step count; its results now wait as *.before-resume-N until the resume ends."""
    (tmp_path / "eval").mkdir()
    (tmp_path / "summary.json").write_text('{"steps": 6}')
    (tmp_path / "eval" / "valid.json").write_text("{}")
    (tmp_path / "eval" / "test.json").write_text("[]")
    set_aside_results(tmp_path, 1)
    assert not (tmp_path / "summary.json").exists() and not list((tmp_path / "eval").glob("????.json"))
    assert (tmp_path / "summary.before-resume-1.json").read_text() == '{"steps": 6}'
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == ["test.before-resume-1.json", "valid.before-resume-1.json"]
    set_aside_results(tmp_path, 2)  # nothing new to set aside: the earlier ones stay as they are
    assert sorted(p.name for p in tmp_path.rglob("*.json")) == [
        "summary.before-resume-1.json",
        "test.before-resume-1.json",
        "valid.before-resume-1.json",
    ]


# --- shape changes ------------------------------------------------------------------------------------------------


def test_shape_changes_names_keys_that_reshape_parameters_only(tmp_path):
    out = tmp_path / "run"
    _saved(out, config(out))
    cfg = config(out, {"d_model": 32, "dropout": 0.3, "positional": "learned"}, train={"max_steps": 5, "warmup": 3})
    changes = changes_from_saved_config(out, cfg)
    assert {"model.d_model", "model.dropout", "model.positional", "train.max_steps", "train.warmup"} <= set(changes)
    assert shape_changes(out, cfg, changes) == ["model.d_model", "model.positional"]  # learned adds a position table


def test_shape_changes_counts_a_vocabulary_change(tmp_path):
    out = tmp_path / "run"
    _saved(out, config(out))
    cfg = load_config(model=MODEL, data={"vocab_size": 80}, out_dir=str(out))
    changes = changes_from_saved_config(out, cfg)
    assert changes == {"data.vocab_size": (64, 80)}
    assert shape_changes(out, cfg, changes) == ["data.vocab_size"]


def test_shape_changes_of_an_unreadable_saved_model_counts_every_model_key(tmp_path):
    out = tmp_path / "run"
    saved = yaml.safe_load(to_yaml(config(out)))
    saved["model"]["retired_key"] = 1  # a key since removed from the schema
    out.mkdir()
    (out / "config.yaml").write_text(yaml.safe_dump(saved))
    cfg = config(out, {"dropout": 0.3}, train={"max_steps": 5})
    changes = changes_from_saved_config(out, cfg)
    assert shape_changes(out, cfg, changes) == ["model.dropout", "model.retired_key"]


HALF = """
from ablate.model.scaling import SCALING, Scaling
from ablate.registry import register


@register(SCALING, "rc_half")
class Half(Scaling):
    def __init__(self, *, heads, d_k):
        super().__init__()

    def forward(self):
        return 0.5
"""


def test_a_plugin_file_edited_since_the_checkpoint_is_refused_naming_it_unless_forced(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(plugins, "_imported", {})
    monkeypatch.setattr(plugins, "_hashes", {})
    plugin, ckpt = tmp_path / "mine.py", tmp_path / "last.ckpt"
    source = HALF.replace("0.5", "0.25")  # the scaling edited since the checkpoint
    plugin.write_text(source)
    then, now = hashlib.sha256(HALF.encode()).hexdigest(), hashlib.sha256(source.encode()).hexdigest()

    def saved(**record) -> None:
        torch.save({"state_dict": {}, "hyper_parameters": {}, **record}, ckpt)

    with restoring(SCALING):
        cfg = config(tmp_path, {"attention_scaling": "rc_half"}, plugins=[str(plugin)])  # the same path: no config change
        unused = config(tmp_path, plugins=[str(plugin)])  # a model of ablate's own variants: it runs none of the plugin
        trial = config(tmp_path, {"attention_scaling": "rc_half"}, plugins=[str(plugin)], sweep={"study": "s"})
        saved(**{plugins.PLUGIN_HASHES: {str(plugin): then}})
        listed = rf"plugin {plugin} \(sha256 {then[:12]} -> {now[:12]}\) changed since {ckpt} was saved"
        with pytest.raises(ValueError, match=rf"^--resume: {listed}, .*; use --force to resume anyway with it as it is now$"):
            checked_plugins(ckpt, [cfg], force=False)
        with caplog.at_level(logging.WARNING, logger="ablate"):
            checked_plugins(ckpt, [cfg], force=True)
        assert f"resuming with plugin {plugin} (sha256 {then[:12]} -> {now[:12]}) as it is now" in caplog.text
        checked_plugins(ckpt, [unused], force=False)  # a sweep's plugin file given another row's variant: this one resumes
        with pytest.raises(ValueError, match=rf"^--resume: {listed}, .*; a sweep takes no --force: rerunning it starts the row over"):
            checked_plugins(ckpt, [trial], force=False)  # a sweep's trial: no --force to offer
        saved(**{plugins.PLUGIN_HASHES: {str(plugin): now}})
        checked_plugins(ckpt, [cfg], force=False)
        saved()  # a checkpoint from before the record: unknown, so it resumes as before
        checked_plugins(ckpt, [cfg], force=False)
