"""BLEU and chrF with their signatures (ablate.evaluation.scores): sacreBLEU's corpus scores, not means of sentences."""

from __future__ import annotations

import math

import pytest
import sacrebleu

from ablate.evaluation.scores import bleu, chrf, perplexity

HYPS = ["the cat sat on the mat .", "a dog runs in the park", "hello there"]
REFS = ["the cat sat on a mat .", "the dog runs in the big park", "hello there"]


def test_bleu_is_sacrebleus_corpus_score_with_the_13a_signature():
    score = bleu(HYPS, REFS)
    assert score.score == pytest.approx(sacrebleu.corpus_bleu(HYPS, [REFS]).score)
    assert 0 < score.score < 100
    assert "nrefs:1" in score.signature and "tok:13a" in score.signature and "smooth:exp" in score.signature
    assert bleu(REFS, REFS).score == pytest.approx(100.0)
    assert bleu(["x y z w"] * 3, REFS).score == pytest.approx(0.0)


def test_bleu_is_corpus_level_not_a_mean_of_sentence_scores():
    per_sentence = [bleu([h], [r]).score for h, r in zip(HYPS, REFS)]
    assert bleu(HYPS, REFS).score != pytest.approx(sum(per_sentence) / len(per_sentence))


def test_chrf_is_sacrebleus_chrf_with_its_signature():
    score = chrf(HYPS, REFS)
    assert score.score == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert 0 < score.score < 100 and score.score != pytest.approx(bleu(HYPS, REFS).score)
    assert "nrefs:1" in score.signature and "nc:6" in score.signature and "nw:0" in score.signature
    assert chrf(REFS, REFS).score == pytest.approx(100.0)


def test_perplexity_is_exp_nll_per_token_capped_and_inf_without_a_finite_nll():
    """One rule for validation (a run's and each member's) and records: a run's overflowed NLL read 5.2e21 (e^50),
    a member's inf."""
    assert perplexity(20.0, 10) == pytest.approx(math.exp(2.0))
    assert perplexity(0.0, 0) == 1.0  # no tokens: no loss
    assert perplexity(1e6, 10) == math.exp(50.0)
    assert perplexity(math.inf, 10) == math.inf and perplexity(math.nan, 10) == math.inf


def test_validation_scores_are_per_real_token_and_bleu_of_the_hypotheses_in_sentence_order():
    """One reading of a validation's sums and hypotheses for a run and for each member of a group."""
    import math

    from ablate.evaluation.scores import validation_scores

    words = {1: "a brown dog runs on the beach", 2: "the old cat sleeps in the sun"}
    decode = lambda ids: [" ".join(words[i] for i in row) for row in ids]  # noqa: E731
    metrics, signature = validation_scores([8.0, 6.0, 4.0], {1: [2], 0: [1]}, decode, [words[1], words[2]])
    assert metrics["val/loss"] == 2.0 and metrics["val/nll"] == 1.5 and math.isclose(metrics["val/ppl"], math.exp(1.5))
    assert metrics["val/bleu"] == pytest.approx(100.0) and signature.startswith("nrefs:1")  # sentence 0 first, whatever the insertion order
    assert validation_scores([0.0, 0.0, 0.0], {}, decode, []) == ({"val/loss": 0.0, "val/nll": 0.0, "val/ppl": 1.0}, None)


ZH_HYPS, ZH_REFS = ["我喜欢猫和狗", "今天天气很好", "他在看书"], ["我喜欢狗和猫", "今天天气很好", "她在看书"]


def test_a_chinese_target_is_scored_with_sacrebleus_chinese_tokenizer_as_its_command_line_picks_it():
    """13a splits at spaces and punctuation: a Chinese sentence was one word, and two of three near-matches scored 0."""
    from ablate.evaluation.scores import bleu_tokenizer

    assert [bleu_tokenizer(lang) for lang in ("de", "en", "fr", "zh", "ja", "ko")] == ["13a"] * 3 + ["zh", "ja-mecab", "ko-mecab"]
    zh = bleu(ZH_HYPS, ZH_REFS, bleu_tokenizer("zh"))
    expected = sacrebleu.metrics.BLEU(trg_lang="zh")
    assert zh.score == pytest.approx(expected.corpus_score(ZH_HYPS, [ZH_REFS]).score, abs=1e-12) and zh.score > 40
    assert zh.signature == str(expected.get_signature()) and "|tok:zh|" in zh.signature
    assert bleu(ZH_HYPS, ZH_REFS).score < 40  # one word a sentence


def test_a_tokenizer_whose_extra_package_is_missing_is_named_with_the_pip_command_before_training(monkeypatch):
    from ablate.evaluation import scores

    def missing(*args, tokenize=None, **kwargs):
        raise RuntimeError("\nJapanese tokenization requires extra dependencies, but you do not have them installed.\n")

    monkeypatch.setattr(scores, "BLEU", missing)
    said = scores.bleu_problem("ja")
    assert said.startswith(
        "data.tgt_lang=ja: BLEU with sacreBLEU's ja-mecab tokenizer needs its extra package: pip install 'sacrebleu[ja]'"
    )
    with pytest.raises(ValueError, match=r"pip install 'sacrebleu\[ja\]'"):
        scores.bleu(ZH_HYPS, ZH_REFS, "ja-mecab")


def test_a_run_is_refused_without_its_bleu_tokenizer_but_a_saved_config_loads_to_translate(monkeypatch, tmp_path):
    """Asked in every config check, a Japanese checkpoint could not even translate where MeCab is not installed."""
    from ablate.config import ExperimentConfig, to_dict
    from ablate.config.schema import DataConfig
    from ablate.evaluation import scores
    from ablate.experiment import from_dict, load_config

    def missing(*args, tokenize=None, **kwargs):
        if tokenize == "ja-mecab":
            raise RuntimeError("Japanese tokenization requires extra dependencies")
        return sacrebleu.metrics.BLEU(tokenize=tokenize)

    monkeypatch.setattr(scores, "BLEU", missing)
    assert from_dict(to_dict(ExperimentConfig(data=DataConfig(tgt_lang="ja")))).data.tgt_lang == "ja"
    with pytest.raises(ValueError, match=r"data.tgt_lang=ja: .*pip install 'sacrebleu\[ja\]'"):
        load_config(data={"tgt_lang": "ja"}, out_dir=str(tmp_path / "run"))
    assert load_config(data={"tgt_lang": "fr"}, out_dir=str(tmp_path / "run")).data.tgt_lang == "fr"
