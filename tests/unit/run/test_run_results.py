"""A run's results as it ends (ablate.run.results): summary.json first, then W&B, whose failure never costs the run its
summary nor fails its command, and never shows a storage password it quotes."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

from ablate.messages.redact import remember
from ablate.run.results import publish


class _BrokenSummary(dict):
    def update(self, *args, **kwargs):
        raise RuntimeError("wandb: upload to postgresql://ablate:s3cr%t@db/x failed")


def test_a_wandb_failure_is_logged_after_summary_json_is_written_and_never_raised(tmp_path, caplog):
    remember("postgresql://ablate:s3cr%t@db/x")
    wandb_logger = SimpleNamespace(experiment=SimpleNamespace(summary=_BrokenSummary()))
    with caplog.at_level(logging.WARNING, logger="ablate.run.results"):
        publish(tmp_path, {"steps": 3, "last": {"val/loss": 1.5}}, None, wandb_logger)
    assert json.loads((tmp_path / "summary.json").read_text()) == {"steps": 3, "last": {"val/loss": 1.5}}
    assert "the summary did not reach W&B (RuntimeError" in caplog.text and "summary.json holds it" in caplog.text
    assert "s3cr%t" not in caplog.text


def test_the_summary_and_the_record_reach_wandb(tmp_path, monkeypatch):
    logged = []
    monkeypatch.setattr("ablate.run.results.log_record", lambda experiment, record: logged.append(record))
    experiment = SimpleNamespace(summary={})
    publish(tmp_path, {"steps": 3}, {"bleu": 12.5}, SimpleNamespace(experiment=experiment))
    assert experiment.summary == {"steps": 3} and logged == [{"bleu": 12.5}]
    (tmp_path / "no-wandb").mkdir()
    publish(tmp_path / "no-wandb", {"steps": 4}, None, None)
    assert json.loads((tmp_path / "no-wandb" / "summary.json").read_text()) == {"steps": 4}
