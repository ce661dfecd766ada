"""Decoding and scoring: beam search, the per-sentence scores and records `ablate table` tests on, and the
`ablate translate` / `ablate evaluate` commands."""
