"""The model's preprocessing applied without fairseq (repair.nmt.preprocessing.Codec) gives exactly what
fairseq's own encoders give: Moses, jieba and plain spaces, subword-nmt and SentencePiece, both ways, on
the paper's input sentences and Tatoeba's pairs."""

from __future__ import annotations

import io
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from repair.nmt.preprocessing import Codec, Side, detokenize_zh

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def texts():
    from conftest import SHARED_DATA, need_shared

    from repair.bench.translate import tatoeba_pairs
    from repair.data.prepare import clean_text

    tatoeba = SHARED_DATA / "tatoeba-cmn-eng" / "cmn.txt"
    cnn = [SHARED_DATA / "purity-inputs" / f"{name}.txt" for name in ("business", "politics")]
    need_shared(tatoeba, *cnn)
    pairs = tatoeba_pairs(tatoeba)[::20][:1500]
    english = [clean_text(line) for p in cnn for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    english += [clean_text(en) for en, _ in pairs] + ["A \"quoted\" <b>tag</b> & 'apostrophes' - dashes--and so-called"]
    return {"en": english, "zh": [clean_text(zh) for _, zh in pairs]}


def fairseq_codec(side: Side):
    """fairseq's own encoders for the side, as its interactive translation builds them."""
    from fairseq.data import encoders

    tokenizer = None
    if side.tokenizer in ("moses", "space"):
        tokenizer = encoders.build_tokenizer(Namespace(tokenizer=side.tokenizer, source_lang=side.lang,
                                                       target_lang=side.lang, moses_no_dash_splits=False,
                                                       moses_no_escape=False))
    if side.bpe == "sentencepiece":
        bpe = encoders.build_bpe(Namespace(bpe="sentencepiece", sentencepiece_model=side.sentencepiece_model,
                                           sentencepiece_enable_sampling=False, sentencepiece_alpha=None))
    else:
        bpe = encoders.build_bpe(Namespace(bpe="subword_nmt", bpe_codes=side.bpe_codes, bpe_separator="@@"))
    return tokenizer, bpe


@pytest.fixture(scope="module")
def codes(texts, tmp_path_factory):
    from subword_nmt.learn_bpe import learn_bpe

    folder = tmp_path_factory.mktemp("codes")
    moses = Codec(Side("en", "", "moses"))
    jieba = Codec(Side("zh", "", "jieba"))
    buf = io.StringIO()
    learn_bpe(moses.encode_all(texts["en"]) + jieba.encode_all(texts["zh"]), buf, 800, min_frequency=2)
    (folder / "bpecodes").write_text(buf.getvalue(), encoding="utf-8")
    import sentencepiece

    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(texts["en"]), model_prefix=str(folder / "spm"),
                                             vocab_size=500, character_coverage=1.0, minloglevel=2)
    return folder


@pytest.mark.parametrize("lang, tokenizer, bpe", [("en", "moses", "subword_nmt"), ("en", "space", "subword_nmt"),
                                                  ("zh", "jieba", "subword_nmt"), ("en", "none", "sentencepiece")])
def test_the_codec_gives_fairseqs_encoding_and_decoding(texts, codes, lang, tokenizer, bpe):
    side = Side(lang, "", tokenizer, bpe, str(codes / "bpecodes") if bpe == "subword_nmt" else None,
                str(codes / "spm.model") if bpe == "sentencepiece" else None)
    ours = Codec(side)
    fs_tokenizer, fs_bpe = fairseq_codec(side)
    lines = texts[lang]
    encoded = ours.encode_all(lines)
    if tokenizer == "jieba":  # fairseq has no jieba tokenizer: ours, then fairseq's BPE
        theirs = [fs_bpe.encode(t) for t in Codec(Side(lang, "", "jieba")).encode_all(lines)]
    else:
        theirs = [fs_bpe.encode(fs_tokenizer.encode(t) if fs_tokenizer else t) for t in lines]
    assert encoded == theirs
    assert sum("@@" in e or "\u2581" in e for e in encoded) > len(lines) // 4  # subwords were made
    if tokenizer == "moses":
        assert any("&quot;" in e for e in encoded)  # fairseq's Moses escapes
    for e in encoded:
        text = fs_bpe.decode(e)
        if fs_tokenizer is not None:
            text = fs_tokenizer.decode(text)
        # Chinese: jieba's words joined back, no spaces between Chinese characters (as the translators write it)
        assert ours.decode(e) == (text.strip() if lang == "en" else detokenize_zh(text))
    if tokenizer != "jieba":
        assert sum(ours.decode(e) == t for e, t in zip(encoded, lines)) > 0.8 * len(lines)


