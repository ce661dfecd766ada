"""The error type of user-caused configuration problems, importable by any module without an import cycle."""


class ConfigError(ValueError):
    """A user-caused config problem; the message names the key, the value and what is allowed."""
