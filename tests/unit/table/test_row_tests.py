"""`ablate table` on a crafted study with per-sentence eval records: seed intervals, paired tests against base,
Holm, MDE, verdicts against the paper, the noise floor and what the scores are on, in Markdown and JSON."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest
from power import rejection_rate
from sacrebleu.metrics import BLEU
from scipy import stats as st
from table_study import PAPER_AT_SMALL, markdown_rows, references, system, write_run

from ablate.cli import main
from ablate.evaluation.records import text_free
from ablate.table.holm import holm
from ablate.table.row_tests import no_test
from ablate.table.score_kinds import METRICS

OVERRIDES = PAPER_AT_SMALL
BASIS = "equal steps, last-5 average"
N_SENTENCES = 200


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Rows of 3 seeds: base copies ~30% of references; C-ff4096 ~60% (clearly better; paper: better); A-h4 the
    base's own outputs (identical); D-drop0.2 better on one seed only; A-h16 ~60% (paper: BLEU unchanged);
    B-dk16 ~60% (paper: worse); C-N2 one seed at ~10%; E-learned has no eval records (summaries only)."""
    root = tmp_path_factory.mktemp("study")
    refs = references(N_SENTENCES)
    base = [system(refs, 0.3, 10 + s) for s in range(3)]
    better = [system(refs, 0.6, 20 + s) for s in range(3)]
    plan = {
        "base": base,
        "C-ff4096": better,
        "A-h4": base,
        "D-drop0.2": [better[0], base[1], base[2]],
        "A-h16": [system(refs, 0.6, 30 + s) for s in range(3)],
        "B-dk16": [system(refs, 0.6, 40 + s) for s in range(3)],
        "C-N2": [system(refs, 0.1, 50)],
    }
    for row, seeds in plan.items():
        for seed, fields in enumerate(seeds, 1):
            write_run(
                root,
                row,
                seed,
                OVERRIDES[row],
                {"last": {"val/bleu": 1.0, "val/ppl": 99.0}, "basis": BASIS},
                {"valid": {**fields, "references": refs}},
            )
    for seed in (1, 2):
        write_run(root, "E-learned", seed, OVERRIDES["E-learned"], {"last": {"val/bleu": 30.0 + seed, "val/ppl": 9.0}})
    out = root / "out"
    assert main(["table", str(root), "--out", str(out)]) == 0
    report = json.loads((out / "table3.json").read_text())
    return {
        "refs": refs,
        "plan": plan,
        "md": (out / "table3.md").read_text(),
        "json": report,
        "rows": {r["row"]: r for r in report["rows"]},
        "cells": markdown_rows((out / "table3.md").read_text()),
    }


def corpus_bleus(refs, seeds):
    return [BLEU().corpus_score(s["hypotheses"], [refs]).score for s in seeds]


def sacrebleu_signature(refs) -> str:
    """The signature sacreBLEU itself gives a corpus score on these references."""
    metric = BLEU()
    metric.corpus_score(refs, [refs])
    return str(metric.get_signature())


def test_row_means_and_intervals_are_over_seeds_of_the_records(study):
    bleus = corpus_bleus(study["refs"], study["plan"]["base"])
    base = study["rows"]["base"]["bleu"]
    half = st.t.ppf(0.975, 2) * statistics.stdev(bleus) / math.sqrt(3)
    assert base["n"] == 3 and base["mean"] == pytest.approx(statistics.fmean(bleus))  # the records', not the summaries' 1.0
    assert (base["low"], base["high"]) == pytest.approx((base["mean"] - half, base["mean"] + half))
    assert study["cells"]["base"]["BLEU [95% CI]"] == f"{base['mean']:.2f} [{base['low']:.2f}, {base['high']:.2f}]"
    ppl = study["rows"]["base"]["ppl"]
    nll, tok = study["plan"]["base"][0]["nll"], study["plan"]["base"][0]["tokens"]
    assert ppl["n"] == 3 and ppl["low"] < math.exp(sum(nll) / sum(tok)) < ppl["high"]


