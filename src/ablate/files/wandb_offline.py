"""Read W&B offline run files (`run-*.wandb`) without a server: config, history and summary.

Lets tests prove that metrics reached W&B, and lets `ablate table` work from runs synced or
copied from elsewhere. The file is a LevelDB-style log (32 KiB blocks of framed chunks) of
`wandb_internal_pb2.Record` protobufs; wandb >= 0.19 no longer ships a Python reader for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HEADER = b":W&B"
HEADER_LEN = 7  # ":W&B", 2-byte magic, 1-byte version
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


@dataclass
class OfflineRun:
    path: Path
    run_id: str = ""
    name: str = ""
    group: str = ""
    job_type: str = ""  # "sweep-summary" for a study's summary run (ablate.sweep.wandb_summary), not a trial
    started: float = 0.0  # Unix time the run (this attempt of it, when resumed) started
    tags: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    # From the run's exit record, the last W&B writes; None until then: W&B holds a run's records in memory and
    # writes them when it closes the file, after `run.finish()` has returned (`wandb.teardown()` waits for it).
    exit_code: int | None = None

    @property
    def files(self) -> Path:
        """The run's files directory, where W&B writes media such as tables that its summary refers to."""
        return self.path.parent / "files"


def _chunks(data: bytes, path: Path) -> Iterator[bytes]:
    pos, pending = HEADER_LEN, b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # block trailer padding
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        chunk = data[pos + 7 : pos + 7 + length]
        if len(chunk) < length:
            raise ValueError(f"{path}: truncated record at byte {pos}")
        pos += 7 + length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk
        elif kind == 0 and length == 0:
            continue
        else:
            raise ValueError(f"{path}: unknown record type {kind} at byte {pos}")


def _key(item) -> str:
    return item.key or "/".join(item.nested_key)


def read_run(path: str | Path) -> OfflineRun:
    """Parse one `run-*.wandb` file (or the offline-run-* directory holding it)."""
    from wandb.proto import wandb_internal_pb2 as pb

    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob("run-*.wandb"))
        if not found:
            raise FileNotFoundError(f"no run-*.wandb file in {path}")
        path = found[0]
    data = path.read_bytes()
    if not data.startswith(HEADER):
        raise ValueError(f"{path}: not a W&B run file")
    run = OfflineRun(path)
    for chunk in _chunks(data, path):
        record = pb.Record()
        record.ParseFromString(chunk)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.run_id, run.name, run.group, run.job_type, run.tags = r.run_id, r.display_name, r.run_group, r.job_type, list(r.tags)
            run.started = r.start_time.seconds + r.start_time.nanos / 1e9
            run.config.update({_key(i): json.loads(i.value_json) for i in r.config.update})
        elif kind == "config":
            run.config.update({_key(i): json.loads(i.value_json) for i in record.config.update})
        elif kind == "history":
            run.history.append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "summary":
            run.summary.update({_key(i): json.loads(i.value_json) for i in record.summary.update})
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run


def find_runs(root: str | Path) -> list[Path]:
    """Every offline (or synced) run directory below `root`."""
    return sorted(p.parent for p in Path(root).rglob("run-*.wandb"))


def latest_of_each(runs: list[OfflineRun]) -> tuple[list[OfflineRun], dict[Path, OfflineRun]]:
    """One run per W&B run id, the one started last, and each earlier copy -> that one. A run resumed offline with
    its id (a study's summary run each time the sweep ends) gets a new offline-run directory beside the earlier
    ones, as W&B cannot append to a closed run file; `wandb sync` sends each to the one run id, and the last holds
    its latest state. A run whose id is unknown (its file not yet closed) stands alone."""
    latest: dict[str, OfflineRun] = {}
    for run in runs:
        key = run.run_id or str(run.path)
        if key not in latest or (run.started, str(run.path)) > (latest[key].started, str(latest[key].path)):
            latest[key] = run
    kept = [r for r in runs if latest[r.run_id or str(r.path)] is r]
    return kept, {r.path: latest[r.run_id] for r in runs if latest[r.run_id or str(r.path)] is not r}
