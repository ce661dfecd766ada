"""A member group counts once in `ablate table`'s statistics (ablate.table.replicates): its members share the
group's length schedule, so an interval or a test that took each member as an independent seed would be too narrow.
The coverage test simulates that shared effect and shows both: the replicate-aware test holds its level, the
per-member one does not."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest
from table_study import references, system, write_run

from ablate.cli import main
from ablate.table.compare import make_table
from ablate.table.corpus_scores import bleu_stats, ppl_stats
from ablate.table.equal_updates import at_update, to_markdown
from ablate.table.finished_runs import Run, runs_from_dirs
from ablate.table.paired_bootstrap import paired_bleu_stats, paired_ppl_stats
from ablate.table.replicates import replicate_index, replicate_means, replicate_name, replicate_values, schedule_pairs, seeds_in_groups


def run(seed: int, group: str | None = None, size: int = 4, bleu: float | None = 20.0, schedule: int | None = None) -> Run:
    config = {"seed": seed} | ({"members.size": size, "members.group": group, "members.schedule": schedule} if group else {})
    return Run(row="base", config=config, ppl=5.0, bleu=bleu, params=None, tokens_per_s=None, step_ms=None, source=f"s{seed}")


def test_a_groups_members_are_one_replicate_and_lone_runs_one_each():
    runs = [run(1, "g/a"), run(2, "g/a"), run(3), run(4, "g/b"), run(5, "g/a"), run(6)]
    assert replicate_index(runs) == [0, 0, 1, 2, 0, 3]
    # members.size 1 (a member's config trained alone) is a run of its own, whatever its members.group says
    assert replicate_index([run(1, "g/a", size=1), run(2, "g/a", size=1)]) == [0, 1]
    assert replicate_means(np.array([1.0, 3.0, 10.0]), [0, 0, 1]).tolist() == [2.0, 10.0]
    per_seed = np.array([[1.0, 2.0], [3.0, 4.0], [10.0, 20.0]])  # (runs, resamples): averaged along runs
    assert replicate_means(per_seed, [0, 0, 1]).tolist() == [[2.0, 3.0], [10.0, 20.0]]
    same = np.array([1.0, 2.0])
    assert replicate_means(same, [0, 1]) is same and replicate_means(same, None) is same


def test_replicate_values_average_the_members_that_scored_and_name_the_row():
    runs = [run(1, "g/a", bleu=20.0), run(2, "g/a", bleu=22.0), run(3, "g/a", bleu=None), run(4, bleu=30.0), run(5, "g/c", bleu=None)]
    assert replicate_values(runs, "bleu") == [21.0, 30.0]  # the group without any score is left out, not a 0
    assert seeds_in_groups(runs) == "5 seeds in 2 groups and 1 alone"
    assert seeds_in_groups([run(1), run(2), run(3)]) == "3 seeds"
    assert seeds_in_groups([run(1, "g/a"), run(2, "g/a")]) == "2 seeds in 1 group"
    assert replicate_name([run(1), run(2)]) == "seeds"
    assert replicate_name([run(1, "g/a"), run(2, "g/a"), run(3, "g/b"), run(4, "g/b")]) == "groups of 2"
    assert replicate_name([run(1, "g/a"), run(2, "g/a"), run(3)]) == "replicates"


def write_members(root, row: str, groups: dict[str, list[tuple[int, float, float]]], overrides: dict | None = None) -> None:
    """A row's runs, each group's members (seed, BLEU, PPL) with members.group set; the group "" holds lone runs."""
    for group, seeds in groups.items():
        members = {"members.size": len(seeds), "members.group": str(root / "groups" / group)} if group else {}
        for seed, bleu, ppl in seeds:
            write_run(root, row, seed, {**(overrides or {}), **members}, {"last": {"val/bleu": bleu, "val/ppl": ppl}})


def test_the_table_counts_a_group_once_in_the_interval_the_delta_and_the_noise_floor(tmp_path):
    # base: two groups of 3 whose members agree closely and whose schedules differ by 4 BLEU; A-h1: one group.
    write_members(
        tmp_path, "base", {"a": [(1, 20.0, 5.0), (2, 20.2, 5.1), (3, 19.8, 4.9)], "b": [(4, 24.0, 4.0), (5, 24.1, 4.1), (6, 23.9, 3.9)]}
    )
    write_members(tmp_path, "A-h1", {"c": [(1, 21.0, 5.0), (2, 21.2, 5.0), (3, 20.8, 5.0)]}, {"model.heads": 1})
    table = make_table(runs_from_dirs(tmp_path))
    lines = {ln["row"]: ln for ln in table.lines}
    base = lines["base"]["bleu"]
    assert (base["n"], base["runs"]) == (2, 6) and base["mean"] == pytest.approx(22.0)
    assert base["sd"] == pytest.approx(statistics.stdev([20.0, 24.0]))  # the group means' sd, not the members' (2.2)
    assert base["high"] - base["low"] > 40  # t with 1 df over two group means: wide, as two schedules are
    ah1 = lines["A-h1"]["bleu"]
    assert (ah1["n"], ah1["runs"], ah1["low"], ah1["high"]) == (1, 3, None, None)  # one group: no interval of its own
    assert ah1["delta"] == pytest.approx(-1.0) and ah1["delta_low"] is None  # Welch needs 2 replicates a side
    s = table.summary
    assert s["base_seeds"] == "6 seeds in 2 groups" and s["noise_floor"]["bleu"]["n"] == 2
    (note,) = [n for n in s["notes"] if n.startswith("Seeds trained as members")]
    assert "base (6 of 6 seeds in 2 groups); A-h1 (3 of 3 seeds in 1 group)" in note and "each group counts once" in note

    from ablate.table.notes import noise_line, reading_lines

    assert noise_line(s).startswith(
        "Noise floor (base row over 6 seeds in 2 groups, a group counted once by its members' mean): BLEU sd 2.83"
    )
    assert "interval over seeds (a member group's seeds once, by their mean)" in reading_lines(s)[0]


def test_paired_test_with_every_seed_alone_is_the_test_without_replicates():
    refs = references(40)
    base = [ppl_stats(f["nll"], f["tokens"]) for f in (system(refs, 0.5, s) for s in (1, 2, 3))]
    row = [ppl_stats(f["nll"], f["tokens"]) for f in (system(refs, 0.6, s) for s in (11, 12, 13))]
    plain = paired_ppl_stats(base, row, n_boot=200)
    assert paired_ppl_stats(base, row, n_boot=200, replicates=([0, 1, 2], [0, 1, 2])) == plain
    grouped = paired_ppl_stats(base, row, n_boot=200, replicates=([0, 0, 0], [0, 1, 2]))
    assert grouped.seed_variance == "borrowed" and grouped.noise is None  # base is one replicate: the row's spread stands in


def simulated_system(rng: np.random.Generator, tokens: np.ndarray, rate: np.ndarray, groups: int, members: int) -> list[np.ndarray]:
    """One system's per-seed PPL statistics on shared sentences (`tokens`, each sentence's NLL `rate`): its seeds in
    `groups` groups whose schedules shift every member's NLL by a shared amount (sd 0.15 nats/token), each member by
    its own (sd 0.05), and each sentence of each member by its own (sd 0.05)."""
    out = []
    for _ in range(groups):
        shift = rng.normal(0.0, 0.15)
        for _ in range(members):
            nll = tokens * (rate + shift + rng.normal(0.0, 0.05) + rng.normal(0.0, 0.05, size=tokens.size))
            out.append(ppl_stats(nll, tokens))
    return out


def test_counting_a_group_once_holds_the_tests_level_where_counting_members_does_not():
    """Two identical systems (true Δ 0), each 4 groups of 4 members with a shared schedule effect: over 200 studies
    the replicate-aware test rejects at about its 5% level; taking the 16 members as independent seeds rejects far
    more often: the too-narrow intervals the spread benchmark measured (docs/members.md)."""
    rng = np.random.default_rng(7)
    index = [k for k in range(4) for _ in range(4)]
    rejected = {"replicates": 0, "members": 0}
    studies = 200
    for i in range(studies):
        tokens, rate = rng.integers(5, 20, size=60).astype(float), rng.uniform(1.0, 2.0, size=60)
        base, row = (simulated_system(rng, tokens, rate, 4, 4) for _ in range(2))
        rejected["replicates"] += paired_ppl_stats(base, row, n_boot=100, seed=i, replicates=(index, index)).p_value < 0.05
        rejected["members"] += paired_ppl_stats(base, row, n_boot=100, seed=i).p_value < 0.05
    assert rejected["replicates"] / studies <= 0.09
    assert rejected["members"] / studies >= 0.3


def test_at_update_counts_a_group_once(tmp_path):
    for row, groups, heads in (("base", {"a": [1, 2], "b": [3, 4]}, 4), ("A-h1", {"c": [1, 2], "d": [3, 4]}, 1)):
        for group, seeds in groups.items():
            for seed in seeds:
                out = write_run(
                    tmp_path, row, seed, {"model.heads": heads, "members.size": 2, "members.group": str(tmp_path / group)}, {"steps": 100}
                )
                ppl = {"a": 5.0, "b": 7.0, "c": 6.0, "d": 8.0}[group] + 0.01 * seed
                (out / "metrics.csv").write_text(f"step,val/ppl\n99,{ppl}\n")  # step 99: after update 100
    runs = runs_from_dirs(tmp_path)
    for r in runs:
        r.steps = 100
    result = at_update(runs, 100)
    rows = {ln["row"]: ln for ln in result["rows"]}
    assert (rows["base"]["seeds"], rows["base"]["replicates"]) == (4, 2)
    assert rows["base"]["sd"] == pytest.approx(statistics.stdev([5.015, 7.035]))
    assert rows["A-h1"]["delta"] == pytest.approx(1.0) and "p" in rows["A-h1"]
    md = to_markdown(result)
    assert "Seeds trained as members of one model: base, A-h1." in md
    # A row in one group is one replicate: untested, however many members it has.
    one = at_update([r for r in runs if r.config.get("members.group") != str(tmp_path / "d")], 100)
    assert {ln["row"]: ln for ln in one["rows"]}["A-h1"]["replicates"] == 1 and "p" not in one["rows"][1]
    assert "Not tested, fewer than 2 runs (a member group counting once) there: A-h1 (2 of 2 in 1 group)." in to_markdown(one)
    json.dumps(result)  # what --at-update writes stays JSON


def test_the_paired_test_and_the_seed_plan_of_a_table_count_groups(tmp_path):
    """End to end from eval records: base and C-ff4096 each 2 groups of 2 members (a group's members alike); the
    row's test is the one over replicates, not over the 4 members, and its seed plan counts groups of 2."""
    refs = references(200)
    systems = {"base": (0.3, {"a": 10, "b": 11}), "C-ff4096": (0.6, {"c": 20, "d": 21})}
    fields = {}
    for row, (rate, groups) in systems.items():
        overrides = {"model.d_ff": 4096} if row != "base" else {}
        for g, (group, made) in enumerate(groups.items()):
            for k in range(2):
                seed, fields[(row, 2 * g + k + 1)] = 2 * g + k + 1, system(refs, rate, made)
                members = {"members.size": 2, "members.group": str(tmp_path / "groups" / group)}
                write_run(tmp_path, row, seed, {**overrides, **members}, None, {"valid": {**fields[(row, seed)], "references": refs}})
    assert main(["table", str(tmp_path), "--out", str(tmp_path / "out"), "--target-mde", "20"]) == 0
    doc = json.loads((tmp_path / "out" / "table3.json").read_text())
    bleu = next(r for r in doc["rows"] if r["row"] == "C-ff4096")["bleu"]
    stats = {row: [bleu_stats(fields[(row, s)]["hypotheses"], refs) for s in (1, 2, 3, 4)] for row in systems}
    by_groups = paired_bleu_stats(stats["base"], stats["C-ff4096"], replicates=([0, 0, 1, 1], [0, 0, 1, 1]))
    by_members = paired_bleu_stats(stats["base"], stats["C-ff4096"])
    assert (
        bleu["seed_variance"] == "measured" and bleu["se"] == pytest.approx(by_groups.se) and by_groups.se != pytest.approx(by_members.se)
    )
    assert bleu["plan_unit"] == "groups of 2" and bleu["plan_seeds"] is not None
    md = (tmp_path / "out" / "table3.md").read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("Seeds for an MDE of 20 BLEU"))
    assert f"C-ff4096 {bleu['plan_seeds']} groups of 2" in line and "the base keeping its 2 groups of 2" in line


