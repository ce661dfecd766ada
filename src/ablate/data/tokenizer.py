"""Joint source+target BPE vocabulary via SentencePiece (Sec. 5.1: "byte-pair encoding ... shared source-target
vocabulary of about 37000 tokens").

Special ids are fixed (pad=0, unk=1, bos=2, eos=3; ablate.model.tokens), so the model, the batches and decoding agree without asking.
`load_or_train_tokenizer` trains once per (corpus bytes, settings) and caches the model under
`cache_dir()/tokenizers/{key}/spm.model`; any change of corpus or settings gives a new key, so nothing stale is reused.
A resumed run does not ask this cache: it encodes with its own tokenizer, from its checkpoint (ablate.run.rundir).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from ablate.data.corpus import read_parallel
from ablate.data.datasets import cache_dir, sha256_file
from ablate.files.atomic import private_dir, remove_stale
from ablate.model.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID

log = logging.getLogger(__name__)

MODEL_TYPE = "bpe"
SEED = 1  # SentencePiece's sampling/shuffling seed; fixed so the same corpus always gives the same vocabulary
TRAIN_THREADS = min(4, os.cpu_count() or 1)  # small: sweep workers share the machine
# Bump when the way training sentences are read, or the model's bytes, change, to invalidate cached tokenizers. 2: the
# bytes are the same wherever and however often the same tokenizer is trained (_same_bytes_anywhere).
FORMAT = 2

SETTINGS_KEYS = ("data.vocab_size", "data.character_coverage", "data.tokenizer_sample")  # the config keys tokenizer_settings reads
_FILE_HASHES: dict[tuple[str, int, int], str] = {}

MAX_SENTENCE_BYTES = 4192  # SentencePiece's max_sentence_length, left at its default: longer sentences are skipped


class Tokenizer:
    """A trained SentencePiece model with ablate's fixed special ids."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._sp = spm.SentencePieceProcessor(model_file=str(self.path))
        ids = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            need = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)
            raise ValueError(f"{self.path}: special ids (pad, unk, bos, eos) are {ids}, ablate needs {need}")

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def encode(self, texts: Iterable[str]) -> list[list[int]]:
        """Token ids without bos/eos; batching adds them where each side needs them."""
        if isinstance(texts, str):
            raise TypeError("Tokenizer.encode takes a list of sentences, not one string")
        return self._sp.encode(list(texts), out_type=int)

    def decode(self, ids: Sequence[Sequence[int]]) -> list[str]:
        """Detokenized strings; each sequence stops at the first eos, and pad/bos are skipped."""
        if hasattr(ids, "tolist"):  # a (B, T) tensor
            ids = ids.tolist()
        clean = []
        for seq in ids:
            seq = seq.tolist() if hasattr(seq, "tolist") else seq
            out = []
            for i in seq:
                if i == EOS_ID:
                    break
                if i != PAD_ID and i != BOS_ID:
                    out.append(int(i))
            clean.append(out)
        return self._sp.decode(clean)

    def __getstate__(self) -> dict:
        return {"path": str(self.path)}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"])

    def __repr__(self) -> str:
        return f"Tokenizer({str(self.path)!r}, vocab_size={self.vocab_size})"


def file_hash(path: str | Path) -> str:
    """sha256 of a file's bytes, memoized per process by (path, size, mtime) so sweeps don't rehash big corpora."""
    path = Path(path).resolve()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _FILE_HASHES:
        _FILE_HASHES[key] = sha256_file(path)
    return _FILE_HASHES[key]


def tokenizer_settings(data_cfg, train_src: str | Path, train_tgt: str | Path) -> dict:
    """Everything that determines the trained model; its hash is the cache key."""
    return {
        "corpus_sha256": [file_hash(train_src), file_hash(train_tgt)],
        "vocab_size": data_cfg.vocab_size,
        "character_coverage": data_cfg.character_coverage,
        "tokenizer_sample": data_cfg.tokenizer_sample,
        "model_type": MODEL_TYPE,
        "special_ids": [PAD_ID, UNK_ID, BOS_ID, EOS_ID],
        "seed": SEED,
        "sentencepiece": spm.__version__,
        "format": FORMAT,
    }