def test_clearly_better_row_is_significant_after_holm_and_agrees_with_the_paper(study):
    row = study["rows"]["C-ff4096"]
    b = row["bleu"]
    assert b["delta"] > 0 and b["delta_low"] > 0 and b["p_holm"] < 0.05 and b["p"] <= b["p_holm"]
    assert b["verdict"] == "agree" and row["ppl"]["delta"] < 0 and row["ppl"]["verdict"] == "agree"
    assert 0 < b["mde"] < b["delta"]
    cells = study["cells"]["C-ff4096"]
    assert cells["p BLEU"] == "<0.001" and cells["p Holm BLEU"] == "<0.001" and cells["verdict BLEU"] == "agree"
    assert cells["ΔBLEU [95% CI]"].startswith("+") and "[" in cells["ΔBLEU [95% CI]"]
    assert cells["MDE BLEU"] == f"{b['mde']:.2f}"


def test_a_row_identical_to_base_has_no_variance_and_no_test(study):
    """The base's own outputs: Δ is 0 in every resample of sentences, and the seeds vary no more than the sentences
    explain, so the test's variance is 0: not a p of 1 and an MDE of 0, but no test."""
    b = study["rows"]["A-h4"]["bleu"]
    assert b["delta"] == 0.0 and b["se"] == 0.0 and (b["p"], b["p_holm"], b["mde"], b["test_low"], b["test_high"]) == (None,) * 5
    assert b["untested"] == "'A-h4' is +0.00 BLEU from 'base' in every resample of sentences and seeds: no variance, no test"
    assert b["verdict"] == "inconclusive"
    cells = study["cells"]["A-h4"]
    assert (cells["paired CI BLEU"], cells["p BLEU"], cells["p Holm BLEU"], cells["MDE BLEU"]) == ("no variance", "-", "-", "-")


def test_row_better_on_one_seed_is_inconclusive(study):
    b = study["rows"]["D-drop0.2"]["bleu"]
    assert b["delta"] > 0 and b["p"] > 0.1 and b["verdict"] == "inconclusive"
    assert b["mde"] > study["rows"]["C-ff4096"]["bleu"]["mde"]  # seed noise: a larger effect needed to be seen


def test_paper_no_change_is_its_own_verdict_even_when_we_see_a_change(study):
    row = study["rows"]["A-h16"]
    assert row["bleu"]["paper_delta"] == 0.0 and row["bleu"]["p_holm"] < 0.05 and row["bleu"]["verdict"] == "paper: no change; ours differs"
    assert row["ppl"]["paper_delta"] == -0.01 and row["ppl"]["verdict"] == "agree"  # 4.91 vs 4.92 is a printed change
    assert study["rows"]["B-dk16"]["bleu"]["verdict"] == "disagree"


def test_one_seed_row_has_no_interval_but_is_tested(study):
    b = study["rows"]["C-N2"]["bleu"]
    assert b["n"] == 1 and (b["low"], b["high"], b["sd"]) == (None, None, None)
    assert (b["delta_low"], b["delta_high"]) == (None, None) and b["delta"] < 0 and b["p"] is not None
    cells = study["cells"]["C-N2"]
    assert "[" not in cells["BLEU [95% CI]"] and "[" not in cells["ΔBLEU [95% CI]"] and cells["seeds"] == "1"
    assert cells["N"] == "2"  # Table 3's N, the layers: the seed count must not overwrite it
    # Its paired test has an interval (the base's seed variance stands in for its own): shown, as the verdict reads it.
    assert cells["paired CI BLEU"] == f"[{b['test_low']:+.2f}, {b['test_high']:+.2f}]" and b["test_low"] < b["test_high"]
    assert b["seed_variance"] == "borrowed" and study["rows"]["C-ff4096"]["bleu"]["seed_variance"] == "measured"
    assert (
        "One seed (or one member group) in the row or in base, so that side's seed variance is assumed to be the other's: C-N2;"
        in study["md"]
    )


