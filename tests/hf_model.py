"""Hugging Face translation models none of us downloaded, built here: a tiny MarianMT trained on Tatoeba's pairs
(two SentencePiece models, one shared vocab.json, `MarianTokenizer`, a small `MarianConfig`) and saved with
`save_pretrained` as an OPUS-MT folder is laid out; and a tiny randomly initialized M2M100 whose target language is
a forced first token (NLLB's and M2M100's way). Nothing is downloaded.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import repair  # noqa: F401  (before torch: its threads wait asleep, as the package sets them; repair/__init__.py)
from cli_model import tatoeba_corpus

# The Marian model's size and training: small enough to train in about a minute on 2 cores, large enough that
# it translates short Tatoeba sentences partly right (so that Purity finds both right and wrong translations).
MARIAN = {"d_model": 128, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
          "decoder_attention_heads": 4, "encoder_ffn_dim": 256, "decoder_ffn_dim": 256, "max_position_embeddings": 128}
TRAIN_PAIRS, BATCH, STEPS, LR = 6000, 48, 800, 2e-3
VERSION = "marian-4"  # bump when the recipe changes: a cached model is rebuilt


def short_pairs(corpus: Path, split: str, max_words: int = 12) -> list[tuple[str, str]]:
    en = (corpus / f"{split}.en").read_text(encoding="utf-8").splitlines()
    zh = (corpus / f"{split}.zh").read_text(encoding="utf-8").splitlines()
    return [(e, z) for e, z in zip(en, zh) if len(e.split()) <= max_words]


def loop_inputs(corpus: Path, out: Path, n: int, sizes: tuple[int, int, int]) -> tuple[Path, Path]:
    """For the loop on the tiny model: `n` test sentences of 8 to 25 words (their noun phrases are what Purity tests;
    Tatoeba's short ones hold few) with their references beside them (X.zh, for review=oracle), and out/corpus/ with
    the first `sizes` lines of the train, valid and test splits."""
    sentences = out / "sentences.en"
    pairs = [p for p in short_pairs(corpus, "test", max_words=25) if len(p[0].split()) >= 8][:n]
    sentences.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    sentences.with_suffix(".zh").write_text("".join(z + "\n" for _, z in pairs), encoding="utf-8")
    data = out / "corpus"
    data.mkdir()
    for split, count in zip(("train", "valid", "test"), sizes):
        for lang in ("en", "zh"):
            lines = (corpus / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:count]
            (data / f"{split}.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return sentences, data


def train_spm(lines: list[str], prefix: Path, vocab: int, coverage: float) -> Path:
    import sentencepiece as spm

    text = prefix.with_suffix(".txt")
    text.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(prefix), vocab_size=vocab,
                                   character_coverage=coverage, model_type="unigram", eos_id=0, unk_id=1,
                                   bos_id=-1, pad_id=-1, hard_vocab_limit=False, minloglevel=2)
    text.unlink()
    return prefix.with_suffix(".model")


def marian_tokenizer(work: Path, pairs: list[tuple[str, str]]):
    """source.spm, target.spm and one vocab.json (</s> 0, <unk> 1, both sides' pieces, <pad> last)."""
    import sentencepiece as spm
    from transformers import MarianTokenizer

    src = train_spm([e for e, _ in pairs], work / "source", 1000, 1.0)
    tgt = train_spm([z for _, z in pairs], work / "target", 3000, 1.0)
    vocab = {"</s>": 0, "<unk>": 1}
    for model in (src, tgt):
        sp = spm.SentencePieceProcessor(model_file=str(model))
        for i in range(sp.get_piece_size()):
            vocab.setdefault(sp.id_to_piece(i), len(vocab))
    vocab["<pad>"] = len(vocab)
    (work / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    src.rename(work / "source.spm")
    tgt.rename(work / "target.spm")
    for side in ("source", "target"):
        (work / f"{side}.vocab").unlink()
    return MarianTokenizer(str(work / "source.spm"), str(work / "target.spm"), str(work / "vocab.json"),
                           source_lang="en", target_lang="zh")


def train_marian(tok, pairs: list[tuple[str, str]], seconds: float = 360.0):
    """A small MarianMTModel trained on the pairs: STEPS batches (about 2 minutes on 2 idle cores; fewer steps give
    a model that writes the same few characters for every input), or `seconds` on a machine too busy for that."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(0)
    pad = tok.pad_token_id
    config = MarianConfig(vocab_size=len(tok), pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0,
                          forced_eos_token_id=0, bad_words_ids=[[pad]], num_beams=4, max_length=64,
                          scale_embedding=True, share_encoder_decoder_embeddings=True, **MARIAN)
    model = MarianMTModel(config)
    # The decoder starts from <pad>'s embedding, as CTranslate2 does from zeros: kept zero, as OPUS-MT's is. The output
    # layer is tied to the embeddings, so the row's gradient (from the softmax) is dropped, not only the lookup's.
    embed = model.get_input_embeddings().weight
    with torch.no_grad():
        embed[pad].zero_()
    embed.register_hook(lambda g: g.index_fill(0, torch.tensor([pad]), 0.0))
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    rng = random.Random(0)
    model.train()
    start = time.time()
    for step in range(STEPS):
        batch = rng.sample(pairs, BATCH)
        enc = tok([e for e, _ in batch], text_target=[z for _, z in batch], padding=True, truncation=True,
                  max_length=64, return_tensors="pt")
        enc["labels"][enc["labels"] == pad] = -100
        loss = model(**enc).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        if time.time() - start > seconds:
            break
    model.eval()
    return model


def build_marian(cmn: Path, out: Path) -> dict:
    """out/corpus/{train,valid,test}.{en,zh} (Tatoeba, shuffled) and out/model/ (a MarianMT folder)."""
    import torch

    corpus = tatoeba_corpus(cmn, out / "corpus", n_train=TRAIN_PAIRS, n_valid=200, n_test=300)
    work = out / "model"
    work.mkdir(parents=True, exist_ok=True)
    pairs = short_pairs(corpus, "train")
    tok = marian_tokenizer(work, pairs)
    torch.set_num_threads(2)
    model = train_marian(tok, pairs)
    model.save_pretrained(work)
    tok.save_pretrained(work)
    return {"corpus": corpus, "model": work}


def build_m2m100(out: Path, corpus: Path) -> Path:
    """A tiny random M2M100 folder (en and zh language tokens; a large init_std so that outputs differ by input)."""
    import sentencepiece as spm
    import torch
    from transformers import M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer

    out.mkdir(parents=True, exist_ok=True)
    lines = (corpus / "train.en").read_text(encoding="utf-8").splitlines()[:2000]
    lines += (corpus / "train.zh").read_text(encoding="utf-8").splitlines()[:2000]
    text = out / "spm.txt"
    text.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(out / "spm"), vocab_size=1500,
                                   character_coverage=0.99, hard_vocab_limit=False, minloglevel=2)
    text.unlink()
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    tok = M2M100Tokenizer(str(out / "vocab.json"), str(out / "spm.model"), src_lang="en", tgt_lang="zh",
                          language_codes="m2m100")
    torch.manual_seed(0)
    size = max(tok.lang_token_to_id.values()) + 9  # the language tokens and 8 made-up words after the pieces
    config = M2M100Config(vocab_size=size, d_model=32, encoder_layers=1, decoder_layers=1,
                          encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                          decoder_ffn_dim=64, max_position_embeddings=128, init_std=1.0, pad_token_id=1,
                          bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    model = M2M100ForConditionalGeneration(config).eval()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    for leftover in ("spm.model", "spm.vocab"):
        (out / leftover).unlink()
    return out


def build_nllb(out: Path, m2m: Path) -> Path:
    """A tiny random NLLB-style folder: an `NllbTokenizer` (language codes such as eng_Latn and zho_Hans as tokens)
    on the pieces of the M2M100 folder's SentencePiece model, and an M2M100 model of its size (NLLB's architecture)."""
    import sentencepiece as spm
    import torch
    from transformers import M2M100Config, M2M100ForConditionalGeneration, NllbTokenizer

    sp = spm.SentencePieceProcessor(model_file=str(m2m / "sentencepiece.bpe.model"))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}  # NLLB's order: <pad> 1, as the positions expect
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    tok = NllbTokenizer(vocab=vocab, src_lang="eng_Latn", tgt_lang="zho_Hans")
    torch.manual_seed(0)
    config = M2M100Config(vocab_size=len(tok), d_model=32, encoder_layers=1, decoder_layers=1,
                          encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                          decoder_ffn_dim=64, max_position_embeddings=128, init_std=1.0,
                          pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                          decoder_start_token_id=tok.eos_token_id)
    out.mkdir(parents=True, exist_ok=True)
    M2M100ForConditionalGeneration(config).eval().save_pretrained(out)
    tok.save_pretrained(out)
    return out
