"""A model's own preprocessing: which files and encoders turn text into its tokens and back.

A fairseq translation model is more than its checkpoint: it reads tokens of its source
dictionary, produced from text by a tokenizer (Moses, plain spaces, ...) and a subword model
(SentencePiece, subword-nmt or fastBPE codes), and writes tokens of its target dictionary that
the same encoders turn back into text. `ModelFiles` names all of it, the way fairseq names it
(`tokenizer`, `bpe`, `bpe_codes`, `sentencepiece_model`, one set per side), and `Codec` applies
one side through the libraries fairseq's encoders call (sacremoses, subword-nmt, sentencepiece,
fastBPE), called as fairseq calls them but without importing fairseq, so that a model is tested
and fine-tuned with exactly the preprocessing it was trained with.

Where the files come from (`resolve_model_files`), first found wins, per side and key:
1. explicit options (`src_tokenizer=` before `tokenizer=`; the same for `bpe`, `bpe_codes`,
   `sentencepiece_model`; `src_dict`, `tgt_dict`);
2. `preprocessing.yaml` in the model's folder (the same keys; relative paths from the folder);
3. the checkpoint's own `tokenizer` / `bpe` settings (`fairseq-train --tokenizer moses --bpe ...`);
4. files in the model's folder laid out like fairseq's published models: `dict.<lang>.txt`,
   `bpecodes` (subword-nmt), `sentencepiece.bpe.model`;
5. a prepared data folder of ours: `spm/<lang>.model` and `bin/dict.<lang>.txt`;
6. the dictionaries in the binarized data folder the checkpoint records (`task.data`, where fairseq-preprocess
   left them: absolute, or relative to the checkpoint's folder or its parent).
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from repair.errors import UserError
from repair.nmt.fairseq.checkpoint import recorded_data_folders

TOKENIZERS = ("moses", "space", "jieba", "none")
BPES = ("sentencepiece", "subword_nmt", "fastbpe", "none")
SIDE_KEYS = ("tokenizer", "bpe", "bpe_codes", "sentencepiece_model")
# every preprocessing option a translator or preprocessing.yaml takes
OPTION_KEYS = (*SIDE_KEYS, *(f"{s}_{k}" for s in ("src", "tgt") for k in (*SIDE_KEYS, "dict")))
HUB_CHECKPOINT = "model.pt"
HUB_BPE_CODES = "bpecodes"
HUB_SPM = "sentencepiece.bpe.model"
PREPROCESSING_FILE = "preprocessing.yaml"

_CJK = "\u2e80-\u9fff\u3000-\u303f\uf900-\ufaff\uff00-\uffef"
# Word boundaries (SentencePiece's, a segmenter's, Moses's) leave spaces between Chinese characters: Chinese has none.
_CJK_SPACE = re.compile(f"(?<=[{_CJK}]) +(?=[{_CJK}])")


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


class Codec:
    """One side of a model's preprocessing: its tokenizer and subword model, applied as fairseq applies them."""

    def __init__(self, side: Side):
        self.side = side
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
            return texts
        if self.side.bpe == "sentencepiece":
            # SentencePiece's encode for all texts in one call (a call per text costs more than the encoding)
            return [" ".join(p) for p in self.bpe.sp.encode(texts, out_type=str)]
        return [self.bpe.encode(t) for t in texts]

    def decode(self, tokens: str) -> str:
        """Tokens of the dictionary back to written text, as fairseq-interactive does; for Chinese,
        without spaces between characters."""
        if self.bpe is not None:
            tokens = self.bpe.decode(tokens)
        if self.tokenizer is not None:
            tokens = self.tokenizer.decode(tokens)
        return detokenize_zh(tokens) if self.side.lang.startswith("zh") else tokens.strip()


# ----------------------------------------------------------------------------- finding the files


def checkpoint_path(path: str | os.PathLike) -> Path:
    """The checkpoint file a path names: the file itself, or a folder's model.pt (or its only .pt)."""
    path = Path(path)
    if not path.is_dir():
        return path
    if (path / HUB_CHECKPOINT).is_file():
        return path / HUB_CHECKPOINT
    found = sorted(path.glob("*.pt"))
    if len(found) == 1:
        return found[0]
    if (path / "checkpoint_best.pt").is_file():
        return path / "checkpoint_best.pt"
    raise UserError(f"{path}: a model folder needs {HUB_CHECKPOINT} (found: "
                    f"{', '.join(p.name for p in found) or 'no .pt file'})")


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


def _cfg_get(cfg: Any, *keys: str) -> Any:
    for key in keys:
        if cfg is None:
            return None
        cfg = cfg.get(key) if isinstance(cfg, Mapping) or hasattr(cfg, "get") else getattr(cfg, key, None)
    return cfg


