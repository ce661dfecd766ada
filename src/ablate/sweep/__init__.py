"""Sweeps: a sweep file (spec, load) planned as trials (plan) of one Optuna study (storage), run by workers
(worker), each trial a training run in its own process (trial), summarised (results_files, results_terminal);
`ablate sweep` is commands (its flags: flags)."""

from ablate.sweep.load import load_sweep
from ablate.sweep.spec import Objective, Sweep

__all__ = ["Objective", "Sweep", "load_sweep"]
