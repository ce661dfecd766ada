"""Sweeps: a sweep file (spec, load) planned as trials (plan) of one Optuna study (storage), run by workers
(worker), each trial a training run in its own process (trial), summarised (results_files, results_terminal);
`ablate sweep` is commands (its flags: flags).

Nothing is imported here: `ablate --help`, `ablate train` and the study file's reader (study_file) would each load
Optuna, SQLAlchemy and numpy through this package (0.4 s of the CLI's 0.5 s import)."""