def checkpoint_facts(cfg: Any) -> dict:
    """What `resolve_model_files` and the translators read from a checkpoint's configuration, as plain values
    in the same layout (kept beside a converted model, so that using it never loads the checkpoint)."""
    def text(*keys: str) -> str | None:
        value = _cfg_get(cfg, *keys)
        return value if isinstance(value, str) and value not in ("", "???") else None

    positions = _cfg_get(cfg, "model", "max_source_positions")
    return {"task": {"source_lang": text("task", "source_lang"), "target_lang": text("task", "target_lang"),
                     "data": text("task", "data")},
            "tokenizer": {"_name": text("tokenizer", "_name") or text("tokenizer")},
            "bpe": {"_name": text("bpe", "_name") or text("bpe"), "bpe_codes": text("bpe", "bpe_codes"),
                    "sentencepiece_model": text("bpe", "sentencepiece_model")},
            "model": {"max_source_positions": int(positions or 1024)}}


def checkpoint_langs(cfg: Any) -> tuple[str, str]:
    return (_cfg_get(cfg, "task", "source_lang") or "en", _cfg_get(cfg, "task", "target_lang") or "zh")


def side_tokenizer(name: str, options: Mapping, from_yaml: Mapping, from_ckpt: Mapping, path: Path) -> tuple[str, str | None]:
    """A side's tokenizer and where it comes from: "given" (translator.<side>_tokenizer, or preprocessing.yaml),
    a setting that covers both sides (translator.tokenizer, the checkpoint's), or None (nothing: `none`)."""
    for value, origin in ((options.get(f"{name}_tokenizer"), "given"), (options.get("tokenizer"), "translator.tokenizer"),
                          (from_yaml.get(f"{name}_tokenizer"), "given"), (from_yaml.get("tokenizer"), "given"),
                          (from_ckpt.get("tokenizer"), f"the checkpoint's tokenizer setting ({path.name})")):
        if value not in (None, ""):  # the order resolve_model_files' `pick` takes them in
            return value, origin
    return "none", None


_ASSUMED: set = set()


def assumed(name: str, lang: str, tokenizer: str, origin: str | None) -> None:
    """Log, once per process, a side's tokenizer that nothing names for that side: taken from a setting that covers
    both sides (fairseq records one tokenizer), or none at all; and the key that changes it."""
    import logging

    if (name, lang, tokenizer, origin) in _ASSUMED:
        return
    _ASSUMED.add((name, lang, tokenizer, origin))
    hint = "e.g. jieba if the Chinese was segmented into words" if name == "tgt" else "e.g. moses"
    logging.getLogger(__name__).warning(
        "%s side: tokenizer %s assumed (%s); nothing says how the %s text was tokenized for this model. If it was "
        "tokenized otherwise, set translator.%s_tokenizer=... (%s)", lang, tokenizer,
        f"from {origin}, which covers both sides" if origin else "nothing names one", lang, name, hint)


