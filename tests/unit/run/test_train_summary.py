"""Pieces of a run's summary computed without training (the runs themselves: tests/integration/test_train.py)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from ablate.run.train import epochs_trained


@pytest.mark.parametrize(
    ("batches", "accumulate", "steps", "epoch", "expected"),
    [
        (10, 1, 11, 2, 1.1),  # one step into the second epoch, which Lightning already counts as whole
        (10, 1, 20, 2, 2),
        (10, 4, 7, 3, 2.33),  # 3 steps an epoch: 4 + 4 + the last 2 batches
        (10, 1, 5, 1, 0.5),
        (math.inf, 1, 5, 1, 1),  # an iterable without a length: Lightning's count is all there is
    ],
)
def test_epochs_trained_counts_a_partial_epoch_as_its_fraction(batches, accumulate, steps, epoch, expected):
    trainer = SimpleNamespace(num_training_batches=batches, global_step=steps, current_epoch=epoch)
    assert epochs_trained(trainer, accumulate) == expected


@pytest.mark.parametrize("sweep, how", [(None, "--members 2 and its seeds"), ("demo", "rerun its sweep")])
def test_a_groups_folder_resumed_as_a_run_is_refused_before_any_file_changes(tmp_path, sweep, how):
    """A sweep's group keeps members.group (its own folder) in its config, unlike `ablate train --members`'s: the
    group is told by its missing member index, not by a missing group name."""
    from ablate.config import to_yaml
    from ablate.experiment import load_config
    from ablate.run.train import _prepare_resume

    group = {"size": 2, "group": str(tmp_path) if sweep else None, "index": None}
    saved = load_config(members=group, sweep={"study": sweep}, out_dir=str(tmp_path))
    (tmp_path / "config.yaml").write_text(to_yaml(saved))
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ValueError, match=f"is a group of 2 members .*members.size 2\\), not a run: .*{how}"):
        _prepare_resume(load_config(out_dir=str(tmp_path)), tmp_path, force=True, accept_data_change=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_second_signal_during_the_cleanup_of_a_stopped_run_waits_for_it(tmp_path, monkeypatch):
    """Ctrl-C, then SIGTERM as the stopped run's folder was being removed, left out_dir holding its .run.lock: the
    cleanup now finishes with the signal held, and the SIGTERM acts after it."""
    import signal

    from ablate.experiment import load_config
    from ablate.files import signals
    from ablate.run import rundir, train

    out = tmp_path / "run"
    cfg = load_config(overrides=[f"out_dir={out}", "model.d_model=16", "model.heads=2", "model.d_ff=32"])
    real = rundir.remove_if_untouched

    def cleanup_with_a_sigterm_halfway(path, **kwargs):
        signal.raise_signal(signal.SIGTERM)  # the second signal, as the cleanup starts
        real(path, **kwargs)

    def stopped_before_training(*args, **kwargs):
        assert (out / ".run.lock").exists()
        raise KeyboardInterrupt  # the first: Ctrl-C while the tokenizer trained

    monkeypatch.setattr(train, "remove_if_untouched", cleanup_with_a_sigterm_halfway)
    monkeypatch.setattr(train, "_train", stopped_before_training)
    before = signal.getsignal(signal.SIGTERM)
    signals.raise_on_sigterm()
    try:
        with pytest.raises(signals.Terminated):
            train.train(cfg)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert not out.exists()