def train_tokenizer(sentences: Sequence[str], out_dir: Path, *, vocab_size: int, character_coverage: float, sample: int = 0) -> Path:
    """Train `out_dir/spm.model` on `sentences`; an impossible vocab_size raises a ValueError saying what fits."""
    if 0 < sample <= 100:
        raise ValueError(f"data.tokenizer_sample={sample} must be 0 (all sentences) or > 100 (a SentencePiece limit)")
    spm.set_random_generator_seed(SEED)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_prefix=str(out_dir / "spm"),
            model_type=MODEL_TYPE,
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            input_sentence_size=sample,
            shuffle_input_sentence=True,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            num_threads=TRAIN_THREADS,
            minloglevel=2,  # SentencePiece otherwise prints pages of progress to stderr
        )
    except RuntimeError as e:
        msg = str(e)
        if "Vocabulary size too high" in msg:
            most = re.search(r"<= (\d+)", msg)
            fits = f" at most {most.group(1)}" if most else " fewer"
            raise ValueError(
                f"data.vocab_size={vocab_size} is too large for this training corpus ({len(sentences)} sentences): "
                f"SentencePiece BPE can build{fits} pieces; choose a smaller data.vocab_size"
            ) from None
        if "smaller than required_chars" in msg:
            need = re.search(r"\d+ vs (\d+)", msg)
            least = f" (needs at least {need.group(1)})" if need else ""
            raise ValueError(
                f"data.vocab_size={vocab_size} cannot hold the corpus's characters and special tokens{least}; "
                "choose a larger data.vocab_size or a lower data.character_coverage"
            ) from None
        if "sentences_.empty()" in msg:  # it skips sentences over its byte limit, in silence, then has none
            raise ValueError(
                f"SentencePiece found no training sentence under its {MAX_SENTENCE_BYTES}-byte limit among "
                f"{len(sentences)}: are the files one document a line, or with old-Mac (CR only) line ends?"
            ) from None
        raise
    _same_bytes_anywhere(out_dir / "spm.model")
    return out_dir / "spm.model"


def _same_bytes_anywhere(model: Path) -> None:
    """Rewrite `model` without the trainer settings that say where and how it was trained but not what it is: the temp
    folder it was written to (its name random, with the PID), the input files (none: sentences are passed) and the
    thread count (the pieces and scores do not depend on it). With them, the same tokenizer trained twice had other
    bytes each time, and fingerprint.json's tokenizer sha256 could not check a reproduction. Loading never reads them."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.read_bytes())
    for field in ("model_prefix", "input", "num_threads"):
        proto.trainer_spec.ClearField(field)
    model.write_bytes(proto.SerializeToString(deterministic=True))


def _cached(entry: Path) -> Tokenizer | None:
    """A cache entry's tokenizer; None when it is damaged (its bytes differ from the sha256 its settings.json records,
    or SentencePiece cannot load it): the entry is then removed, with a warning naming the file, to be trained again."""
    model = entry / "spm.model"
    try:
        recorded = json.loads((entry / "settings.json").read_text(encoding="utf-8")).get("spm_sha256")
    except (OSError, ValueError, AttributeError):  # missing, not JSON, not a mapping: the model's own load decides
        recorded = None
    try:
        if recorded is not None and hashlib.sha256(model.read_bytes()).hexdigest() != recorded:
            raise ValueError(f"its sha256 is not the {recorded[:12]}... its settings.json records")
        return Tokenizer(model)
    except (RuntimeError, ValueError, OSError) as e:  # sentencepiece: "could not parse ModelProto"
        log.warning("damaged tokenizer cache entry %s (%s); training it again", model, str(e).splitlines()[0][:200])
        shutil.rmtree(entry, ignore_errors=True)
        return None


def load_or_train_tokenizer(data_cfg, train_src: str | Path, train_tgt: str | Path) -> Tokenizer:
    """The cached tokenizer for these training files and `data_cfg`'s settings, training it on first use."""
    settings = tokenizer_settings(data_cfg, train_src, train_tgt)
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:20]
    final = cache_dir(data_cfg) / "tokenizers" / key
    if (final / "spm.model").is_file() and (cached := _cached(final)) is not None:
        remove_stale(final)  # a killed trainer's folder, where another finished first: never trained again to clear it
        return cached
    final.parent.mkdir(parents=True, exist_ok=True)
    # Train into a private temp dir and rename it into place: renaming a directory is atomic, so a racing sweep
    # worker sees either no tokenizer or a complete one, never a half-written spm.model.
    tmp = private_dir(final)  # a killed trainer's folder is removed here
    try:
        pairs, _ = read_parallel(train_src, train_tgt)
        if not pairs:
            raise ValueError(f"no sentence pairs to train a tokenizer on in {train_src} / {train_tgt} (empty files or only empty lines)")
        sentences = [s for pair in pairs for s in pair]
        log.info("training SentencePiece BPE, vocab %d, on %d sentences", data_cfg.vocab_size, len(sentences))
        train_tokenizer(
            sentences,
            tmp,
            vocab_size=data_cfg.vocab_size,
            character_coverage=data_cfg.character_coverage,
            sample=data_cfg.tokenizer_sample,
        )
        digest = hashlib.sha256((tmp / "spm.model").read_bytes()).hexdigest()
        (tmp / "settings.json").write_text(json.dumps({**settings, "spm_sha256": digest}, indent=2, sort_keys=True) + "\n")
        if final.is_dir() and not (final / "spm.model").is_file():  # an entry cut short (killed while removed): every
            shutil.rmtree(final, ignore_errors=True)  # later run failed to rename onto it, "Directory not empty"
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / "spm.model").is_file():
                raise
            # another process finished first with the same key: its model is identical, use it
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Tokenizer(final / "spm.model")