def test_a_lone_run_that_borrows_from_groups_is_named(tmp_path):
    refs = references(60)
    for seed in (1, 2, 3, 4):
        members = {"members.size": 2, "members.group": str(tmp_path / "groups" / ("a" if seed < 3 else "b"))}
        write_run(tmp_path, "base", seed, members, None, {"valid": {**system(refs, 0.3, 10 + seed), "references": refs}})
    write_run(
        tmp_path, "C-N2", 1, {"model.enc_layers": 2, "model.dec_layers": 2}, None, {"valid": {**system(refs, 0.5, 30), "references": refs}}
    )
    assert main(["table", str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    md = " ".join((tmp_path / "out" / "table3.md").read_text().split())
    assert "C-N2 borrow it from member groups, whose means vary less than one run's score" in md


def test_a_control_of_grouped_seeds_is_compared_with_the_whole_base():
    from ablate.table.compare import build_rows
    from ablate.table.controls import find_controls

    def runs(row, seeds, group=None):
        return [Run(row=row, config={"seed": s} | ({"members.size": 2, "members.group": group} if group else {}), ppl=5.0, bleu=20.0,
                    params=None, tokens_per_s=None, step_ms=None, source=f"{row}{s}") for s in seeds]  # fmt: skip

    alone = build_rows(runs("base", [1, 2, 3]) + runs("base-2x", [2]))
    assert [r.config["seed"] for r in find_controls(alone, alone[0])["base-2x"].runs] == [2]  # seed 2 against seed 2
    grouped = build_rows(runs("base", [1, 2], "g/a") + runs("base", [3]) + runs("base-2x", [2]))
    assert len(find_controls(grouped, grouped[0])["base-2x"].runs) == 3  # seed 2's order was its group's


def test_seed_luck_and_training_length_leave_members_out(tmp_path):
    from ablate.table import seed_luck, training_length

    for row, heads in (("base", 4), ("A-h1", 1)):
        for seed in range(1, 7):
            members = {"members.size": 3, "members.group": str(tmp_path / f"{row}-{(seed - 1) // 3}")}
            summary = {"last": {"val/bleu": 20.0 + seed % 3, "val/ppl": 5.0 + seed % 2}, "steps": 100 * seed}
            write_run(tmp_path, row, seed, {"model.heads": heads, **members}, summary)
    table = make_table(runs_from_dirs(tmp_path))
    assert seed_luck.measure(table, "bleu", 0) is None and training_length.measure(table, "bleu") is None


def test_groups_pair_by_schedule_only_where_every_row_group_has_its_schedule_in_the_base():
    row = [run(1, "r/a", schedule=1), run(2, "r/a", schedule=1), run(3, "r/b", schedule=3), run(4, "r/b", schedule=3)]
    base = [run(s, f"b/{(s - 1) // 2}", schedule=(s - 1) // 2 * 2 + 1) for s in range(1, 7)]  # schedules 1, 3, 5
    assert schedule_pairs(row, base) == ([0, 0, 1, 1], [0, 0, 1, 1, None, None])  # the base's schedule 5 is left out
    assert schedule_pairs(row, base[:4]) == ([0, 0, 1, 1], [0, 0, 1, 1])
    assert schedule_pairs(row, base[2:]) is None  # the row's schedule 1 has no base group
    assert schedule_pairs(row[:2], base) is None  # one schedule: no spread of differences to measure
    assert schedule_pairs([*row, run(9)], base) is None  # a lone run: no schedule
    old = [run(s, "r/a") for s in (1, 2)] + [run(s, "r/b") for s in (3, 4)]  # saved before schedules were recorded
    assert schedule_pairs(old, base) is None
    twice = [run(1, "r/a", schedule=1), run(2, "r/c", schedule=1), run(3, "r/b", schedule=3)]
    assert schedule_pairs(twice, base) is None  # two groups on one schedule: no one-to-one pairing


def test_groups_on_other_batches_walk_other_schedules_under_the_same_seed_and_are_not_paired():
    row = [run(s, f"r/{s // 3}", schedule=s // 3 * 3) for s in (1, 2, 3, 4)]  # schedules 0 and 3
    base = [run(s, f"b/{s // 3}", schedule=s // 3 * 3) for s in (1, 2, 3, 4)]
    assert schedule_pairs(row, base) is not None
    for r in row:  # the row's batches are twice as large: another order of length classes under each seed
        r.config["data.max_tokens"] = 8192
    assert schedule_pairs(row, base) is None


def test_paired_replicates_line_up_by_schedule_when_each_group_kept_one_run_in_another_order():
    # Each row group kept one run (its partners diverged), listed schedule 3's first; the base's groups whole.
    row = [run(4, "r/b", schedule=3), run(1, "r/a", schedule=1)]
    base = [run(1, "b/a", schedule=1), run(2, "b/a", schedule=1), run(3, "b/b", schedule=3), run(4, "b/b", schedule=3)]
    row_index, base_index = schedule_pairs(row, base)
    assert (row_index, base_index) == ([1, 0], [0, 0, 1, 1])
    row_scores, base_scores = np.array([31.0, 11.0]), np.array([10.0, 10.0, 30.0, 30.0])  # the row +1 on each schedule
    differences = replicate_means(row_scores, row_index) - replicate_means(base_scores, base_index)
    assert differences.tolist() == [1.0, 1.0]  # not [21, -19]: schedule 1 against schedule 1


def on_schedules(rng: np.random.Generator, tokens: np.ndarray, rate: np.ndarray, shifts: np.ndarray, effect: float) -> list[np.ndarray]:
    """A system's 4 members on each of the given schedules' `shifts` (nats/token), shifted by `effect` throughout."""
    return [
        ppl_stats(tokens * (rate + effect + shift + rng.normal(0.0, 0.05) + rng.normal(0.0, 0.05, size=tokens.size)), tokens)
        for shift in shifts
        for _ in range(4)
    ]


def test_pairing_groups_by_schedule_holds_the_level_and_narrows_the_test():
    """Schedules that shift both rows by the same amount (measured: r about +0.85 between two rows' group means): over
    200 null studies the test paired by schedule rejects at about its level (3.5-5.5% over three RNG seeds), with a
    standard error a fifth of the unpaired replicate test's; a true shift of 0.1 nats/token it finds in 93% of
    studies, where the unpaired test finds it in 7%."""
    rng = np.random.default_rng(11)
    index = [k for k in range(4) for _ in range(4)]
    rejected, ratios, found = 0, [], {"paired": 0, "unpaired": 0}
    for i in range(200):
        tokens, rate = rng.integers(5, 20, size=60).astype(float), rng.uniform(1.0, 2.0, size=60)
        shifts = rng.normal(0.0, 0.15, size=4)  # one per schedule, the same in both rows
        base, same, better = (on_schedules(rng, tokens, rate, shifts, effect) for effect in (0.0, 0.0, -0.1))
        paired = paired_ppl_stats(base, same, n_boot=100, seed=i, replicates=(index, index), by_schedule=True)
        unpaired = paired_ppl_stats(base, same, n_boot=100, seed=i, replicates=(index, index))
        rejected += paired.p_value < 0.05
        ratios.append(paired.se / unpaired.se)
        found["paired"] += paired_ppl_stats(base, better, n_boot=100, seed=i, replicates=(index, index), by_schedule=True).p_value < 0.05
        found["unpaired"] += paired_ppl_stats(base, better, n_boot=100, seed=i, replicates=(index, index)).p_value < 0.05
    assert rejected / 200 <= 0.09 and paired.seed_variance == "paired" and paired.df >= 3
    assert float(np.median(ratios)) < 0.5
    assert found["paired"] > found["unpaired"] + 40


def test_a_table_pairs_groups_on_the_same_schedules(tmp_path):
    """End to end: base and C-ff4096 as 2 groups of 2 on schedules 1 and 3 (members.schedule, as ablate records it):
    the row's test is the one paired by schedule."""
    refs = references(200)
    fields = {}
    for row, rate, overrides in (("base", 0.3, {}), ("C-ff4096", 0.6, {"model.d_ff": 4096})):
        for seed in (1, 2, 3, 4):
            schedule = 1 if seed < 3 else 3
            fields[(row, seed)] = system(refs, rate, 10 * schedule + (row == "base"))
            members = {"members.size": 2, "members.group": str(tmp_path / "groups" / f"{row}-{schedule}"), "members.schedule": schedule}
            write_run(tmp_path, row, seed, {**overrides, **members}, None, {"valid": {**fields[(row, seed)], "references": refs}})
    assert main(["table", str(tmp_path), "--out", str(tmp_path / "out")]) == 0
    bleu = next(r for r in json.loads((tmp_path / "out" / "table3.json").read_text())["rows"] if r["row"] == "C-ff4096")["bleu"]
    stats = {row: [bleu_stats(fields[(row, s)]["hypotheses"], refs) for s in (1, 2, 3, 4)] for row in ("base", "C-ff4096")}
    paired = paired_bleu_stats(stats["base"], stats["C-ff4096"], replicates=([0, 0, 1, 1], [0, 0, 1, 1]), by_schedule=True)
    assert bleu["seed_variance"] == "paired" and bleu["se"] == pytest.approx(paired.se) and bleu["p"] == pytest.approx(paired.p_value)
    md = " ".join((tmp_path / "out" / "table3.md").read_text().split())
    assert "Tested paired by schedule: C-ff4096; their member groups and the base's walked the same length schedules" in md


def test_a_row_paired_by_schedule_reads_its_verdict_from_the_tests_own_delta():
    """The base has a group on a schedule the row lacks, an outlier: the Welch Δ over all the base's groups has the
    opposite sign of the test's Δ over the groups on the row's schedules. The verdict, the terminal's Δ [CI] and the
    Markdown's paired CI read the test's Δ, beside its own interval (they read the Welch Δ: "disagree", and a Δ
    printed outside its interval)."""
    from ablate.table.corpus_scores import corpus_bleu, corpus_ppl
    from ablate.table.render import to_markdown as table_markdown
    from ablate.table.sentence_records import Evidence
    from ablate.table.terminal import lines

    rng = np.random.default_rng(0)
    n = 400
    tokens = rng.integers(10, 20, n).astype(float)
    runs, ev, seed = [], Evidence("valid", runs=0), 0
    for row, groups in (("base", [(1, 6.0), (2, 6.2), (3, 6.1), (4, 8.5)]), ("A-h32", [(1, 6.1), (2, 6.3), (3, 6.2)])):
        for schedule, ppl in groups:
            for _ in range(2):
                seed += 1
                hyp = rng.integers(8, 20, n)
                total = np.stack([np.maximum(hyp - k, 0) for k in range(4)], 1)
                bleu = np.concatenate([hyp[:, None], (hyp + rng.integers(-2, 3, n))[:, None], rng.binomial(total, 0.5), total], 1)
                nll = tokens * np.log(ppl + rng.normal(0, 0.01)) * (1 + rng.normal(0, 0.01, n))
                ev.per_run[f"{row}/{seed}"] = {"bleu": bleu.astype(np.int64), "ppl": np.stack([nll, tokens], 1)}
                config = {"seed": seed, "members.size": 2, "members.group": f"{row}-{schedule}", "members.schedule": schedule}
                config |= {"sweep.row": row, "model.heads": 32 if row != "base" else 8}
                stats = ev.per_run[f"{row}/{seed}"]
                runs.append(Run(row, config, corpus_ppl(stats["ppl"]), corpus_bleu(stats["bleu"]), 1e6, 1.0, 1.0, source=f"{row}/{seed}"))
    ev.runs = len(runs)
    table = make_table(runs, ev, n_boot=300)
    ppl = next(ln for ln in table.lines if ln["row"] == "A-h32")["ppl"]
    assert ppl["seed_variance"] == "paired" and ppl["paper_delta"] > 0
    assert ppl["delta"] < 0 < ppl["test_low"] <= ppl["test_delta"] <= ppl["test_high"] and ppl["p_holm"] < 0.05
    assert ppl["verdict"] == "agree"
    assert f"{ppl['test_delta']:+.2f} [{ppl['test_low']:+.2f}, {ppl['test_high']:+.2f}]" in "\n".join(lines(table, "t", 400, "t.md"))
    assert f"| {ppl['test_delta']:+.2f} [{ppl['test_low']:+.2f}, {ppl['test_high']:+.2f}] |" in table_markdown(table, "t")
