"""A fairseq checkpoint's files: the model's own preprocessing (repair.nmt.preprocessing) found for a checkpoint.

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
from pathlib import Path
from typing import Any, Mapping

from repair.errors import UserError
from repair.nmt.fairseq.checkpoint import recorded_data_folders
from repair.nmt.preprocessing import (BPES, PREPROCESSING_FILE, TOKENIZERS, ModelFiles, Side, check_option_keys,
                                      read_preprocessing_file)

HUB_CHECKPOINT = "model.pt"
HUB_BPE_CODES = "bpecodes"
HUB_SPM = "sentencepiece.bpe.model"


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
