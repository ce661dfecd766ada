"""The one "did you mean" hint that every error about an unknown name carries."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, choices: Iterable[str], *, cutoff: float = 0.6) -> str:
    """ " (did you mean 'x'?)" for the choice closest to `name`, or "" when none is close.

    Args:
        cutoff: the least similarity (difflib's ratio, 0 to 1) a suggestion needs; 0 always suggests the closest.
    """
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=cutoff)
    return f" (did you mean '{close[0]}'?)" if close else ""
