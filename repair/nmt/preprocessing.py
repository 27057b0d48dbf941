"""A model's own preprocessing: which files and encoders turn text into its tokens and back.

A fairseq translation model is more than its checkpoint: it reads tokens of its source
dictionary, produced from text by a tokenizer (Moses, plain spaces, ...) and a subword model
(SentencePiece, subword-nmt or fastBPE codes), and writes tokens of its target dictionary that
the same encoders turn back into text. `ModelFiles` names all of it, the way fairseq names it
(`tokenizer`, `bpe`, `bpe_codes`, `sentencepiece_model`, one set per side), and `Codec` applies
one side through the libraries fairseq's encoders call (sacremoses, subword-nmt, sentencepiece,
fastBPE), called as fairseq calls them but without importing fairseq, so that a model is tested
and fine-tuned with exactly the preprocessing it was trained with.

Where a fairseq checkpoint's files come from: repair.nmt.fairseq.model_files.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from repair.errors import UserError

TOKENIZERS = ("moses", "space", "jieba", "none")
BPES = ("sentencepiece", "subword_nmt", "fastbpe", "none")
SIDE_KEYS = ("tokenizer", "bpe", "bpe_codes", "sentencepiece_model")
# every preprocessing option a translator or preprocessing.yaml takes
OPTION_KEYS = (*SIDE_KEYS, *(f"{s}_{k}" for s in ("src", "tgt") for k in (*SIDE_KEYS, "dict")))
PREPROCESSING_FILE = "preprocessing.yaml"

_CJK = "\u2e80-\u9fff\u3000-\u303f\uf900-\ufaff\uff00-\uffef"
# Word boundaries (SentencePiece's, a segmenter's, Moses's) leave spaces between Chinese characters: Chinese has none.
_CJK_SPACE = re.compile(f"(?<=[{_CJK}]) +(?=[{_CJK}])")
_CJK_CHAR = re.compile(f"[{_CJK}]")


def detokenize_zh(text: str) -> str:
    return _CJK_SPACE.sub("", text).strip()


@dataclass(frozen=True)
class Side:
    """The preprocessing of one language of a model, and its dictionary."""

    lang: str
    dict: str
    tokenizer: str = "none"
    bpe: str = "none"
    bpe_codes: str | None = None
    sentencepiece_model: str | None = None

    def describe(self) -> str:
        files = [f for f in (self.bpe_codes, self.sentencepiece_model) if f]
        return f"{self.lang}: tokenizer {self.tokenizer}, bpe {self.bpe}" + (f" ({files[0]})" if files else "")


@dataclass(frozen=True)
class ModelFiles:
    """A checkpoint and everything needed to feed it text and read its output."""

    checkpoint: str
    src: Side
    tgt: Side

    def with_checkpoint(self, checkpoint: str | os.PathLike) -> "ModelFiles":
        return replace(self, checkpoint=str(checkpoint))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ModelFiles":
        return cls(str(d["checkpoint"]), Side(**d["src"]), Side(**d["tgt"]))

    def preprocessing(self) -> dict:
        """The preprocessing as `preprocessing.yaml` writes it (paths as they are)."""
        out: dict = {}
        for name, side in (("src", self.src), ("tgt", self.tgt)):
            for key in SIDE_KEYS:
                value = getattr(side, key)
                if value not in (None, "none"):
                    out[f"{name}_{key}"] = value
        return out


# ----------------------------------------------------------------------------- encoders
# Each applies its library exactly as fairseq's encoder of the same name does (fairseq.data.encoders:
# moses_tokenizer, space_tokenizer, subword_nmt_bpe, fastbpe, sentencepiece_bpe), without importing fairseq
# (and torch with it): tests/test_preprocessing.py compares them with fairseq's own on many texts.


class _Moses:
    def __init__(self, lang: str):
        from repair import startup

        sacremoses = startup.import_with("sacremoses", startup.joblib())  # joblib is left out (repair.startup)
        MosesTokenizer, MosesDetokenizer = sacremoses.MosesTokenizer, sacremoses.MosesDetokenizer
        self.tok, self.detok = MosesTokenizer(lang), MosesDetokenizer(lang)

    def encode(self, x: str) -> str:  # fairseq's defaults: dash splits and escaping on
        return self.tok.tokenize(x, aggressive_dash_splits=True, return_str=True, escape=True)

    def decode(self, x: str) -> str:
        return self.detok.detokenize(x.split())


class _Space:
    def __init__(self, lang: str):
        self.space = re.compile(r"\s+")

    def encode(self, x: str) -> str:
        return self.space.sub(" ", x)

    def decode(self, x: str) -> str:
        return x


class _Jieba:
    """`tokenizer=jieba`: Chinese segmented into words with jieba (the usual step before BPE for Chinese)."""

    def __init__(self, lang: str):
        self.jieba = None  # imported when first needed: a target side only decodes

    def encode(self, x: str) -> str:
        if self.jieba is None:
            import jieba

            jieba.setLogLevel(60)
            self.jieba = jieba
        return " ".join(w for w in self.jieba.cut(x) if w.strip())

    def decode(self, x: str) -> str:
        return detokenize_zh(x)


class _SubwordNmt:
    def __init__(self, codes: str):
        from subword_nmt.apply_bpe import BPE

        with open(codes, encoding="utf-8") as f:
            self.bpe = BPE(f, -1, "@@", None, None)

    def encode(self, x: str) -> str:
        return self.bpe.process_line(x)

    def decode(self, x: str) -> str:
        return (x + " ").replace("@@ ", "").rstrip()


class _FastBpe(_SubwordNmt):
    def __init__(self, codes: str):
        import fastBPE

        self.bpe = fastBPE.fastBPE(codes)

    def encode(self, x: str) -> str:
        return self.bpe.apply([x])[0]


class _SentencePiece:
    def __init__(self, model: str):
        import sentencepiece

        self.sp = sentencepiece.SentencePieceProcessor()
        self.sp.Load(model)

    def encode(self, x: str) -> str:
        return " ".join(self.sp.encode(x, out_type=str))

    def decode(self, x: str) -> str:
        return x.replace(" ", "").replace("\u2581", " ").strip()


TOKENIZER_CLASSES = {"moses": _Moses, "space": _Space, "jieba": _Jieba}


def dictionary_symbols(path: str | os.PathLike) -> frozenset[str]:
    """The symbols of a fairseq dictionary file (`SYMBOL COUNT` per line; `#fairseq:overwrite` flags aside)."""
    try:
        with open(path, encoding="utf-8") as f:
            return frozenset(line.split(" ", 1)[0] for line in f if line.strip())
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read the dictionary ({e})") from None


def fit_pieces(pieces: list[str], symbols: frozenset[str], separator: str = "@@", cjk_breaks: bool = False) -> list[str]:
    """A text's pieces with each word the dictionary cannot spell as it is spelt again with the fewest pieces it
    holds (where they spell it; else it stays: unknown tokens). A subword model and a dictionary disagree more often
    than one would think: SentencePiece writes a run of characters its model lacks as one piece (`百姓`) where
    fairseq's dictionary, built from the encoded corpus, holds `百` and `姓`; subword-nmt splits `苹果汁` into
    `苹@@ 果@@ 汁` where the dictionary holds `苹果` and `汁` but no `苹@@`. A word is the pieces up to one without
    `separator` (subword-nmt's `@@`; without one, each piece); its inner parts keep the separator, and with
    `cjk_breaks` (a Chinese side, whose spaces between Chinese characters are dropped on decoding) a part between
    two Chinese characters may end a word instead. The model can write such a text from the pieces it knows;
    encoded as is, it could only write unknown tokens."""
    out: list[str] = []
    word: list[str] = []
    for k, piece in enumerate(pieces):
        word.append(piece)
        if separator and piece.endswith(separator) and k < len(pieces) - 1:
            continue
        out.extend(word if all(w in symbols for w in word) else _spelt(word, symbols, separator, cjk_breaks))
        word = []
    return out


def _spelt(word: list[str], symbols: frozenset[str], separator: str, cjk_breaks: bool) -> list[str]:
    """One word's fewest dictionary pieces (fit_pieces), or the word as it was where none spell it."""
    if not separator:  # each piece a word of its own
        return [q for piece in word for q in _spelt_text(piece, False, symbols, "", cjk_breaks) or [piece]]
    open_end = word[-1].endswith(separator)
    text = "".join(w[:-len(separator)] if w.endswith(separator) else w for w in word)
    return _spelt_text(text, open_end, symbols, separator, cjk_breaks) or word


def _spelt_text(text: str, open_end: bool, symbols: frozenset[str], separator: str, cjk_breaks: bool) -> list[str]:
    n = len(text)
    best: list[tuple[int, list[str]] | None] = [None] * (n + 1)
    best[0] = (0, [])
    for i in range(n):
        if best[i] is None:
            continue
        for j in range(n, i, -1):
            part = text[i:j]
            if j == n:
                forms = [part + separator] if open_end else [part]
            else:
                forms = [part + separator] if separator else [part]
                if cjk_breaks and _CJK_CHAR.match(text[j - 1]) and _CJK_CHAR.match(text[j]):
                    forms.append(part)
            form = next((f for f in forms if f in symbols), None)
            if form is not None and (best[j] is None or best[i][0] + 1 < best[j][0]):
                best[j] = (best[i][0] + 1, best[i][1] + [form])
    return best[n][1] if best[n] is not None else []


class Codec:
    """One side of a model's preprocessing: its tokenizer and subword model, applied as fairseq applies them.
    `fit`: the dictionary's symbols, for a side the model writes (its target): pieces the dictionary lacks are
    spelt with the ones it holds (`fit_pieces`), so that a text the model can write is encoded as it would write
    it (a correction to learn, a translation to score)."""

    def __init__(self, side: Side, fit: frozenset[str] | None = None):
        self.side, self.fit = side, fit
        self.separator = "@@" if side.bpe in ("subword_nmt", "fastbpe") else ""
        self.cjk_breaks = side.lang.startswith("zh")
        self.tokenizer = TOKENIZER_CLASSES[side.tokenizer](side.lang) if side.tokenizer != "none" else None
        self.bpe = None
        try:
            if side.bpe == "sentencepiece":
                self.bpe = _SentencePiece(side.sentencepiece_model)
            elif side.bpe == "subword_nmt":
                self.bpe = _SubwordNmt(side.bpe_codes)
            elif side.bpe == "fastbpe":
                self.bpe = _FastBpe(side.bpe_codes)
        except ImportError as e:
            raise UserError(f"bpe={side.bpe}: {e}") from None
        except Exception as e:  # a codes file or model the library cannot read
            path = side.sentencepiece_model if side.bpe == "sentencepiece" else side.bpe_codes
            raise UserError(f"{path}: not a {side.bpe} model ({type(e).__name__}: {str(e)[:200]})") from None

    def encode_all(self, texts: Sequence[str]) -> list[str]:
        """Each text as the space-separated tokens the model's dictionary holds."""
        texts = list(texts)
        if self.tokenizer is not None:
            texts = [self.tokenizer.encode(t) for t in texts]
        if self.bpe is None:
            lines = texts
        elif self.side.bpe == "sentencepiece":
            # SentencePiece's encode for all texts in one call (a call per text costs more than the encoding)
            lines = [" ".join(p) for p in self.bpe.sp.encode(texts, out_type=str)]
        else:
            lines = [self.bpe.encode(t) for t in texts]
        if self.fit is None or self.bpe is None:  # whole words are the model's units: nothing to spell again
            return lines
        return [line if all(p in self.fit for p in line.split()) else
                " ".join(fit_pieces(line.split(), self.fit, self.separator, self.cjk_breaks)) for line in lines]

    def decode(self, tokens: str) -> str:
        """Tokens of the dictionary back to written text, as fairseq-interactive does; for Chinese,
        without spaces between characters."""
        if self.bpe is not None:
            tokens = self.bpe.decode(tokens)
        if self.tokenizer is not None:
            tokens = self.tokenizer.decode(tokens)
        return detokenize_zh(tokens) if self.side.lang.startswith("zh") else tokens.strip()


# ----------------------------------------------------------------------------- finding the files


def read_preprocessing_file(path: Path) -> dict:
    """preprocessing.yaml: preprocessing keys only, relative paths taken from its folder."""
    from omegaconf import OmegaConf

    try:
        raw = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except Exception as e:
        raise UserError(f"{path}: not a readable YAML file ({str(e).splitlines()[0][:200]})") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UserError(f"{path}: expected keys such as tokenizer: moses, bpe: subword_nmt")
    check_option_keys(raw, str(path))
    out = {}
    for key, value in raw.items():
        if value is not None and (key.endswith(("bpe_codes", "sentencepiece_model")) or key.endswith("_dict")):
            value = str(path.parent / value) if not Path(value).is_absolute() else str(value)
        out[key] = value
    return out


def given_preprocessing(files: ModelFiles | None, options: Mapping[str, Any]) -> dict:
    """The preprocessing options a translator was given (unset ones dropped); resolved `files` take none."""
    given = {k: v for k, v in options.items() if v not in (None, "")}
    if files is not None and given:
        raise UserError(f"translator: preprocessing options {sorted(given)} given with resolved model files")
    return given


def check_option_keys(options: Mapping[str, Any], where: str) -> None:
    unknown = sorted(k for k in options if k not in OPTION_KEYS)
    if unknown:
        raise UserError(f"{where}: unknown preprocessing key(s) {unknown}; known: {', '.join(OPTION_KEYS)}")