def test_rows_without_records_get_no_test_and_the_table_says_why(study):
    e = study["rows"]["E-learned"]
    assert e["bleu"]["mean"] == 31.5 and e["bleu"]["p"] is None and e["bleu"]["mde"] is None  # from the summaries
    assert "saved no eval/valid.json" in e["bleu"]["untested"]
    assert study["cells"]["E-learned"]["p BLEU"] == "-" and study["cells"]["E-learned"]["MDE BLEU"] == "-"
    assert (
        "No paired test ('-') for A-h4, E-learned" in study["md"] and "2 of 2 runs of 'E-learned' saved no eval/valid.json" in study["md"]
    )


def test_holm_is_one_correction_over_the_tested_rows_and_mde_uses_its_level(study):
    tested = [r for r in study["json"]["rows"] if r["bleu"]["p"] is not None]
    assert len(tested) == 5  # A-h4, the base's own outputs, has no variance and no test (and is not in Holm's m)
    assert [r["bleu"]["p_holm"] for r in tested] == pytest.approx(holm([r["bleu"]["p"] for r in tested]))
    for r in tested:  # 80% power at Holm's strictest level over the 5, at the test's df (None: sentence noise only)
        assert rejection_rate(r["bleu"]["mde"] / r["bleu"]["se"], r["bleu"]["df"], m=5) == pytest.approx(0.8, abs=1e-6)
    assert any(r["bleu"]["df"] is not None for r in tested) and all(r["bleu"]["df"] is None or r["bleu"]["df"] > 0 for r in tested)


def test_each_tested_row_says_how_many_seeds_an_mde_of_one_bleu_would_take(study):
    """Rows of 3 seeds against base's 3 get a seed plan at the study's Holm level (JSON and CSV fields, one note
    line); the one-seed row has no seed variance to plan from, the rows without a test (no variance, no records) no
    test to plan from, each said, and PPL has no target. These crafted seeds differ by
    several BLEU (MDEs of 12-100), so no row gets to 1.0 within 100 seeds, while its sentences alone would allow it."""
    rows = study["rows"]
    planned = [name for name, r in rows.items() if r["bleu"]["plan_mde"] is not None]
    assert set(planned) == {"A-h16", "B-dk16", "C-ff4096", "D-drop0.2"}
    assert rows["C-N2"]["bleu"]["p"] is not None and rows["C-N2"]["bleu"]["plan_mde"] is None
    one_seed = "one seed (or one member group) in the row or in base, so no seed variance measured to plan from"
    assert rows["C-N2"]["bleu"]["plan_skipped"] == one_seed
    assert all(r["ppl"]["plan_mde"] is None for r in rows.values())
    for name in planned:
        b = rows[name]["bleu"]
        assert (b["plan_mde"], b["plan_seeds"]) == (1.0, None) and 0 <= b["mde_floor"] < 1.0
    line = next(ln for ln in study["md"].splitlines() if ln.startswith("Seeds for an MDE of 1 BLEU"))
    assert (
        "the base keeping its 3 where it has more; Holm over the 5 tested rows" in line
        and "C-ff4096 more than 100," in line
        and line.endswith(f"not planned: A-h4, E-learned (no paired test); C-N2 ({one_seed}).  ")
    )
    assert "sentences alone" not in line  # said only where the sentences are what stands in the way


def test_a_target_below_what_the_sentences_allow_says_so_and_a_bad_target_is_refused(tmp_path, capsys):
    """A row better on the same 60 sentences in every seed: its gain varies by sentence, so the test set's own
    sampling puts a floor under the MDE that no number of seeds lowers, and a target below it is named as such."""
    refs = references(N_SENTENCES)
    for seed in (1, 2, 3):
        base = system(refs, 0.3, 60 + seed)
        row = {**base, "hypotheses": refs[:60] + base["hypotheses"][60:]}
        write_run(tmp_path / "study", "base", seed, {}, {"basis": BASIS}, {"valid": {**base, "references": refs}})
        write_run(tmp_path / "study", "A-h4", seed, OVERRIDES["A-h4"], {"basis": BASIS}, {"valid": {**row, "references": refs}})
    assert main(["table", str(tmp_path / "study"), "--out", str(tmp_path / "one")]) == 0
    floor = json.loads((tmp_path / "one" / "table3.json").read_text())["rows"][1]["bleu"]["mde_floor"]
    assert floor > 0.1
    assert main(["table", str(tmp_path / "study"), "--out", str(tmp_path / "half"), "--target-mde", str(floor / 2)]) == 0
    md = (tmp_path / "half" / "table3.md").read_text()
    assert f"A-h4 more than 100 (its {N_SENTENCES} sentences alone allow {floor:.2f})" in md
    assert main(["table", str(tmp_path / "study"), "--out", str(tmp_path / "off"), "--target-mde", "0"]) == 0  # 0: no plan
    assert "Seeds for an MDE" not in (tmp_path / "off" / "table3.md").read_text()
    capsys.readouterr()
    for bad in ("nan", "-1", "inf"):
        with pytest.raises(SystemExit) as exit_:  # a usage error from the flag's type, before anything is read
            main(["table", str(tmp_path / "study"), "--out", str(tmp_path / bad), "--target-mde", bad])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and f"--target-mde: {bad} must be a number >= 0" in err, err
        assert not (tmp_path / bad).exists()


