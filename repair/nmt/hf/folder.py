"""A Hugging Face `transformers` translation model as a local folder: what it holds, how it loads (never from the
hub), the target language it needs, and the files record the loop keeps of it (`ModelFiles`).

Three kinds of folder load:
- a model, as `save_pretrained` writes it: `config.json`, weights, tokenizer files (an OPUS-MT, NLLB-200, M2M100
  or mBART-50 folder, or one fine-tuned here with all weights);
- an adapter, as the fine-tune writes it: PEFT's `adapter_config.json` and weights beside `base.json`, the note
  that names the base model's folder (the adapter is applied to it at load);
- a fine-tune's folder: its `checkpoint_best/` (or `checkpoint_selected/`), one of the above.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from repair.errors import UserError
from repair.fileio import read_json

log = logging.getLogger(__name__)

BASE_NOTE = "base.json"  # beside an adapter: {"base": the base model's folder, "adapter": "lora"}
KEPT = ("checkpoint_selected", "checkpoint_best")  # a fine-tune folder's model, in this order
# Target languages by tokenizer: the forced first token's name (NLLB), language code (M2M100), mBART-50's code.
DEFAULT_TGT = {"NllbTokenizer": "zho_Hans", "NllbTokenizerFast": "zho_Hans", "M2M100Tokenizer": "zh",
               "MBart50Tokenizer": "zh_CN", "MBart50TokenizerFast": "zh_CN"}
DEFAULT_SRC = {"NllbTokenizer": "eng_Latn", "NllbTokenizerFast": "eng_Latn", "M2M100Tokenizer": "en",
               "MBart50Tokenizer": "en_XX", "MBart50TokenizerFast": "en_XX"}


def offline() -> None:
    """Nothing is fetched from the hub, whatever a folder's files say."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@dataclass(frozen=True)
class Folder:
    """A resolved folder: `path` (the model or adapter folder), `base` (the model folder whose config, weights
    and tokenizer load), and `adapter` (the adapter folder, or None)."""

    path: Path
    base: Path
    adapter: Path | None = None


def resolve(path: str | os.PathLike, key: str = "translator.checkpoint") -> Folder:
    """The folder `path` names, checked (one UserError naming `key` where it is not a transformers folder)."""
    given = Path(path)
    if not given.is_dir():
        raise UserError(f"{key}={path}: no such folder. A transformers model is a local folder as save_pretrained "
                        f"writes it (config.json, weights, tokenizer files); names on the Hugging Face hub are not "
                        f"fetched: download the model on a connected machine and give its folder")
    if not (given / "config.json").is_file() and not (given / "adapter_config.json").is_file():
        inner = next((given / k for k in KEPT if (given / k).is_dir()), None)
        if inner is None:
            raise UserError(f"{key}={path}: neither a transformers model folder (config.json) nor an adapter "
                            f"(adapter_config.json and {BASE_NOTE}) nor a fine-tune's folder ({' or '.join(KEPT)})")
        given = inner
    if (given / "config.json").is_file():
        return Folder(given.resolve(), given.resolve())
    note = given / BASE_NOTE
    if not note.is_file():
        raise UserError(f"{given}: an adapter without {BASE_NOTE}, the note of the base model it applies to")
    base = Path(read_json(note)["base"])
    base = base if base.is_absolute() else (given / base)
    if not (base / "config.json").is_file():
        raise UserError(f"{note}: the base model {base} is missing (no config.json there); put it back, or write "
                        f"its new folder as \"base\" in {note}")
    return Folder(given.resolve(), base.resolve(), given.resolve())


def is_model_folder(path: str | os.PathLike) -> bool:
    """Whether a path is a transformers model, adapter or fine-tune folder (not a fairseq checkpoint)."""
    p = Path(path)
    if not p.is_dir():
        return False
    return any((q / "config.json").is_file() or (q / "adapter_config.json").is_file()
               for q in (p, *(p / k for k in KEPT)))


def load_tokenizer(folder: Folder, tgt_lang: str | None = None):
    """The folder's tokenizer, with its source language set where it has one; and the forced first target token
    (None for a model that needs none, as a Marian model)."""
    offline()
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(folder.base), local_files_only=True)
    except (OSError, ValueError) as e:
        raise UserError(f"{folder.base}: its tokenizer does not load ({str(e).splitlines()[0][:200]}); a "
                        f"transformers folder needs its tokenizer files beside config.json") from None
    kind = type(tok).__name__
    if hasattr(tok, "src_lang") and kind in DEFAULT_SRC:
        tok.src_lang = DEFAULT_SRC[kind]
    lang = tgt_lang or DEFAULT_TGT.get(kind)
    if lang is None:
        if tgt_lang:
            raise UserError(f"translator.tgt_lang={tgt_lang}: {folder.base}'s tokenizer ({kind}) has no target "
                            f"language token (a Marian model: give translator.source_prefix, e.g. '>>cmn_Hans<<')")
        return tok, None
    forced = tok.get_lang_id(lang) if hasattr(tok, "get_lang_id") else tok.convert_tokens_to_ids(lang)
    if forced is None or forced == tok.unk_token_id:
        raise UserError(f"translator.tgt_lang={lang}: not a language token of {folder.base}'s tokenizer ({kind})")
    return tok, int(forced)


def load_model(folder: Folder, device: str = "cpu", fp16: bool = False):
    """The model (with its adapter, where the folder is one), in eval mode on `device`."""
    offline()
    from transformers import AutoModelForSeq2SeqLM

    try:
        model = AutoModelForSeq2SeqLM.from_pretrained(str(folder.base), local_files_only=True)
    except (OSError, ValueError) as e:
        raise UserError(f"{folder.base}: not a sequence-to-sequence translation model that transformers loads "
                        f"({str(e).splitlines()[0][:200]})") from None
    if folder.adapter is not None:
        model = add_adapter(model, folder.adapter)
    return prepared(model, device, fp16)


def add_adapter(model, adapter: str | os.PathLike, name: str = "default"):
    """`model` with the adapter folder's weights added under `name` (PEFT, for inference): a base model wrapped,
    or a PEFT model given one adapter more."""
    from peft import PeftModel

    if isinstance(model, PeftModel):
        model.load_adapter(str(adapter), adapter_name=name, is_trainable=False)
        return model
    return PeftModel.from_pretrained(model, str(adapter), adapter_name=name, is_trainable=False)


def prepared(model, device: str, fp16: bool):
    """The model in eval mode, halved where asked, on `device`."""
    model.eval()
    if fp16:
        model.half()
    return model.to(device)


def model_files(folder: Folder):
    """The record the loop keeps of a model (repair.nmt.preprocessing.ModelFiles): the folder as its checkpoint,
    the tokenizer's folder as each side's files."""
    from repair.nmt.preprocessing import ModelFiles, Side

    tok = str(folder.base)
    return ModelFiles(str(folder.path), Side("en", tok, "transformers"), Side("zh", tok, "transformers"))


def folder_sha256(path: str | os.PathLike) -> str:
    """One SHA-256 over a folder's files (names and bytes, in name order)."""
    import hashlib

    h = hashlib.sha256()
    root = Path(path)
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        h.update(str(p.relative_to(root)).encode())
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def transformers_folder(path) -> bool:
    """Whether a model path is a Hugging Face transformers folder (config.json; an adapter's adapter_config.json;
    a fine-tune's checkpoint_best/ holding either) rather than a fairseq checkpoint or model folder."""
    p = Path(path)
    return p.is_dir() and any((q / name).is_file() for q in (p, p / "checkpoint_best", p / "checkpoint_selected")
                              for name in ("config.json", "adapter_config.json"))
