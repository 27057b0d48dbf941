"""Verify's figures: fixes two ways, McNemar on held-out pairs, changed translations by chrF, the input's split."""

from __future__ import annotations

import pytest

from repair.errors import UserError
from repair.heldout import cycle_slice, heldout_split
from repair.stats import classify_changes, erroneous_translations, heldout_comparison, mcnemar_exact, verify_fixes
from tests.helpers import make_issue


def correction(source, translation, fixed_to):
    return {"source": source, "translation": translation, "correction": fixed_to, "kind": "under-translation"}


def test_fixed_exactly_and_within_the_purity_threshold():
    corrections = [
        correction("three red books", "三本书", "三本红色的书"),
        correction("the old teacher", "老师", "老的老师"),
        correction("two stone bridges", "两座桥", "两座石桥"),
    ]
    # equal; every character of the correction present plus one more; one character (石) missing
    new = ["三本红色的书", "那位老的老师", "两座桥"]
    fixes = verify_fixes(corrections, new, threshold=0)
    assert (fixes["fixed"], fixes["fixed_within_d"]) == (1, 2)
    assert [r["distance"] for r in fixes["rows"]] == [0, 0, 1]
    assert verify_fixes(corrections, new, threshold=1)["fixed_within_d"] == 3


def test_mcnemar_exact_is_the_binomial_test_on_discordant_pairs():
    # 10 pairs resolved, none new: two-sided p = 2 * 0.5**10
    assert mcnemar_exact([True] * 10 + [False] * 5, [False] * 15)["p_value"] == pytest.approx(2 * 0.5**10)
    # concordant pairs do not count: 3 resolved, 3 new is no evidence at all
    r = mcnemar_exact([True] * 3 + [False] * 3 + [True] * 40, [False] * 3 + [True] * 3 + [True] * 40)
    assert (r["resolved"], r["new"], r["p_value"]) == (3, 3, 1.0)
    assert mcnemar_exact([False, True], [False, True])["p_value"] == 1.0
    # 1 resolved, 8 new (scipy's binomtest: P(X <= 1) + P(X >= 8) for n = 9)
    assert mcnemar_exact([True] + [False] * 8, [False] + [True] * 8)["p_value"] == pytest.approx(20 / 512)


def test_heldout_comparison_pairs_issues_by_id_and_counts_wrong_translations():
    refs = {"the red book": "红色的书", "he reads the red book": "他读红色的书。"}
    a = make_issue("he reads the red book", "他读书。", "the red book", "红色的书", missing=["红", "色"])
    b = make_issue("he reads the red book", "他读红色的书。", "the red book", "蓝色的书", missing=["蓝"])
    a["id"], b["id"] = "p1", "p1"
    h = heldout_comparison(["p1", "p2", "p3"], [a], [b], refs)
    assert (h["issues_before"], h["issues_after"], h["resolved"], h["new"]) == (1, 1, 0, 0)
    # before: the container's translation is wrong; after: the RTI's
    assert (h["erroneous_before"], h["erroneous_after"]) == (1, 1)
    assert heldout_comparison(["p1"], [a], [], None)["erroneous_before"] is None
    assert erroneous_translations([a, b], {}) == 0  # texts without a reference are not judged


def test_changed_translations_are_classed_by_chrf_against_their_reference():
    rows = [
        {"set": "test", "source": "s1", "reference": "三本红色的书", "before": "三本书", "after": "三本红色的书"},
        {"set": "test", "source": "s2", "reference": "三本红色的书", "before": "三本红色的书", "after": "书"},
        {"set": "test", "source": "s3", "reference": "两座桥", "before": "两座桥", "after": "两座 桥"},  # spacing only
        {"set": "heldout", "source": "s4", "reference": None, "before": "桥", "after": "石桥"},
        {"set": "heldout", "source": "s5", "reference": "老师", "before": "老人", "after": "老年"},
    ]
    c = classify_changes(rows, worst=1)
    assert (c["translations"], c["changed"]) == (5, 4)  # s3 differs only in spacing
    assert (c["improved"], c["unchanged"], c["degraded"], c["no_reference"]) == (1, 1, 1, 1)
    assert c["by_set"]["heldout"]["unchanged"] == 1 and c["by_set"]["test"]["degraded"] == 1
    assert [w["source"] for w in c["worst"]] == ["s2"] and c["worst"][0]["delta"] < 0