def test_summary_carries_split_sentences_basis_noise_floor_counts_and_spearman(study):
    s = study["json"]
    assert (s["split"], s["dataset"], s["sentences"], s["subset"]) == ("valid", "multi30k", N_SENTENCES, "all")
    assert s["checkpoints"] == ["best.ckpt"] and (s["runs"], s["runs_with_eval_records"]) == (21, 19)
    assert s["basis"] == f"{BASIS}; not recorded (E-learned)"  # E-learned's summaries record none
    bleus = corpus_bleus(study["refs"], study["plan"]["base"])
    assert s["noise_floor"]["bleu"]["sd"] == pytest.approx(statistics.stdev(bleus)) and s["noise_floor"]["bleu"]["n"] == 3
    overall = s["verdicts"]["bleu"]["overall"]
    # C-ff4096 agrees, B-dk16 disagrees; C-N2's one seed borrows the base's seed variance, known to 2 dof only, so
    # its -21 BLEU has p 0.02, which Holm over the 5 tested rows keeps under 0.05 (over 6, with A-h4's p of 1
    # counted as a test, it did not): it agrees; A-h4 (no test), D-drop0.2 inconclusive; A-h16 the paper's no change,
    # from which it differs here, significantly.
    assert (overall["agree"], overall["disagree"], overall["inconclusive"], overall["paper: no change"]) == (2, 1, 3, 0)
    assert s["verdicts"]["bleu"]["by_group"]["A"]["paper: no change; ours differs"] == 1
    sp = s["spearman"]["bleu"]
    assert sp["rows"] == 8 and sp["low"] <= sp["rho"] <= sp["high"]
    assert s["bootstrap"]["resamples"] == 1000
    md = study["md"]
    assert f"Scores: valid split of multi30k, {N_SENTENCES} sentences (all), checkpoint best.ckpt" in md
    assert (
        "Comparison basis: equal steps, last-5 average; not recorded (E-learned). BLEU: sacreBLEU nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:"
        in md
    )
    assert s["bleu_signature"] == sacrebleu_signature(study["refs"])
    assert f"Noise floor (base row over 3 seeds): BLEU sd {statistics.stdev(bleus):.2f}" in md
    assert "| all | BLEU | 2 | 1 | 3 | 0 | 1 | 0 |" in md and "Spearman's rank correlation" in md


