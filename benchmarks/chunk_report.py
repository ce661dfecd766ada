"""What a chunk of benchmarks/study_chunk.py says: each line on stdout and in chunk.log, and its closing report
(finished, cut, failed, left, minutes)."""

from __future__ import annotations

from pathlib import Path


def say(log: Path, msg: str) -> None:
    print(msg, flush=True)
    with open(log, "a") as f:
        f.write(msg + "\n")


def report(log: Path, summary: dict, minutes: dict) -> None:
    def listing(items: list[dict]) -> str:
        return ", ".join(f"{t['row']} s{t['seed']} (trial {t['trial']}, {t['minutes']} min)" for t in items) or "none"

    say(log, f"finished this chunk: {len(summary['finished'])}: {listing(summary['finished'])}")
    say(log, f"cut by the chunk's end (start over next chunk): {len(summary['cut'])}: {listing(summary['cut'])}")
    for t in summary["failed"]:
        say(log, f"FAILED by itself: {t['row']} s{t['seed']} (trial {t['trial']}): {t['reason']}")
    left = summary["left"]
    say(
        log,
        f"left: {len(left)} trials"
        + (f" (next: {', '.join(f'{r} s{s}' for r, s in left[:6])}{' ...' if len(left) > 6 else ''})" if left else ""),
    )
    say(log, "minutes: " + ", ".join(f"{k} {v:.2f}" for k, v in minutes.items()))
