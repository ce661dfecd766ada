"""The lines `ablate train` ends with (`ablate.run.closing`): how it ended, the reported weights' scores, the files."""

from __future__ import annotations

from ablate.run.closing import closing_lines


def summary(out_dir, **kw):
    return {
        "out_dir": str(out_dir), "steps": 300, "stop_reason": "max_steps", "wall_seconds": 284.5, "selected": "final weights",
        "last": {"val/loss": 4.1409, "val/ppl": 33.4792, "val/bleu": 12.6859}, "val/sentences": 1014, "val/bleu_sentences": 200, **kw,
    }  # fmt: skip


def test_a_run_ends_with_its_scores_and_where_its_files_are(tmp_path, monkeypatch):
    out = tmp_path / "runs" / "qs"
    (out / "checkpoints").mkdir(parents=True)
    for name in ("best.ckpt", "last.ckpt", "step=300.ckpt"):
        (out / "checkpoints" / name).write_bytes(b"")
    (out / "summary.json").write_text("{}")
    (out / "metrics.csv").write_text("")
    monkeypatch.chdir(tmp_path)
    assert closing_lines(summary(out)) == [
        "done: 300 steps (max_steps) in 4m44s",
        "final weights: val/bleu 12.69, val/ppl 33.48, val/loss 4.141 (BLEU on 200 of 1014 sentences)",
        "outputs in runs/qs/: summary.json, metrics.csv, checkpoints/ (best.ckpt, last.ckpt, step=300.ckpt)",
    ]


def test_averaged_weights_scored_on_every_sentence_and_a_run_outside_the_working_directory(tmp_path, monkeypatch):
    out = tmp_path / "elsewhere"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    sibling = tmp_path.parent / "sibling"
    sibling.mkdir(exist_ok=True)
    monkeypatch.chdir(sibling)  # out is not below the working directory: shown whole
    lines = closing_lines(
        summary(out, selected="avg of last 5", **{"val/bleu_sentences": 1014}, last={"val/ppl": 9.5, "val/bleu": float("nan")})
    )
    assert lines[1] == "avg of last 5: val/ppl 9.50"  # a NaN score is left out, not printed as nan
    assert lines[2] == f"outputs in {out}/: summary.json"
