"""Named parallel corpora and where their files come from (Sec. 5.1 trains on WMT; Multi30k is the small stand-in).

`resolve_split(cfg.data, "train")` returns the (source, target) files of a split. For a named dataset it looks in
`data.dir`, then `$ABLATE_DATA_DIR`, then the user cache, and only then downloads into the cache, checking sha256.
A new dataset is one more `DATASETS` entry: a `DatasetSpec` subclass whose `fetch()` puts the split's files into
the cache (`wmt14_en_de` exports the Hugging Face `datasets` copy to `{stem}.{lang}` files once).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ablate.config.validation import choice
from ablate.files.atomic import missing_folders, remove_empty

CHUNK = 1 << 20
TIMEOUT_S = 60.0  # per socket operation; a stalled server fails instead of hanging a sweep worker


class DownloadError(RuntimeError):
    """A dataset file could not be fetched (HTTP error, network error) or failed its checksum."""


def cache_dir(data_cfg=None) -> Path:
    """data.cache_dir, else $ABLATE_CACHE, else ~/.cache/ablate; holds datasets/ and tokenizers/."""
    root = getattr(data_cfg, "cache_dir", None) or os.environ.get("ABLATE_CACHE") or "~/.cache/ablate"
    return Path(root).expanduser()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def download(url: str, dest: Path, sha256: Optional[str]) -> Path:
    """Fetch `url` to `dest` via a temp file in the same folder and an atomic rename.

    A reader (or a racing sweep worker) therefore sees either no file or the complete, verified one.
    """
    made = missing_folders(dest.parent)  # removed again, if left empty, on a failure
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
            while chunk := resp.read(CHUNK):
                h.update(chunk)
                out.write(chunk)
        actual = h.hexdigest()
        if sha256 is not None and actual != sha256:
            raise DownloadError(f"checksum mismatch for {url}: expected sha256 {sha256}, got {actual}")
        os.replace(tmp, dest)
    except urllib.error.HTTPError as e:
        raise DownloadError(f"download of {url} failed: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = getattr(e, "reason", e)
        hint = f"set ABLATE_DATA_DIR to a folder holding {dest.parent.name}/{dest.name}, or data.dir to one holding {dest.name}"
        raise DownloadError(f"download of {url} failed: {reason}; {hint}") from None
    finally:
        tmp.unlink(missing_ok=True)
        if not dest.exists():
            remove_empty(made)  # one another process's download is in stays
    return dest


@dataclass(frozen=True)
class DatasetSpec:
    """A named corpus: its languages, split -> file stem, and how to fetch a missing split into the cache."""

    name: str
    langs: tuple[str, ...]
    splits: dict[str, str]  # split (train/valid/test) -> file stem
    pattern: str = "{stem}.{lang}"

    def filename(self, split: str, lang: str) -> str:
        return self.pattern.format(stem=self.splits[split], lang=lang)

    def fetch(self, split: str, langs: tuple[str, str], dest_dir: Path) -> None:
        raise NotImplementedError(f"dataset '{self.name}' cannot be downloaded; set data.dir")


@dataclass(frozen=True)
class UrlDataset(DatasetSpec):
    """Files downloaded one by one from `base_url` (overridable by the env var `url_env`) and checked by sha256."""

    base_url: str = ""
    url_env: Optional[str] = None
    sha256: dict[str, str] = field(default_factory=dict)  # filename -> hex digest

    def url(self, filename: str) -> str:
        base = (self.url_env and os.environ.get(self.url_env)) or self.base_url
        return f"{base.rstrip('/')}/{filename}"

    def fetch(self, split: str, langs: tuple[str, str], dest_dir: Path) -> None:
        for lang in langs:
            name = self.filename(split, lang)
            if not (dest_dir / name).exists():
                download(self.url(name), dest_dir / name, self.sha256.get(name))


@dataclass(frozen=True)
class HFDataset(DatasetSpec):
    """A corpus exported once from the Hugging Face `datasets` copy (optional extra `ablate[wmt]`) to {stem}.{lang} files.

    `path_env` may point at a local copy instead of the Hub: a folder written by `DatasetDict.save_to_disk`, or
    anything `datasets.load_dataset` accepts. Rows are `{"translation": {lang: sentence}}`, as WMT's are.
    """

    hf_path: str = ""
    hf_config: Optional[str] = None
    hf_splits: dict[str, str] = field(default_factory=dict)  # our split -> the Hub's split name
    path_env: Optional[str] = None

    def _load(self, split: str):
        try:
            import datasets
        except ImportError:
            raise DownloadError(
                f"dataset '{self.name}' is fetched with the `datasets` library: pip install 'ablate[wmt]', "
                f"or put {self.filename(split, self.langs[0])} and {self.filename(split, self.langs[1])} into data.dir"
            ) from None
        source = (self.path_env and os.environ.get(self.path_env)) or self.hf_path
        hf_split = self.hf_splits.get(split, split)
        if (Path(source) / "dataset_dict.json").is_file():
            return datasets.load_from_disk(source)[hf_split]
        return datasets.load_dataset(source, self.hf_config, split=hf_split)

    def fetch(self, split: str, langs: tuple[str, str], dest_dir: Path) -> None:
        rows = self._load(split)
        dest_dir.mkdir(parents=True, exist_ok=True)
        # Both files are written under temporary names and renamed only when complete, so an interrupted
        # export never leaves a half file that a later run would take for the corpus.
        tmps = {}
        try:
            for lang in langs:
                fd, name = tempfile.mkstemp(dir=dest_dir, prefix=f".{self.filename(split, lang)}.", suffix=".part")
                tmps[lang] = (os.fdopen(fd, "w", encoding="utf-8"), Path(name))
            for row in rows:
                pair = row["translation"]
                for lang in langs:
                    # A sentence with an embedded newline would break line alignment: flatten it.
                    tmps[lang][0].write(" ".join(str(pair[lang]).split()) + "\n")
            for lang in langs:
                tmps[lang][0].close()
                os.replace(tmps[lang][1], dest_dir / self.filename(split, lang))
        finally:
            for f, path in tmps.values():
                f.close()
                path.unlink(missing_ok=True)


# -- resolution ------------------------------------------------------------------------------


def _files_split(data_cfg, split: str) -> tuple[Path, Path]:
    key = f"data.{split}_prefix"
    prefix = getattr(data_cfg, f"{split}_prefix", None)
    if not prefix:
        raise ValueError(f"data.dataset='files' but {key} is not set; the {split} split needs PREFIX.{{lang}}[.gz]")
    found = []
    for lang in (data_cfg.src_lang, data_cfg.tgt_lang):
        tried = [Path(f"{prefix}.{lang}").expanduser(), Path(f"{prefix}.{lang}.gz").expanduser()]  # `~/corpus/train` too
        hit = next((p for p in tried if p.is_file()), None)
        if hit is None:
            folders = [str(p) for p in tried if p.is_dir()]
            what = f"{folders[0]} is a folder, not a file" if folders else f"none of {[str(p) for p in tried]} exists"
            raise FileNotFoundError(f"{key}='{prefix}': {what}")
        found.append(hit)
    return found[0], found[1]


def _find_one(folder: Path, name: str) -> Optional[Path]:
    """`folder/name`, or its decompressed copy (the name without .gz)."""
    options = [folder / name] + ([folder / name[:-3]] if name.endswith(".gz") else [])
    return next((p for p in options if p.is_file()), None)


def _find(folder: Path, names: list[str]) -> Optional[tuple[Path, Path]]:
    hits = [_find_one(folder, name) for name in names]
    return None if None in hits else (hits[0], hits[1])


def resolve_split(data_cfg, split: str, fetch: bool = True) -> tuple[Path, Path] | None:
    """(source file, target file) of `split` ('train', 'valid' or 'test') for `data_cfg` (a DataConfig); with `fetch`
    False, None where only a download would bring them (ablate.data.location checks a corpus without fetching it)."""
    if data_cfg.dataset == "files":
        return _files_split(data_cfg, split)
    from ablate.registry import lookup

    spec: DatasetSpec = lookup(DATASETS, data_cfg.dataset, "data.dataset")
    if split not in spec.splits:
        raise ValueError(f"dataset '{spec.name}' has no split '{split}'; it has {sorted(spec.splits)}")
    langs = (data_cfg.src_lang, data_cfg.tgt_lang)
    for key, lang in zip(("data.src_lang", "data.tgt_lang"), langs):
        if lang not in spec.langs:
            raise ValueError(f"{key}='{lang}' is not in dataset '{spec.name}'; choose from {list(spec.langs)}")
    names = [spec.filename(split, lang) for lang in langs]

    # Explicit wins: a data.dir without the files is a mistake to report, not a reason to download.
    # The folder itself, or its DATASET/ subfolder (a data root holding several corpora), for either.
    if data_cfg.dir:
        folder = Path(data_cfg.dir).expanduser()
        if hit := _find(folder, names) or _find(folder / spec.name, names):
            return hit
        missing = [n for n in names if _find_one(folder, n) is None]
        raise FileNotFoundError(
            f"data.dir='{data_cfg.dir}' lacks {missing} for the {split} split of '{spec.name}' (nor has {folder / spec.name})"
        )
    # Files the user put in data.dir or $ABLATE_DATA_DIR are used unverified: they may be a deliberate variant
    # (re-cleaned, decompressed); only bytes we download ourselves are checked against the registry's hashes.
    env = os.environ.get("ABLATE_DATA_DIR")
    if env:
        root = Path(env).expanduser()
        if not root.is_dir():  # a mistyped path is a mistake to report, not a reason to download
            raise FileNotFoundError(
                f"ABLATE_DATA_DIR={env} is no folder here ({root.absolute()}); point it at the folder holding {spec.name}/"
            )
        for folder in (root / spec.name, root):
            if hit := _find(folder, names):
                return hit
    cached = cache_dir(data_cfg) / "datasets" / spec.name
    if hit := _find(cached, names):
        return hit
    if not fetch:
        return None
    try:
        spec.fetch(split, langs, cached)
    except DownloadError as e:
        if env:  # the variable is set, to a folder without this corpus: say so beside the download's error
            raise DownloadError(f"{e} (ABLATE_DATA_DIR={env} holds neither {root / spec.name} nor {names} itself)") from None
        raise
    hit = _find(cached, names)
    assert hit is not None, f"{spec.name}.fetch() did not produce {names} in {cached}"
    return hit


# -- registry --------------------------------------------------------------------------------

MULTI30K_SHA256 = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
}

DATASETS: dict[str, DatasetSpec] = {
    # WMT16 multimodal task 1 (Elliott et al., 2016): 29k/1014/1000 captions, en-de.
    "multi30k": UrlDataset(
        name="multi30k",
        langs=("en", "de"),
        splits={"train": "train", "valid": "val", "test": "test_2016_flickr"},
        pattern="{stem}.{lang}.gz",
        base_url="https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw",
        url_env="ABLATE_MULTI30K_URL",
        sha256=MULTI30K_SHA256,
    ),
    # WMT14 en-de as the paper used it (Sec. 5.1): ~4.5M pairs; newstest2013 is the dev set, newstest2014 the test.
    "wmt14_en_de": HFDataset(
        name="wmt14_en_de",
        langs=("en", "de"),
        splits={"train": "train", "valid": "newstest2013", "test": "newstest2014"},
        hf_path="wmt/wmt14",
        hf_config="de-en",
        hf_splits={"train": "train", "valid": "validation", "test": "test"},
        path_env="ABLATE_WMT14_PATH",
    ),
}


def dataset_problems(data_cfg) -> list[str]:
    """data.dataset checked against the named datasets (or 'files', a user's own prefixes)."""
    problems: list[str] = []
    choice(problems, "data.dataset", data_cfg.dataset, ["files", *DATASETS])
    return problems
