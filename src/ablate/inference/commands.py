"""`ablate translate` and `ablate evaluate`: the commands; what they translate and score with is
ablate.inference.translation and ablate.evaluation.scores."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ablate import plugins
from ablate.config import ConfigError
from ablate.data.corpus import iter_lines, iter_stdin, read_lines, read_parallel
from ablate.evaluation.records import eval_path
from ablate.evaluation.scores import bleu_tokenizer, score
from ablate.files.atomic import write_file
from ablate.files.destination import check_output, refuse_existing, run_of_checkpoint, stdout_is, unwritable
from ablate.files.json_file import object_or_empty
from ablate.inference.pipe_input import stdin_pipe
from ablate.inference.stream import MAX_LINE_BYTES, to_stdout, translated_chunks
from ablate.inference.translation import longer_than, pick_device, save_record, translate
from ablate.training.checkpoint import checkpoint_config, load_checkpoint, model_from_checkpoint


def _load(args: argparse.Namespace):
    """The checkpoint's model on the chosen device, after importing the plugins given by `--plugins` (relative to the
    cwd); a checkpoint naming a variant that no plugin given registers is refused, naming the plugins it records."""
    plugins.load_plugins(getattr(args, "plugins", None) or [])
    saved = checkpoint_config(load_checkpoint(args.checkpoint, mmap=True), args.checkpoint)
    problem = plugins.needed(f"checkpoint {args.checkpoint}", saved)
    if problem:
        raise ConfigError(problem)
    model, cfg, tokenizer = model_from_checkpoint(args.checkpoint)
    if args.beam is not None and args.beam > tokenizer.vocab_size:
        raise ValueError(f"--beam={args.beam} must be at most the vocabulary size of {args.checkpoint} ({tokenizer.vocab_size})")
    return model.to(pick_device(args.device)), cfg, tokenizer


def translate_cli(args: argparse.Namespace) -> int:
    if args.output != "-":  # before the model loads: -o mine.en beside -i mine.en is refused, naming both
        # stdin redirected from a file (`-i - < mine.en`) is that file, by /dev/stdin's link to it
        source = "/dev/stdin" if args.input == "-" else args.input
        inputs = [("--input", source), ("checkpoint", args.checkpoint)]
        check_output(args.output, "--output", inputs, owns=[run_of_checkpoint(args.checkpoint)])
        refuse_existing(args.output, "--output", args.force)
    model, cfg, tokenizer = _load(args)
    cap = MAX_LINE_BYTES
    pipe = stdin_pipe() if args.input == "-" else None  # a chunk is translated when a pipe or a person pauses
    lines, source = (iter_stdin(cap, pipe), "stdin") if args.input == "-" else (iter_lines(args.input, cap), args.input)
    a, progress = args, sys.stderr.isatty()
    text = translated_chunks(
        lines,
        lambda chunk, first: translate(model, tokenizer, chunk, cfg, a.beam, a.alpha, a.batch_tokens, progress, source, first),
        pipe.waiting if pipe else None,
    )
    if args.output == "-":
        return to_stdout(text)  # each chunk as it is translated (ablate.inference.stream)
    write_file(args.output, text, new_only=not args.force)
    return 0


def evaluate_cli(args: argparse.Namespace) -> int:
    if bool(args.src) != bool(args.ref):
        raise ValueError("--src and --ref go together (a source file and its aligned reference)")
    if args.save_eval and (args.src or args.longer_than):
        raise ValueError("--save-eval records a whole split of the run's dataset (--split), not --src/--ref or --longer-than")
    if args.hyp_out:
        inputs = [("--src", args.src), ("--ref", args.ref), ("checkpoint", args.checkpoint)]
        check_output(args.hyp_out, "--hyp-out", inputs, owns=[run_of_checkpoint(args.checkpoint)])
        refuse_existing(args.hyp_out, "--hyp-out", args.force)
    if args.save_eval:  # before the split is decoded, not after
        if run_of_checkpoint(args.checkpoint) is None:
            raise ValueError(
                f"--save-eval: {args.checkpoint} is not in a run directory's checkpoints/ folder, so there is no run to save it in"
            )
        record = eval_path(Path(args.checkpoint).parent.parent, args.split)
        if why := unwritable(record):
            raise ValueError(f"--save-eval: {why}; nothing was written")
        # the run's record of the split, which `ablate table --split` scores the run by: replaced only when asked
        made_from = object_or_empty(record).get("checkpoint")
        kept = f"leave out --save-eval to keep it (made from {made_from})" if isinstance(made_from, str) else "leave out --save-eval"
        refuse_existing(record, "--save-eval", args.force, instead=kept)
    model, cfg, tokenizer = _load(args)
    t = cfg.train  # every setting the hypotheses depend on, so a score is traced back to how it was decoded
    if args.save_eval and (args.beam not in (None, t.beam_size) or args.alpha not in (None, t.length_penalty)):
        # the record holds no decoding settings: ablate table compares runs' records as decoded alike, by their configs
        raise ValueError(
            f"--save-eval writes the run's record, decoded as its config says (beam {t.beam_size}, alpha {t.length_penalty}), "
            "which ablate table compares across runs: leave out --beam/--alpha, or --save-eval; nothing was written"
        )
    if args.src:
        # Keep every line (empty ones too) so the hypotheses stay aligned with the references.
        srcs, refs = read_lines(args.src), read_lines(args.ref)
        if len(srcs) != len(refs):
            raise ValueError(f"{args.src} has {len(srcs)} lines but {args.ref} has {len(refs)}")
        name = f"{args.src}"
    else:
        from ablate.data.datasets import resolve_split

        split = "valid" if args.split == "valid" else "test"
        files = resolve_split(cfg.data, split)
        if args.hyp_out:  # the split's own files (in ABLATE_DATA_DIR, maybe decompressed to plain text) are inputs too
            inputs = [(f"--split {split}'s {what}", f) for what, f in zip(("source", "reference"), files)]
            check_output(args.hyp_out, "--hyp-out", inputs, owns=[run_of_checkpoint(args.checkpoint)])
        pairs, stats = read_parallel(*files)
        srcs, refs = [s for s, _ in pairs], [r for _, r in pairs]
        name = f"{cfg.data.dataset}:{split}"
        if stats.empty:  # as training's validation reads a split; --src/--ref scores every line, as sacreBLEU does
            print(
                f"ablate evaluate: note: {name}: {stats.empty} of {stats.lines} pairs have an empty side, left out as the run's validation leaves them",
                file=sys.stderr,
            )
    if args.longer_than:
        srcs, refs = longer_than(tokenizer, srcs, refs, args.longer_than)
        name += f" (sources > {args.longer_than} tokens)"
        if not srcs:
            raise ValueError(f"no sentence of {name} has more than {args.longer_than} source tokens")
    lines_of = args.src if args.src and not args.longer_than else None  # sentence i is line i of --src: name it so
    hyps = translate(model, tokenizer, srcs, cfg, args.beam, args.alpha, args.batch_tokens, progress=sys.stderr.isatty(), source=lines_of)
    if args.hyp_out:
        write_file(args.hyp_out, "".join(h + "\n" for h in hyps), new_only=not args.force)
    decoding = {"beam": args.beam or t.beam_size, "length_penalty": t.length_penalty if args.alpha is None else args.alpha,
                "max_len_a": t.max_len_a, "max_len_b": t.max_len_b}  # fmt: skip
    result = {"checkpoint": str(args.checkpoint), "test_set": name, **decoding, **score(hyps, refs, bleu_tokenizer(cfg.data.tgt_lang))}
    if args.save_eval:
        result["record"] = str(save_record(Path(args.checkpoint), model, cfg, tokenizer, split, pairs, hyps))
    print(json.dumps(result, indent=2), file=sys.stderr if args.hyp_out and stdout_is(args.hyp_out) else sys.stdout)
    return 0
