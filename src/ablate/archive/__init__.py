"""`ablate archive`: a finished study made into evidence that can be committed and tabulated elsewhere (study.py: the
folder, its runs and records; study_db.py: its database side)."""
