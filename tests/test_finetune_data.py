"""What the loop fine-tunes on: corrections repeated, replayed training pairs, kept consistent texts."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

from repair.loop import finetune_pairs

CONF = Path(__file__).resolve().parents[1] / "conf"


def config(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose("loop", overrides=["finetune.replay=0", *overrides])


def test_consistent_texts_are_kept_with_their_own_translation(tmp_path):
    (tmp_path / "translations.tsv").write_text(
        "the red cat sat .\t红色的猫坐着。\n"
        "the red cat\t红猫\n"
        "a big dog ran .\t一只大狗跑了。\n"
        "a big dog\t一只大狗\n"
        "the old man\t老人\n"
        "an empty line\t\n",
        encoding="utf-8",
    )
    corrections = [{"source": "the red cat", "correction": "红色的猫"}]
    issues = [{"sides": [{"role": "container", "source": "the red cat sat .", "translation": "红色的猫坐着。"},
                         {"role": "rti", "source": "the red cat", "translation": "红猫"}]}]

    plain = finetune_pairs(config("finetune.repeat=3", "finetune.keep=0"), corrections, None, tmp_path, issues)
    assert sorted(plain) == [("the red cat", "红色的猫")] * 3

    kept = finetune_pairs(config("finetune.repeat=3", "finetune.keep=10"), corrections, None, tmp_path, issues)
    assert sorted(kept) == sorted([("the red cat", "红色的猫")] * 3 + [
        ("a big dog ran .", "一只大狗跑了。"), ("a big dog", "一只大狗"), ("the old man", "老人")])

    two = finetune_pairs(config("finetune.repeat=1", "finetune.keep=2"), corrections, None, tmp_path, issues)
    assert len(two) == 3 and two == finetune_pairs(config("finetune.repeat=1", "finetune.keep=2"), corrections,
                                                   None, tmp_path, issues)


def test_keep_without_a_translation_table_keeps_nothing(tmp_path, caplog):
    corrections = [{"source": "the red cat", "correction": "红色的猫"}]
    pairs = finetune_pairs(config("finetune.repeat=2", "finetune.keep=5"), corrections, None, tmp_path, [])
    assert pairs == [("the red cat", "红色的猫")] * 2
    assert "translations.tsv is missing" in caplog.text
