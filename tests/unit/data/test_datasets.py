"""Named datasets resolve to files: dir > $ABLATE_DATA_DIR > cache > verified download (served from 127.0.0.1)."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import os
import threading
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from ablate.config import DataConfig
from ablate.data.corpus import read_lines
from ablate.data.datasets import DATASETS, MULTI30K_SHA256, DownloadError, UrlDataset, resolve_split, sha256_file

SPLITS = {"train": "train", "valid": "val", "test": "test_x"}


def _gz(path: Path, lines: list[str]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0 keeps the bytes (and so the hash) identical from run to run
    path.write_bytes(gzip.compress("".join(f"{line}\n" for line in lines).encode(), mtime=0))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_split_files(folder: Path, tag: str) -> dict[str, str]:
    """Fake dataset files whose first line names `tag`, so a test can tell which location was used."""
    return {
        f"{stem}.{lang}.gz": _gz(folder / f"{stem}.{lang}.gz", [f"{tag} {stem} {lang} {i}" for i in range(3)])
        for stem in SPLITS.values()
        for lang in ("en", "de")
    }


class _Handler(http.server.SimpleHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self):
        type(self).requests.append(self.path)
        super().do_GET()

    def log_message(self, *args):  # keep pytest output clean
        pass


@pytest.fixture
def server(tmp_path):
    """(base URL, served folder, request log) of a threaded HTTP server on a free 127.0.0.1 port."""
    root = tmp_path / "served"
    root.mkdir()
    _Handler.requests = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/data", root / "data", _Handler.requests
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def fake(server, monkeypatch, tmp_path):
    """A test-only 'fake' dataset registered in DATASETS, served by `server`; returns (cfg, served hashes, requests)."""
    base, folder, requests = server
    hashes = _write_split_files(folder, "served")
    spec = UrlDataset("fake", ("en", "de"), SPLITS, pattern="{stem}.{lang}.gz", base_url=base, sha256=hashes)
    monkeypatch.setitem(DATASETS, "fake", spec)
    monkeypatch.delenv("ABLATE_DATA_DIR", raising=False)
    monkeypatch.delenv("ABLATE_CACHE", raising=False)
    return DataConfig(dataset="fake", cache_dir=str(tmp_path / "cache")), hashes, requests


def _tag(path: Path) -> str:
    return read_lines(path)[0].split()[0]


def test_download_into_cache_and_verify(fake, tmp_path):
    cfg, hashes, requests = fake
    src, tgt = resolve_split(cfg, "valid")
    cached = tmp_path / "cache" / "datasets" / "fake"
    assert (src, tgt) == (cached / "val.en.gz", cached / "val.de.gz")
    assert sha256_file(src) == hashes["val.en.gz"] and sha256_file(tgt) == hashes["val.de.gz"]
    assert requests == ["/data/val.en.gz", "/data/val.de.gz"]
    assert resolve_split(cfg, "valid") == (src, tgt)
    assert len(requests) == 2, "a cached file must not be downloaded again"
    assert sorted(p.name for p in cached.iterdir()) == ["val.de.gz", "val.en.gz"], "no temp files left behind"


def test_wrong_checksum_raises_and_leaves_no_file(fake, monkeypatch, tmp_path):
    cfg, hashes, _ = fake
    bad = dict(hashes, **{"train.en.gz": "0" * 64})
    monkeypatch.setitem(DATASETS, "fake", replace(DATASETS["fake"], sha256=bad))
    with pytest.raises(DownloadError) as err:
        resolve_split(cfg, "train")
    msg = str(err.value)
    assert "/data/train.en.gz" in msg and "0" * 64 in msg and hashes["train.en.gz"] in msg
    cached = tmp_path / "cache" / "datasets" / "fake"
    assert not cached.exists() or list(cached.iterdir()) == []


def test_http_error_names_url(fake, monkeypatch, tmp_path):
    cfg, _, _ = fake
    spec = DATASETS["fake"]
    monkeypatch.setitem(DATASETS, "fake", replace(spec, base_url=spec.base_url + "/missing"))
    with pytest.raises(DownloadError, match=r"missing/train\.en\.gz.*HTTP 404"):
        resolve_split(cfg, "train")
    assert not (tmp_path / "cache").exists()  # the folders made for it go with the failure


def test_an_unreachable_server_says_where_to_put_the_files_and_leaves_no_folder(fake, monkeypatch, tmp_path):
    cfg, _, _ = fake
    (tmp_path / "cache").mkdir()  # the user's: stays
    monkeypatch.setitem(DATASETS, "fake", replace(DATASETS["fake"], base_url="http://127.0.0.1:9/nothing"))
    with pytest.raises(DownloadError, match=r"set ABLATE_DATA_DIR to a folder holding fake/train\.en\.gz, or data\.dir"):
        resolve_split(cfg, "train")
    assert list((tmp_path / "cache").iterdir()) == []


def test_url_env_overrides_base_url(fake, monkeypatch):
    cfg, _, requests = fake
    spec = DATASETS["fake"]
    unreachable = replace(spec, base_url="http://127.0.0.1:9/nothing", url_env="ABLATE_FAKE_URL")
    monkeypatch.setitem(DATASETS, "fake", unreachable)
    monkeypatch.setenv("ABLATE_FAKE_URL", spec.base_url)
    src, _ = resolve_split(cfg, "test")
    assert _tag(src) == "served" and requests


def test_resolution_order(fake, monkeypatch, tmp_path):
    cfg, _, requests = fake
    _write_split_files(tmp_path / "explicit", "explicit")
    _write_split_files(tmp_path / "envroot" / "fake", "env")
    _write_split_files(tmp_path / "cache" / "datasets" / "fake", "cache")
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path / "envroot"))
    cfg.dir = str(tmp_path / "explicit")
    assert _tag(resolve_split(cfg, "train")[0]) == "explicit"
    cfg.dir = None
    assert _tag(resolve_split(cfg, "train")[0]) == "env"
    monkeypatch.delenv("ABLATE_DATA_DIR")
    assert _tag(resolve_split(cfg, "train")[0]) == "cache"
    assert requests == []
    cfg.cache_dir = str(tmp_path / "empty_cache")
    assert _tag(resolve_split(cfg, "train")[0]) == "served"


def test_env_dir_without_files_falls_through(fake, monkeypatch, tmp_path):
    cfg, _, _ = fake
    (tmp_path / "nothing_here").mkdir()  # a data root holding other corpora: this one is downloaded
    monkeypatch.setenv("ABLATE_DATA_DIR", str(tmp_path / "nothing_here"))
    assert _tag(resolve_split(cfg, "train")[0]) == "served"


def test_an_env_dir_that_does_not_exist_is_refused_naming_the_variable_not_downloaded_around(fake, monkeypatch, tmp_path):
    """A clone not beside ../shared exported ABLATE_DATA_DIR=../shared/data, and ablate went to download the corpus,
    failing offline with a hint about data.dir only."""
    cfg, _, requests = fake
    monkeypatch.setenv("ABLATE_DATA_DIR", "no/such/folder")
    with pytest.raises(FileNotFoundError, match=r"ABLATE_DATA_DIR=no/such/folder is no folder here \(.*no/such/folder\)"):
        resolve_split(cfg, "train")
    assert requests == []


def test_data_dir_may_name_the_data_root_that_holds_the_dataset_folder(fake, tmp_path):
    cfg, _, requests = fake
    _write_split_files(tmp_path / "root" / "fake", "root")
    cfg.dir = str(tmp_path / "root")
    assert _tag(resolve_split(cfg, "train")[0]) == "root" and requests == []


def test_explicit_dir_without_files_raises(fake, tmp_path):
    cfg, _, requests = fake
    (tmp_path / "partial").mkdir()
    _gz(tmp_path / "partial" / "train.en.gz", ["only the source side"])
    cfg.dir = str(tmp_path / "partial")
    with pytest.raises(FileNotFoundError, match=r"data.dir=.*partial.*\['train.de.gz'\]"):
        resolve_split(cfg, "train")
    assert requests == [], "an explicit data.dir must never trigger a download"


def test_decompressed_copy_in_dir_is_used(fake, tmp_path):
    cfg, _, _ = fake
    for lang in ("en", "de"):
        (tmp_path / "plain").mkdir(exist_ok=True)
        (tmp_path / "plain" / f"train.{lang}").write_text("plain text\n")
    cfg.dir = str(tmp_path / "plain")
    assert resolve_split(cfg, "train") == (tmp_path / "plain" / "train.en", tmp_path / "plain" / "train.de")


def test_unknown_split_lang_and_dataset(fake):
    cfg, _, _ = fake
    with pytest.raises(ValueError, match="no split 'dev'"):
        resolve_split(cfg, "dev")
    cfg.tgt_lang = "fr"
    with pytest.raises(ValueError, match=r"data.tgt_lang='fr'.*\['en', 'de'\]"):
        resolve_split(cfg, "train")
    with pytest.raises(ValueError, match="data.dataset='nope'"):
        resolve_split(DataConfig(dataset="nope"), "train")


def test_files_dataset(tmp_path):
    (tmp_path / "corpus.en").write_text("hello\n")
    _gz(tmp_path / "corpus.de.gz", ["hallo"])
    cfg = DataConfig(dataset="files", train_prefix=str(tmp_path / "corpus"))
    assert resolve_split(cfg, "train") == (tmp_path / "corpus.en", tmp_path / "corpus.de.gz")
    with pytest.raises(ValueError, match=r"data.valid_prefix is not set"):
        resolve_split(cfg, "valid")
    cfg.test_prefix = str(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match=r"data.test_prefix=.*nope\.en.*nope\.en\.gz"):
        resolve_split(cfg, "test")


def test_multi30k_spec_matches_official_names():
    spec = DATASETS["multi30k"]
    names = {spec.filename(split, lang) for split in ("train", "valid", "test") for lang in ("en", "de")}
    assert names == set(MULTI30K_SHA256)
    assert spec.url("val.en.gz").startswith("https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/")


@pytest.mark.skipif(not os.environ.get("ABLATE_DATA_DIR"), reason="set ABLATE_DATA_DIR to a folder holding multi30k/")
def test_real_multi30k_from_data_dir(tmp_path):
    """The registry's hashes match the official files, and the splits have the published sizes."""
    cfg = DataConfig(dataset="multi30k", cache_dir=str(tmp_path / "cache"))
    for split, n in {"train": 29000, "valid": 1014, "test": 1000}.items():
        src, tgt = resolve_split(cfg, split)
        assert not str(src).startswith(str(tmp_path)), "must come from $ABLATE_DATA_DIR, not a download"
        for path in (src, tgt):
            if path.name in MULTI30K_SHA256:
                assert sha256_file(path) == MULTI30K_SHA256[path.name], path
            assert len(read_lines(path)) == n


