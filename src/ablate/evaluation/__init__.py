"""Decoding and scoring, below training: beam search, the per-sentence scores and records `ablate table` tests on,
and BLEU and chrF with their signatures. Validation, a run's evaluation record and `ablate translate`/`evaluate`
(ablate.inference) all decode and score through these."""
