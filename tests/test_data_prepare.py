"""Cleaning, SentencePiece and fairseq binarizing of raw parallel text."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from repair.data.prepare import (
    clean_text,
    iter_clean_pairs,
    load_spm,
    prepare_data,
    read_clean_pairs,
)
from repair.errors import UserError
from repair.nmt.fairseq.finetune import binarize_pairs

FIXTURES = Path(__file__).parent / "fixtures" / "nmt"
_spec = importlib.util.spec_from_file_location("nmt_corpus", FIXTURES / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)


def test_clean_text_removes_bom_control_characters_and_odd_spaces():
    assert clean_text("\ufeffThe cat\x07 sees\tthe  dog .\r") == "The cat sees the dog ."
    assert clean_text("猫\u200b看见\u3000狗。") == "猫看见 狗。"
    assert clean_text(" \x00 ") == ""


def test_iter_clean_pairs_counts_what_it_drops():
    pairs = [
        ("The cat sees the dog .", "猫看见狗。"),
        ("The cat sees the dog .", "猫看见狗。"),  # duplicate
        ("", "猫。"),  # empty side
        ("The cat .", "猫" * 40),  # ratio 40 : 2
        (" ".join(["word"] * 300), "词" * 300),  # too long
        ("\ufeffThe dog sees the cat .", "狗看见猫。"),  # repaired, kept
    ]
    counts: dict = {}
    kept = list(iter_clean_pairs(pairs, counts, max_ratio=9, max_length=250))
    assert kept == [("The cat sees the dog .", "猫看见狗。"), ("The dog sees the cat .", "狗看见猫。")]
    assert counts == {"input": 6, "empty": 1, "too_long": 1, "ratio": 1, "duplicate": 1, "kept": 2, "changed": 1}


@pytest.fixture
def raw_dir(tmp_path) -> Path:
    d = corpus.write_corpus(tmp_path / "data", n_train=300, n_valid=20, n_test=20)
    en, zh = d / "raw" / "train.en", d / "raw" / "train.zh"
    # A BOM at the start, an empty pair and a duplicate, as real downloads have.
    en.write_text("\ufeff" + en.read_text(encoding="utf-8") + "\nThe cat sees the dog .\nThe cat sees the dog .\n", encoding="utf-8")
    zh.write_text(zh.read_text(encoding="utf-8") + "\n猫看见狗。\n猫看见狗。\n", encoding="utf-8")
    return d


def test_prepare_writes_spm_bin_and_counts_and_is_idempotent(raw_dir):
    record = prepare_data(raw_dir, vocab_size=120)
    train = record["splits"]["train"]
    assert train["input"] == 303 and train["empty"] == 1 and train["duplicate"] >= 1
    assert train["kept"] == train["input"] - train["empty"] - train["duplicate"] - train["ratio"] - train["too_long"]
    assert record["splits"]["valid"]["kept"] == 20
    for name in ("dict.en.txt", "dict.zh.txt", "train.en-zh.en.bin", "train.en-zh.zh.idx", "valid.en-zh.zh.bin", "test.en-zh.en.idx"):
        assert (raw_dir / "bin" / name).is_file(), name
    sp = load_spm(raw_dir / "spm" / "zh.model")
    assert sp.decode(sp.encode("老师看见狗。")) == "老师看见狗。"
    assert not read_clean_pairs(raw_dir)[0][0].startswith("\ufeff")

    # fairseq reads what was written: same number of sentences, tokens from the dictionary.
    from fairseq.data import Dictionary, data_utils

    d = Dictionary.load(str(raw_dir / "bin" / "dict.zh.txt"))
    ds = data_utils.load_indexed_dataset(str(raw_dir / "bin" / "valid.en-zh.zh"), d)
    assert len(ds) == 20 and int(ds[0][-1]) == d.eos()
    assert d.unk() not in ds[0].tolist()

    stamp = (raw_dir / "bin" / "train.en-zh.en.bin").stat().st_mtime_ns
    assert prepare_data(raw_dir, vocab_size=120) == record
    assert (raw_dir / "bin" / "train.en-zh.en.bin").stat().st_mtime_ns == stamp
    # Changed options or inputs: prepared again.
    again = prepare_data(raw_dir, vocab_size=100)
    assert again["fingerprint"] != record["fingerprint"]


def test_binarize_pairs_uses_the_models_own_preprocessing(raw_dir, tmp_path):
    from repair.nmt.preprocessing import ModelFiles, Side

    prepare_data(raw_dir, vocab_size=120)
    files = ModelFiles("unused.pt", *(Side(lang, str(raw_dir / "bin" / f"dict.{lang}.txt"), "none", "sentencepiece",
                                          sentencepiece_model=str(raw_dir / "spm" / f"{lang}.model")) for lang in ("en", "zh")))
    valid = read_clean_pairs(raw_dir, "valid")
    out = binarize_pairs({"train": [("The cat sees the dog .", "猫看见狗。")] * 3, "valid": valid}, files, tmp_path / "ft")
    from fairseq.data import Dictionary, data_utils

    d = Dictionary.load(str(out / "dict.en.txt"))
    train = data_utils.load_indexed_dataset(str(out / "train.en-zh.en"), d)
    assert len(train) == 3
    # the prepared valid split, encoded again through the model's files, is the same data
    assert (out / "valid.en-zh.zh.bin").read_bytes() == (raw_dir / "bin" / "valid.en-zh.zh.bin").read_bytes()
    out = binarize_pairs({"train": [("The cat .", " "), ("The dog .", "狗。")]}, files, tmp_path / "some_empty")
    assert len(data_utils.load_indexed_dataset(str(out / "train.en-zh.zh"), d)) == 1
    with pytest.raises(UserError, match="empty side"):
        binarize_pairs({"train": [("The cat .", " ")]}, files, tmp_path / "bad")


def test_missing_raw_files_are_listed_in_one_message(tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "train.en").write_text("x\n", encoding="utf-8")
    with pytest.raises(UserError) as e:
        prepare_data(tmp_path)
    msg = str(e.value)
    for name in ("train.zh", "valid.en", "valid.zh", "test.en", "test.zh"):
        assert name in msg
    assert "train.en\n" not in msg and "one sentence per line" in msg


def test_misaligned_and_non_utf8_input_name_the_file(raw_dir):
    zh = raw_dir / "raw" / "valid.zh"
    zh.write_text("只有一行。\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"valid.en has 20 lines but .*valid.zh has 1"):
        prepare_data(raw_dir, vocab_size=120)
    zh.write_bytes("第一行。\n".encode() + b"\xff\xfe bad\n")
    with pytest.raises(UserError, match=r"valid.zh:2: not UTF-8"):
        prepare_data(raw_dir, vocab_size=120)


def test_missing_sentencepiece_model_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="SentencePiece model .* not found"):
        load_spm(tmp_path / "spm" / "en.model")
    (tmp_path / "broken.model").write_bytes(b"not a model")
    with pytest.raises(UserError, match="not a SentencePiece model"):
        load_spm(tmp_path / "broken.model")
