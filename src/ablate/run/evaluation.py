"""The end of a run: the weights it reports, the final ones or the average of its last K checkpoints (the paper's
selection, Sec. 6.1), and its evaluation record RUN_DIR/eval/valid.json (`ablate.evaluation.records`): each scored
validation sentence's hypothesis, reference and teacher-forced NLL, so `ablate table` compares rows sentence by
sentence on the same sentences.
"""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L
import torch

from ablate.config import ExperimentConfig
from ablate.data.module import TranslationDataModule
from ablate.data.subset import row_mask, validation_subset
from ablate.evaluation.records import AVERAGED, FINAL, describe_subset, eval_record, save_eval_record
from ablate.evaluation.scores import bleu_tokenizer
from ablate.evaluation.sentence_scores import decode_rows, sentence_nll
from ablate.training.checkpoint import (
    CheckpointError,
    average_checkpoints,
    check_intact,
    checkpoint_config,
    load_checkpoint,
    run_identity,
    save_atomic,
    step_checkpoints,
)
from ablate.training.module import TranslationModule
from ablate.training.precision import Precision

log = logging.getLogger(__name__)


def val_subset(cfg: ExperimentConfig, total: int) -> tuple[list[int] | None, str]:
    """The validation sentences val/bleu and the record are on (None = all) and their description."""
    chosen = validation_subset(total, cfg.train)
    return chosen, describe_subset(total if chosen is None else len(chosen), total, cfg.train.val_subset_seed)


def scored_on(cfg: ExperimentConfig, dm: TranslationDataModule) -> dict:
    """summary.json's record of which sentences the validation scores are on."""
    total = len(dm.raw("valid")[1])
    chosen, subset = val_subset(cfg, total)
    out = {"val/split": "valid", "val/sentences": total}  # val/loss and val/ppl: the whole split
    if cfg.train.val_bleu:
        out |= {"val/bleu_sentences": total if chosen is None else len(chosen), "val/bleu_subset": subset}
    return out


def select_weights(cfg: ExperimentConfig, trainer: L.Trainer, module: TranslationModule, dm: TranslationDataModule, out: Path) -> dict:
    """With train.final_average = K, average the run's last K step checkpoints into checkpoints/avg.ckpt (weights
    only), load them into `module` and validate them, so the trainer's metrics are the average's. Returns the
    summary's `selected` (and `averaged_from`). On every rank: validation is a collective under DDP."""
    k = cfg.train.final_average
    paths = _this_model(step_checkpoints(out), module.hparams["config"], k) if k else []
    if k and not paths:
        log.warning("train.final_average=%d: no step checkpoints in %s to average; reporting the final weights", k, out / "checkpoints")
    if not paths:
        return {"selected": FINAL}
    if len(paths) < k:
        log.warning("train.final_average=%d: only %d step checkpoints to average", k, len(paths))
    averaged = average_checkpoints(paths)
    if trainer.is_global_zero:
        save_atomic(averaged, out / "checkpoints" / AVERAGED)
    module.load_state_dict(averaged["state_dict"])
    trainer.validate(module, datamodule=dm, verbose=False)
    return {"selected": f"avg of last {len(paths)}", "averaged_from": [p.name for p in paths]}


def _this_model(paths: list[Path], config: dict, k: int) -> list[Path]:
    """The newest `k` step checkpoints, back to the first written with another model config or run identity
    (`run_identity`: seed, member index), or unreadable: a resume with --force that changed a model setting (dropout,
    say) or the seed leaves older ones, which must not be averaged in (average_checkpoints refuses them)."""
    kept: list[Path] = []
    for path in reversed(paths):
        if len(kept) == k:
            break
        try:
            saved = checkpoint_config(load_checkpoint(path, mmap=True), path)
            check_intact(path)  # the average loads it whole, which checks this: a damaged one would fail the run
        except CheckpointError as e:  # e.g. left unreadable by a kill that resume skipped past: not averaged in
            log.warning("not averaging %s: %s", path.name, e)
            break
        if saved["model"] != config["model"] or run_identity(saved) != run_identity(config):
            break
        kept.append(path)
    return kept[::-1]


@torch.no_grad()
def write_record(
    cfg: ExperimentConfig, trainer: L.Trainer, module: TranslationModule, dm: TranslationDataModule, out: Path, selected: str
) -> dict:
    """Score the weights in `module` on the validation subset and write RUN_DIR/eval/valid.json; returns the record.

    Beam search and the per-sentence NLL run on the validation loader's batches, as validation does (same encoding,
    decoding settings and precision), so without a subset the NLLs sum to the logged val/nll of these weights. The
    last validation's hypotheses are reused when it decoded these weights at this step.
    """
    refs = dm.raw("valid")[1]
    chosen, subset = val_subset(cfg, len(refs))
    rows = None if chosen is None else frozenset(chosen)
    step, decoded = module.decoded or (None, {})
    decoded = decoded if step == trainer.global_step else {}  # else decoded from earlier weights
    device = trainer.strategy.root_device
    model = module.model.to(device).eval()
    forward = Precision.of(cfg.train).decoding  # as validation decoded under the Trainer's precision plugin
    found: dict[int, tuple] = {}  # index -> (hypothesis ids, nll, tokens)
    with forward(device):
        for batch in dm.val_dataloader():
            keep = row_mask(batch["idx"], rows)  # (B,)
            if not keep.any():
                continue
            part = {k: batch[k][keep].to(device) for k in ("src", "tgt_in", "tgt_out")}
            idx = batch["idx"][keep].tolist()
            hyps = [decoded[i] for i in idx] if all(i in decoded for i in idx) else decode_rows(model, part["src"], cfg)
            nll, tokens = sentence_nll(model, part)
            found.update(zip(idx, zip(hyps, nll.tolist(), tokens.tolist())))
    order = sorted(found)
    record = eval_record(
        split="valid",
        dataset=cfg.data.dataset,
        checkpoint=FINAL if selected == FINAL else AVERAGED,
        subset=subset,
        indices=order,
        hypotheses=dm.tokenizer.decode([found[i][0] for i in order]),
        references=[refs[i] for i in order],
        nll=[found[i][1] for i in order],
        tokens=[int(found[i][2]) for i in order],
        tokenize=bleu_tokenizer(cfg.data.tgt_lang),
    )
    save_eval_record(out, record)
    return record


def eval_long(cfg: ExperimentConfig, module: TranslationModule, dm: TranslationDataModule) -> dict:
    """Length extrapolation (`train.eval_longer_than`): BLEU of the selected weights on validation pairs longer than any
    the run trained on; a run's and a member's summary alike."""
    from ablate.evaluation.scores import score
    from ablate.inference.translation import longer_than, translate

    n = cfg.train.eval_longer_than
    srcs, refs = longer_than(dm.tokenizer, *dm.raw("valid"), n)
    if not srcs:
        return {"val_long/sentences": 0}
    hyps = translate(module.model.eval(), dm.tokenizer, srcs, cfg)
    result = score(hyps, refs, bleu_tokenizer(cfg.data.tgt_lang))
    return {"val_long/bleu": result["bleu"], "val_long/sentences": result["sentences"], "val_long/min_src_tokens": n + 1}
