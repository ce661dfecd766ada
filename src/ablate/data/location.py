"""Which corpus files a config trains on, and whether they can be found before a run starts: `ablate sweep` checks
its trials' data when it loads the file, in the sweep's own process, which neither imports torch nor trains, so that
a wrong ABLATE_DATA_DIR or data.dir stops it before any trial rather than failing every one of them."""

from __future__ import annotations

from ablate.data.datasets import DownloadError, resolve_split

SPLITS = ("train", "valid", "test")


def available_splits(data_cfg) -> tuple[str, ...]:
    """dataset=files may leave valid_prefix / test_prefix unset; a named dataset has all three splits."""
    if data_cfg.dataset == "files":
        return tuple(s for s in SPLITS if getattr(data_cfg, f"{s}_prefix"))
    return SPLITS


def corpus_problem(data_cfg, fetch: bool = False) -> str | None:
    """Why a run of `data_cfg` would stop before training for want of its corpus files, in the words `ablate train`
    uses (a data.dir or ABLATE_DATA_DIR that lacks them, a files prefix with none); None where every split it reads is
    found. A split only a download would bring is downloaded into the cache with `fetch` (a failed download is then
    the problem), else passed over: a dry run fetches nothing."""
    try:
        for split in available_splits(data_cfg):
            resolve_split(data_cfg, split, fetch=fetch)
    except (OSError, ValueError, DownloadError) as e:
        return str(e)
    return None
