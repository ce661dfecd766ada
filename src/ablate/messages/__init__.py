"""What ablate tells its user: the config error type, the "did you mean" hint, its log lines, usage errors of
numeric flags, and secrets masked out of all of them. Imports nothing else of ablate."""