# -- wmt14_en_de: local files, or an export from the `datasets` library (a local copy the test writes) -----------------


def test_wmt14_resolves_local_files_by_the_papers_split_names(tmp_path):
    for stem in ("train", "newstest2013", "newstest2014"):
        for lang in ("en", "de"):
            (tmp_path / f"{stem}.{lang}").write_text(f"{stem} {lang}\n")
    cfg = DataConfig(dataset="wmt14_en_de", dir=str(tmp_path))
    assert resolve_split(cfg, "valid") == (tmp_path / "newstest2013.en", tmp_path / "newstest2013.de")
    assert resolve_split(cfg, "test") == (tmp_path / "newstest2014.en", tmp_path / "newstest2014.de")


def test_wmt14_is_exported_once_from_a_datasets_copy(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets", reason="the optional extra ablate[wmt] is not installed")
    pairs = {
        "train": [("a house", "ein Haus"), ("two\nlines", "zwei\nZeilen"), ("ümlaut", "Ümlaut")],
        "validation": [("dev", "Entwicklung")],
        "test": [("test one", "Test eins"), ("test two", "Test zwei")],
    }
    dd = datasets.DatasetDict(
        {split: datasets.Dataset.from_dict({"translation": [{"en": en, "de": de} for en, de in rows]}) for split, rows in pairs.items()}
    )
    dd.save_to_disk(str(tmp_path / "hf"))
    monkeypatch.setenv("ABLATE_WMT14_PATH", str(tmp_path / "hf"))
    monkeypatch.delenv("ABLATE_DATA_DIR", raising=False)
    cfg = DataConfig(dataset="wmt14_en_de", cache_dir=str(tmp_path / "cache"))
    src, tgt = resolve_split(cfg, "train")
    assert src == tmp_path / "cache" / "datasets" / "wmt14_en_de" / "train.en"
    assert read_lines(src) == ["a house", "two lines", "ümlaut"]  # an embedded newline cannot break alignment
    assert read_lines(tgt) == ["ein Haus", "zwei Zeilen", "Ümlaut"]
    assert [p.name for p in resolve_split(cfg, "test")] == ["newstest2014.en", "newstest2014.de"]
    assert read_lines(resolve_split(cfg, "valid")[1]) == ["Entwicklung"]
    assert not list((tmp_path / "cache").rglob("*.part"))
    # Exported once: later runs read the cached files even when the source is gone.
    monkeypatch.setenv("ABLATE_WMT14_PATH", str(tmp_path / "gone"))
    assert resolve_split(cfg, "train") == (src, tgt)


def test_wmt14_without_the_datasets_library_says_how_to_get_it(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    monkeypatch.delenv("ABLATE_DATA_DIR", raising=False)
    with pytest.raises(DownloadError, match=r"pip install 'ablate\[wmt\]'.*train.en"):
        resolve_split(DataConfig(dataset="wmt14_en_de", cache_dir=str(tmp_path)), "train")


def test_a_files_prefix_takes_a_tilde_and_a_folder_is_said_to_be_one(tmp_path, monkeypatch):
    """The data review: `~` was expanded in data.dir, data.cache_dir and ABLATE_DATA_DIR but not in a prefix; and a
    prefix naming a folder (PREFIX.en a folder) was said not to exist."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for lang in ("en", "de"):
        (tmp_path / f"train.{lang}").write_text("a b\n")
    cfg = DataConfig(dataset="files", train_prefix="~/train")
    assert resolve_split(cfg, "train") == (tmp_path / "train.en", tmp_path / "train.de")
    (tmp_path / "odd.en").mkdir()
    with pytest.raises(FileNotFoundError, match=rf"data.train_prefix='~/odd': {tmp_path / 'odd.en'} is a folder, not a file"):
        resolve_split(DataConfig(dataset="files", train_prefix="~/odd"), "train")