def test_heldout_split_is_reproducible_whatever_the_order():
    sentences = [f"sentence number {i}" for i in range(40)] + ["", "sentence number 3"]
    held, rest = heldout_split(sentences, 0.3)
    assert len({sentences[i] for i in held}) == 12 and 40 not in held + rest  # blank line on neither side
    assert 3 in held or 3 in rest
    assert (3 in held) == (41 in held)  # a repeated sentence falls on one side
    shuffled = sentences[::-1]
    held2, _ = heldout_split(shuffled, 0.3)
    assert {shuffled[i] for i in held2} == {sentences[i] for i in held}
    assert heldout_split(sentences, 0)[0] == []
    assert heldout_split(sentences, 0.3)[0] == held
    counted, rest = heldout_split(sentences, 12)  # a number of sentences: the same first 12 by SHA-1
    assert counted == held and len(rest) == 28  # 41 non-blank lines, 13 of them held (a repeated one twice)
    with pytest.raises(UserError, match="purity.holdout=1.5"):
        heldout_split(sentences, 1.5)
    with pytest.raises(UserError, match="purity.holdout=-0.1"):
        heldout_split(sentences, -0.1)


def test_each_cycle_tests_a_fresh_slice_until_the_input_runs_out(tmp_path):
    rest = [0, 2, 3, 5, 8, 9, 11]
    first = cycle_slice(tmp_path, 1, rest, None, 2)
    assert first == [0, 2, 3, 5]
    assert (tmp_path / "cycle1/test/slice.json").exists()
    # resumed with another number of cycles: cycle 1 keeps what it tested
    assert cycle_slice(tmp_path, 1, rest, None, 5) == first
    assert cycle_slice(tmp_path, 2, rest, None, 5) == [8, 9]
    assert cycle_slice(tmp_path, 3, rest, None, 5) == [11]
    assert cycle_slice(tmp_path, 4, rest, None, 5) == []
    assert not (tmp_path / "cycle4").exists()
    assert cycle_slice(tmp_path / "b", 1, rest, 3, 1) == [0, 2, 3]
    with pytest.raises(UserError, match="per_cycle=0"):
        cycle_slice(tmp_path / "c", 1, rest, 0, 1)


def test_report_lists_regressions_by_their_sides():
    from repair.issues import make_issue
    from repair.report import regressions_markdown

    issue = make_issue("rti", "the red cat sat .", [("container", "the red cat sat .", "红色的猫坐着。"),
                                                   ("rti", "the red cat", "红猫")], 1, ["色"])
    assert regressions_markdown([]) == []
    assert regressions_markdown([issue])[-1] == \
        f"- `{issue['id']}` rti: container “the red cat sat .” → 红色的猫坐着。 / rti “the red cat” → 红猫"


def test_a_model_that_translates_a_held_out_text_as_nothing_is_compared_not_refused(tmp_path):
    """The held-out runs' translations.tsv is the models' own output: an empty translation is a finding."""
    from repair.fileio import write_json_atomic, write_jsonl_atomic, write_text_atomic
    from repair.stages.verify import compare_models

    dirs = (tmp_path / "before", tmp_path / "after")
    for d, tr in zip(dirs, ("小鸟唱歌了。", "")):
        d.mkdir()
        write_jsonl_atomic(d / "pairs.jsonl", [])
        write_jsonl_atomic(d / "issues.jsonl", [])
        write_json_atomic(d / "summary.json", {"sentences": 1})
        write_text_atomic(d / "translations.tsv", f"the small bird sang .\t{tr}\n")
    bleu = (tmp_path / "b.txt", tmp_path / "a.txt")
    for f in bleu:
        write_text_atomic(f, "狗\n")
    out = compare_models(dirs, bleu, ["狗"], ["dog"], {"the small bird sang .": "小鸟唱歌了。"}, worst=5)
    assert out["heldout"]["sentences"] == 1
    assert out["changes"]["changed"] == 1


def test_a_correction_is_fixed_whitespace_and_character_width_aside():
    """A tokenizer that normalizes to NFKC (SentencePiece's default) writes `,` for `，`: the correction is fixed; a
    character of another meaning is not."""
    corrections = [{"source": s, "translation": "x", "correction": c, "kind": "k"} for s, c in
                   (("a", "如果我有钱，我会买车。"), ("b", "你好？"), ("c", "我去了。"))]
    fixes = verify_fixes(corrections, ["如果我有钱,我会买车。", "你好 ?", "我去过。"])
    assert [r["fixed"] for r in fixes["rows"]] == [True, True, False]