def resolve_model_files(checkpoint: str | os.PathLike, data_dir: str | os.PathLike | None = None,
                        checkpoint_cfg: Any = None, **options: Any) -> ModelFiles:
    """Everything a checkpoint needs, found as the module doc says; one UserError for what is missing."""
    check_option_keys(options, "translator")
    options = {k: v for k, v in options.items() if v not in (None, "")}
    path = checkpoint_path(checkpoint)
    folder = path.parent
    yaml_path = folder / PREPROCESSING_FILE
    from_yaml = read_preprocessing_file(yaml_path) if yaml_path.is_file() else {}
    data = Path(data_dir) if data_dir else None
    src_lang, tgt_lang = checkpoint_langs(checkpoint_cfg)
    from_ckpt = {
        "tokenizer": _cfg_get(checkpoint_cfg, "tokenizer", "_name") or _cfg_get(checkpoint_cfg, "tokenizer"),
        "bpe": _cfg_get(checkpoint_cfg, "bpe", "_name") or _cfg_get(checkpoint_cfg, "bpe"),
        "bpe_codes": _cfg_get(checkpoint_cfg, "bpe", "bpe_codes"),
        "sentencepiece_model": _cfg_get(checkpoint_cfg, "bpe", "sentencepiece_model"),
    }
    from_ckpt = {k: v for k, v in from_ckpt.items() if isinstance(v, str) and v not in ("", "???")}

    def side(name: str, lang: str) -> Side:
        def pick(key: str) -> Any:
            for source in (options, from_yaml):
                for k in (f"{name}_{key}", key):
                    if source.get(k) not in (None, ""):
                        return source[k]
            return None

        def existing(*candidates: Path | str | None) -> str | None:
            return next((str(c) for c in candidates if c and Path(c).is_file()), None)

        tokenizer, origin = side_tokenizer(name, options, from_yaml, from_ckpt, path)
        bpe = pick("bpe") or from_ckpt.get("bpe")
        codes, spm = pick("bpe_codes"), pick("sentencepiece_model")
        ckpt_codes, ckpt_spm = existing(from_ckpt.get("bpe_codes")), existing(from_ckpt.get("sentencepiece_model"))
        folder_codes, folder_spm = existing(folder / HUB_BPE_CODES), existing(folder / HUB_SPM)
        data_spm = existing(data / "spm" / f"{lang}.model") if data else None
        if bpe is None:
            if codes or folder_codes:
                bpe = "subword_nmt"
            elif spm or folder_spm or data_spm:
                bpe = "sentencepiece"
            else:
                bpe = "none"
        if tokenizer not in TOKENIZERS:
            raise UserError(f"unknown tokenizer {tokenizer!r} ({name} side); known: {', '.join(TOKENIZERS)}")
        if origin != "given" and (origin or bpe != "sentencepiece"):  # SentencePiece alone takes raw text
            assumed(name, lang, tokenizer, origin)
        if bpe not in BPES:
            raise UserError(f"unknown bpe {bpe!r} ({name} side); known: {', '.join(BPES)}")
        if bpe in ("subword_nmt", "fastbpe"):
            codes = codes or folder_codes or ckpt_codes
            if not codes:
                raise UserError(f"bpe={bpe} needs its BPE codes for the {lang} side: give translator.bpe_codes=FILE "
                                f"(or {name}_bpe_codes=), or put {HUB_BPE_CODES} beside {path}")
            if not Path(codes).is_file():
                raise UserError(f"BPE codes {codes} not found ({lang} side)")
            spm = None
        elif bpe == "sentencepiece":
            spm = spm or folder_spm or data_spm or ckpt_spm
            if not spm:
                raise UserError(f"bpe=sentencepiece needs a SentencePiece model for the {lang} side: give "
                                f"translator.sentencepiece_model=FILE (or {name}_sentencepiece_model=), or put "
                                f"{HUB_SPM} beside {path}")
            if not Path(spm).is_file():
                raise UserError(f"SentencePiece model {spm} not found ({lang} side)")
            codes = None
        else:
            codes = spm = None
        dictionary = options.get(f"{name}_dict") or from_yaml.get(f"{name}_dict") or \
            find_dictionary(name, lang, path, data, checkpoint_cfg)
        if not Path(dictionary).is_file():
            raise UserError(f"fairseq dictionary {dictionary} not found ({lang} side)")
        return Side(lang, str(dictionary), tokenizer, bpe, codes and str(codes), spm and str(spm))

    return ModelFiles(str(path), side("src", src_lang), side("tgt", tgt_lang))


def find_dictionary(name: str, lang: str, checkpoint: Path, data: Path | None, checkpoint_cfg: Any) -> str:
    """A side's dictionary that nothing names: dict.<lang>.txt beside the checkpoint, in a data folder of ours
    (bin/), or in the binarized data folder the checkpoint records (where fairseq-preprocess left it)."""
    candidates = [checkpoint.parent / f"dict.{lang}.txt"] + ([data / "bin" / f"dict.{lang}.txt"] if data else []) + \
        [d / f"dict.{lang}.txt" for d in recorded_data_folders(checkpoint_cfg, checkpoint)]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        recorded = _cfg_get(checkpoint_cfg, "task", "data")
        where = f" and in the data folder the checkpoint records ({recorded})" if isinstance(recorded, str) else ""
        raise UserError(f"no {lang} dictionary for {checkpoint}: looked for {', '.join(map(str, candidates))}{where}; "
                        f"give translator.{name}_dict=FILE (the dict.{lang}.txt the model was trained with)")
    return str(found)


def write_model_folder(files: ModelFiles, folder: str | os.PathLike) -> None:
    """Dictionaries, subword models and preprocessing.yaml beside a checkpoint in `folder`, so that the
    folder is a model of its own (a fine-tuned model is a drop-in replacement for its base)."""
    import shutil

    from omegaconf import OmegaConf

    from repair.fileio import write_text_atomic

    folder = Path(folder)
    prep: dict = {}
    for name, side in (("src", files.src), ("tgt", files.tgt)):
        target = folder / f"dict.{side.lang}.txt"
        if Path(side.dict).resolve() != target.resolve():
            shutil.copyfile(side.dict, target)
        prep[f"{name}_tokenizer"], prep[f"{name}_bpe"] = side.tokenizer, side.bpe
        for key in ("bpe_codes", "sentencepiece_model"):
            value = getattr(side, key)
            if value:
                copy = folder / f"{name}.{Path(value).name}"
                shutil.copyfile(value, copy)
                prep[f"{name}_{key}"] = copy.name
    write_text_atomic(folder / PREPROCESSING_FILE, OmegaConf.to_yaml(OmegaConf.create(prep)))
