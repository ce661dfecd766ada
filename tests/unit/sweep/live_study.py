"""A crafted study and crafted progress files for the live view and `ablate status` tests."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta

import optuna
from optuna.trial import FrozenTrial, TrialState

from ablate.run.progress_file import PROGRESS_FILE
from ablate.sweep.ledger import BOOKKEEPING

NOW = time.time()


def progress(run_dir, **fields):
    run_dir.mkdir(parents=True, exist_ok=True)
    state = {
        "phase": "training",
        "step": 120,
        "max_steps": 300,
        "epoch": 0,
        "epochs": 0.4,
        "max_epochs": None,
        "tokens_per_s": 2031.4,
        "eta_s": 92.0,
        "val/loss": 3.4123,
        "val/bleu": 12.8,
        "val_step": 100,
        "started": NOW - 100,
        "updated": NOW - 1,
    }
    (run_dir / PROGRESS_FILE).write_text(json.dumps({**state, **fields}))


def add(study, state, name, out_dir=None, value=None, started=NOW - 60, intermediate=None, row=None, **attrs):
    """A trial as a worker leaves it: its run name and run directory as user attributes; `row`: the (row, seed) a
    variants trial was queued with."""
    user_attrs = {"name": name, **({"out_dir": str(out_dir)} if out_dir else {}), **attrs}
    start = datetime.fromtimestamp(started)
    end = None if state == TrialState.RUNNING else start + timedelta(seconds=30)
    study.add_trial(
        FrozenTrial(
            number=0,
            trial_id=0,
            state=state,
            value=value,
            datetime_start=start,
            datetime_complete=end,
            params={},
            distributions={},
            user_attrs=user_attrs,
            system_attrs={"fixed_params": {"row": row[0], "seed": row[1]}} if row else {},
            intermediate_values=intermediate or {},
        )
    )


def crafted(tmp_path) -> optuna.Study:
    """Two running trials (one validating), a finished, a pruned, a failed one, a bookkeeping one and a waiting one."""
    study = optuna.create_study(study_name="quickstart", direction="maximize")
    add(
        study,
        TrialState.COMPLETE,
        "base",
        tmp_path / "0",
        value=25.61,
        **{"val/bleu": 25.61, "val/loss": 2.1, "speed/tokens_per_s": 2500.0},
    )
    progress(tmp_path / "0", phase="finished", step=300, epochs=1.0, eta_s=0.0)
    add(study, TrialState.RUNNING, "E-learned", tmp_path / "1")
    progress(tmp_path / "1")
    add(study, TrialState.RUNNING, "attn-additive", tmp_path / "2")
    progress(
        tmp_path / "2",
        phase="validating",
        step=150,
        tokens_per_s=1500.0,
        eta_s=3700.0,
        **{"val/loss": None, "val/bleu": None, "val_step": None},
    )
    add(study, TrialState.PRUNED, "A-h1", tmp_path / "3", **{"val/loss": 5.0})
    add(study, TrialState.FAIL, "A-h16", tmp_path / "4", fail_reason="FloatingPointError: train/loss is nan")
    add(study, TrialState.FAIL, "base", fail_reason=BOOKKEEPING + "duplicate")
    study.enqueue_trial({"row": "C-N2"})
    return study