def test_the_codec_imports_neither_fairseq_nor_torch(codes):
    code = ("import sys; from repair.nmt.preprocessing import Codec, Side, detokenize_zh; "
            f"c = Codec(Side('en', '', 'moses', 'subword_nmt', {str(codes / 'bpecodes')!r})); "
            "print(c.decode(c.encode_all(['Hello, world.'])[0])); "
            "print(sorted(m for m in ('torch', 'fairseq') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["Hello, world.", "[]"]


def test_a_target_is_spelt_with_the_pieces_its_dictionary_holds(texts, codes, tmp_path):
    """A side the model writes: a piece its dictionary lacks (a merge the dictionary's threshold dropped; a run of
    characters SentencePiece writes as one unknown piece) is spelt with the dictionary's pieces where they spell
    it, and decodes to the same text; where they cannot, it stays (an unknown token)."""
    from repair.nmt.preprocessing import fit_pieces

    for side in (Side("zh", "", "jieba", "subword_nmt", str(codes / "bpecodes")),
                 Side("en", "", "none", "sentencepiece", None, str(codes / "spm.model"))):
        plain = Codec(side)
        lines = plain.encode_all(texts[side.lang])
        pieces = {p for line in lines for p in line.split()}
        sep = "@@" if side.bpe == "subword_nmt" else ""
        core = {p: p.removesuffix("@@") if sep else p for p in pieces}
        # the dictionary lacks the 20 longest pieces, and holds each of their characters inside a word and at its end
        longest = sorted((p for p in pieces if len(core[p]) >= 2), key=lambda p: (-len(core[p]), p))[:20]
        chars = {c + end for p in longest for c in core[p] for end in {sep, ""}}
        symbols = frozenset((pieces - set(longest)) | chars)
        fitted = Codec(side, fit=symbols).encode_all(texts[side.lang])
        changed = [(a, b) for a, b in zip(lines, fitted) if a != b]
        assert changed and all(set(b.split()) <= symbols for _, b in changed)
        assert all(plain.decode(a) == plain.decode(b) for a, b in changed)
    # left to right, the longest first; subword-nmt's inner pieces keep their @@; what cannot be spelt stays
    symbols = frozenset(["▁", "百", "姓", "▁许", "工@@", "厂", "ab@@"])
    assert fit_pieces(["▁许", "百姓", "幽默"], symbols, "") == ["▁许", "百", "姓", "幽默"]
    assert fit_pieces(["工厂"], symbols) == ["工@@", "厂"]
    assert fit_pieces(["abc@@", "厂"], symbols) == ["abc@@", "厂"]
    # a Chinese word may end between two Chinese characters (their space is dropped on decoding): 苹果汁 as 苹果 汁
    symbols = frozenset(["请", "苹果", "果@@", "汁", "。"])
    assert fit_pieces("请 苹@@ 果@@ 汁 。".split(), symbols, "@@", cjk_breaks=True) == ["请", "苹果", "汁", "。"]
    assert fit_pieces("请 苹@@ 果@@ 汁 。".split(), symbols, "@@") == "请 苹@@ 果@@ 汁 。".split()