def test_study_without_records_reports_summary_scores_and_no_tests(tmp_path):
    for seed, bleu in ((1, 30.0), (2, 32.0)):
        write_run(tmp_path, "base", seed, summary={"last": {"val/bleu": bleu, "val/ppl": 5.0}})
        write_run(tmp_path, "C-N2", seed, OVERRIDES["C-N2"], {"last": {"val/bleu": bleu - 5, "val/ppl": 6.0}})
    assert main(["table", str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "table3.md").read_text()
    assert "no run saved eval/valid.json, so no paired tests" in md and "Comparison basis: not recorded." in md
    assert "BLEU: sacreBLEU" not in md  # these summaries record no signature, and none is made up
    cells = markdown_rows(md)["C-N2"]
    assert cells["ΔBLEU [95% CI]"] == "-5.00 [-11.08, +1.08]" and cells["ΔPPL [95% CI]"] == "+1.00"  # no spread: no interval
    assert "No spread over seeds (every run, or member group, the same score, so no interval): base PPL 5.00, C-N2 PPL 6.00." in md
    assert cells["p BLEU"] == "-" and cells["verdict BLEU"] == "inconclusive" and "No paired test" not in md


def test_split_test_reads_eval_test_files(tmp_path):
    refs = references(60, seed=5)
    for seed in (1, 2):
        for row, rate in (("base", 0.3), ("C-N2", 0.1)):
            valid, test = system(refs, 0.9, seed), system(refs, rate, 100 * seed + int(10 * rate))
            write_run(
                tmp_path, row, seed, OVERRIDES[row], None, {"valid": {**valid, "references": refs}, "test": {**test, "references": refs}}
            )
    assert main(["table", str(tmp_path), "--split", "test", "--out", str(tmp_path / "out"), "--boot", "200"]) == 0
    report = json.loads((tmp_path / "out" / "table3.json").read_text())
    assert (report["split"], report["sentences"], report["bootstrap"]["resamples"]) == ("test", 60, 200)
    rows = {r["row"]: r for r in report["rows"]}
    files = sorted(tmp_path.glob("trials/base-s*/eval/test.json"))
    expected = np.mean([json.loads(f.read_text())["bleu"] for f in files])
    assert rows["base"]["bleu"]["mean"] == pytest.approx(expected)
    assert "Scores: test split of multi30k, 60 sentences" in (tmp_path / "out" / "table3.md").read_text()


def test_split_test_without_file_or_checkpoint_names_the_run(tmp_path, capsys):
    refs = references(20)
    write_run(tmp_path, "base", 1, records={"test": {**system(refs, 0.3, 1), "references": refs}})
    lacking = write_run(tmp_path, "C-N2", 1, OVERRIDES["C-N2"])
    assert main(["table", str(tmp_path), "--split", "test"]) == 2
    err = capsys.readouterr().err
    assert "run 'C-N2'" in err and str(lacking) in err and "no eval/test.json" in err and "best.ckpt" in err


def test_malformed_eval_file_is_an_error_naming_the_file(tmp_path, capsys):
    refs = references(20)
    run = write_run(tmp_path, "base", 1, records={"valid": {**system(refs, 0.3, 1), "references": refs}})
    path = run / "eval" / "valid.json"
    record = json.loads(path.read_text())
    record["nll"][3] = -1.0
    del record["tokens"]
    path.write_text(json.dumps(record))
    assert main(["table", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "missing key 'tokens'" in err


def test_a_one_seed_study_says_its_tests_hold_sentence_noise_only(tmp_path):
    refs = references(50)
    for row, rate in (("base", 0.3), ("A-h1", 0.6)):
        write_run(tmp_path, row, 1, OVERRIDES[row], records={"valid": {**system(refs, rate, len(row)), "references": refs}})
    assert main(["table", str(tmp_path), "--out", str(tmp_path / "out"), "--boot", "100"]) == 0
    md = (tmp_path / "out" / "table3.md").read_text()
    assert "Tested on sentence noise only (one seed, or one member group, there and in base, so no seed variance to add): A-h1;" in md
    bleu = json.loads((tmp_path / "out" / "table3.json").read_text())["rows"][1]["bleu"]
    assert bleu["df"] is None and bleu["seed_variance"] == "none"
    # significant against sentence noise (it copies half as often), which one seed's luck can exceed: no sign is read
    assert bleu["p_holm"] < 0.05 and bleu["verdict"] == "inconclusive (one seed)"
    assert markdown_rows(md)["A-h1"]["verdict BLEU"] == "inconclusive (one seed)"
    assert "'inconclusive (one seed)': significant against sentence noise alone" in " ".join(md.split())
    assert "| all | BLEU | 0 | 0 | 0 | 1 | 0 | 0 | 0 |" in md  # its own column in the counts


def test_the_sentence_noise_note_names_a_row_tested_on_ppl_alone(tmp_path):
    """A one-seed row with the base's very translations has no BLEU test (nothing varies) but a PPL test on sentence
    noise alone: the note read only the BLEU test's kind and left the row out."""
    refs = references(50)
    base = system(refs, 0.3, 4)
    same_words = {**base, "nll": [x * 1.05 for x in base["nll"]]}
    for row, fields in (("base", base), ("A-h1", same_words)):
        write_run(tmp_path, row, 1, OVERRIDES[row], records={"valid": {**fields, "references": refs}})
    assert main(["table", str(tmp_path), "--out", str(tmp_path / "out"), "--boot", "100"]) == 0
    line = json.loads((tmp_path / "out" / "table3.json").read_text())["rows"][1]
    assert line["bleu"]["seed_variance"] != "none" and line["ppl"]["seed_variance"] == "none"
    md = " ".join((tmp_path / "out" / "table3.md").read_text().split())
    assert "Tested on sentence noise only (one seed, or one member group, there and in base, so no seed variance to add): A-h1;" in md


def test_seeds_that_score_alike_are_measured_seed_noise_not_sentence_noise_only(tmp_path):
    """Three seeds a row with the same outputs (a seed that changes nothing): their seed variance is measured as 0
    (to rounding), so the t has (near) infinite df like a one-seed test, but the table must not say the rows ran
    one seed."""
    refs = references(50)
    for row, rate in (("base", 0.3), ("A-h1", 0.6)):
        for seed in (1, 2, 3):
            write_run(tmp_path, row, seed, OVERRIDES[row], records={"valid": {**system(refs, rate, len(row)), "references": refs}})
    assert main(["table", str(tmp_path), "--out", str(tmp_path / "out"), "--boot", "100"]) == 0
    bleu = json.loads((tmp_path / "out" / "table3.json").read_text())["rows"][1]["bleu"]
    assert (bleu["df"] is None or bleu["df"] > 1e6) and bleu["seed_variance"] == "measured" and bleu["p"] < 0.05
    md = (tmp_path / "out" / "table3.md").read_text()
    assert "sentence noise only" not in md and "assumed to be the other's" not in md


def test_records_scored_with_another_bleu_are_refused_naming_both(tmp_path, capsys):
    """Text-free records keep the signature they were scored with; one of lowercased, intl-tokenised BLEU beside the
    default would be compared as if the systems differed. A sacreBLEU version alone may differ."""
    refs = references(40)
    for row, rate in (("base", 0.3), ("A-h1", 0.6)):
        for seed in (1, 2):
            record = {**system(refs, rate, seed + len(row)), "references": refs}
            path = write_run(tmp_path, row, seed, OVERRIDES[row], records={"valid": record}) / "eval" / "valid.json"
            stripped = text_free(json.loads(path.read_text()))
            if (row, seed) == ("A-h1", 2):
                stripped["bleu_signature"] = stripped["bleu_signature"].replace("case:mixed", "case:lc").replace("tok:13a", "tok:intl")
            elif (row, seed) == ("base", 2):
                stripped["bleu_signature"] = stripped["bleu_signature"].replace("version:", "version:1")
            path.write_text(json.dumps(stripped))
    assert main(["table", str(tmp_path), "--out", str(tmp_path / "out"), "--boot", "20"]) == 2
    err = capsys.readouterr().err
    assert "evaluation records scored with different BLEU:" in err and "A-h1-s2 has nrefs:1|case:lc|eff:no|tok:intl" in err
    (tmp_path / "trials" / "A-h1-s2" / "eval" / "valid.json").unlink()
    (tmp_path / "trials" / "A-h1-s2" / "summary.json").unlink()
    assert main(["table", str(tmp_path), "--out", str(tmp_path / "out"), "--boot", "20"]) == 0  # the version differs only


def test_a_row_without_a_test_has_every_test_field_empty_and_says_why():
    """The fields of an untested row (the base row: reason None) are those of a tested one, each empty."""
    fields = no_test("3 of 3 runs of 'x' saved no eval/valid.json")
    assert fields["untested"] == "3 of 3 runs of 'x' saved no eval/valid.json"
    assert all(fields[k] is None for k in ("p", "p_holm", "mde", "se", "df", "plan_seeds", "plan_skipped"))
    assert no_test()["untested"] is None and tuple(METRICS) == ("bleu", "ppl")
