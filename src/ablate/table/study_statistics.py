"""The study-wide statistics of `ablate table`, listed once: each is measured from the table per metric, kept under
its key in table3.json's summary, and read in the notes of every rendering. A new one is a module with `measure`
and `lines` (see seed_luck.py, training_length.py) and a line here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ablate.table import seed_luck, training_length


@dataclass(frozen=True)
class StudyStatistic:
    key: str  # its entry in the summary (table3.json)
    measure: Callable[..., dict | None]  # (table, metric, seed) -> its findings for that metric, or None
    lines: Callable[[dict], list[str]]  # the summary -> its lines among the notes


STUDY_STATISTICS = (
    StudyStatistic("seed_luck", seed_luck.measure, seed_luck.lines),
    StudyStatistic("training_length", training_length.measure, training_length.lines),
)
