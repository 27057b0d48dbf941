"""In-process batched beam search with a Hugging Face `transformers` model folder: the `transformers` translator.

A translation is the model's own `generate(num_beams=beam, max_new_tokens=max_len)` decoded by its tokenizer
(without the forced language token, for NLLB and M2M100): tests/test_hf.py checks it on Tatoeba sentences.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any, Sequence

from repair.data.prepare import clean_text
from repair.errors import UserError
from repair.face import Translator
from repair.nmt.device import torch_device, use_fp16
from repair.nmt.hf.folder import (Folder, add_adapter, load_model, load_tokenizer, model_files, prepared, resolve,
                                  transformers_folder)
from repair.nmt.preprocessing import OPTION_KEYS

logger = logging.getLogger(__name__)

# keys of translator=fairseq / ctranslate2 that a transformers folder has no use for (its tokenizer is its own):
# accepted where unset, so that the loop's translator group serves either kind of model
UNUSED = (*OPTION_KEYS, "data_dir", "workers", "model_dir")


def refuse_set(options: dict, name: str) -> None:
    """A key of fairseq's preprocessing given for a transformers folder is one UserError."""
    given = sorted(k for k, v in options.items() if v not in (None, ""))
    if given:
        raise UserError(f"translator.{given[0]}={options[given[0]]!r}: a transformers folder brings its own "
                        f"tokenizer; the {name} translator does not take {', '.join(given)}")


class TransformersTranslator(Translator):
    """Translates English to Chinese with a transformers sequence-to-sequence model folder (MarianMT, NLLB-200,
    M2M100, mBART-50, or an adapter the fine-tune wrote over one of them).

    Texts are cleaned as the training data is, `source_prefix` put before each (a multi-target OPUS-MT model's
    `>>cmn_Hans<<`), encoded by the folder's tokenizer, sorted by length and batched up to `max_tokens` padded
    source tokens (and `max_sentences`), decoded with beam search (`beam`, at most `max_len` new target tokens),
    with the target language's token forced first where the model needs one (`tgt_lang`; default Simplified
    Chinese: NLLB's zho_Hans, M2M100's zh, mBART-50's zh_CN). `threads`: torch's CPU threads; fp16 on GPU only.
    """

    name = "transformers"
    extra_options = UNUSED

    def __init__(self, checkpoint: str | os.PathLike | None = None, *, files=None, beam: int = 5,
                 max_len: int = 200, max_tokens: int = 4000, max_sentences: int = 128, device: str = "auto",
                 fp16: bool | str = "auto", threads: int | None = None, tgt_lang: str | None = None,
                 source_prefix: str | None = None, **unused: Any):
        import torch

        refuse_set({k: v for k, v in unused.items() if k in OPTION_KEYS or k == "model_dir"}, self.name)
        path = checkpoint if checkpoint is not None else (files.checkpoint if files is not None else None)
        if path is None:
            raise UserError("translator=transformers needs translator.checkpoint=FOLDER (a transformers model folder)")
        if beam < 1 or max_tokens < 1 or max_len < 1:
            raise UserError(f"translator: beam ({beam}), max_tokens ({max_tokens}) and max_len ({max_len}) must be "
                            f"positive")
        self.folder: Folder = resolve(path)
        self.beam, self.max_len, self.max_tokens, self.max_sentences = int(beam), int(max_len), int(max_tokens), \
            int(max_sentences)
        self.device = torch.device(torch_device(device, "translator.device"))
        self.fp16 = use_fp16(fp16, self.device.type == "cuda")
        self.threads = int(threads) if threads and self.device.type == "cpu" else None
        self.source_prefix = (source_prefix.strip() + " ") if source_prefix else ""
        self.tokenizer, self.forced_bos = load_tokenizer(self.folder, tgt_lang)
        self.model = load_model(self.folder, str(self.device), self.fp16)
        self.files = model_files(self.folder)
        self.checkpoint = self.files.checkpoint
        self.adapter_on = True
        # the PEFT model whose adapters this model's layers hold (its own, or ones added by with_adapter), and the
        # name of this translator's adapter among them (None: the base model, adapters off)
        self._peft = self.model if self.folder.adapter is not None else None
        self._adapter_name = "default" if self.folder.adapter is not None else None
        self.max_source = int(getattr(self.tokenizer, "model_max_length", 512) or 512)
        positions = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        self.max_source = min(self.max_source, positions or self.max_source)
        if positions and self.max_len > positions - 1:  # the decoder cannot go further: generate would fail there
            logger.info("translator.max_len=%s is more than %s's %s target positions allow: %s", self.max_len,
                        self.folder.base, positions, positions - 1)
            self.max_len = positions - 1

    def describe(self) -> dict:
        return {"name": self.name, "runtime": "transformers", "folder": str(self.folder.path),
                "base": str(self.folder.base),
                "adapter": str(self.folder.adapter) if self.folder.adapter else None, "beam": self.beam,
                "max_len": self.max_len, "forced_bos_token_id": self.forced_bos,
                "source_prefix": self.source_prefix.strip() or None}

    # ------------------------------------------------------------------ suggestions

    def check_model(self, sentences: Sequence[str], valid_pairs: Sequence[tuple[str, str]] = (),
                    data_dir: str | os.PathLike | None = None) -> dict:
        """The folder's tokenizer and translations checked on a sample of `sentences` (repair.nmt.hf.check)."""
        from repair.nmt.hf.check import check_transformers_model

        return check_transformers_model(self.tokenizer, self.translate, sentences, self.source_prefix)

    def why_no_search(self) -> str | None:
        return None

    def searcher(self, beam: int, adapter: bool = True):
        """The project's own constrained search on this model's decoder step (repair.nmt.hf.search): transformers
        5 has no constrained search that runs offline."""
        from repair.nmt.hf.search import Searcher

        return Searcher(self, beam, adapter), ""

    # ------------------------------------------------------------------ the model, with or without its edit

    def without_edit(self, checkpoint: str | os.PathLike) -> "Translator | None":
        """This model with its adapter switched off, where `checkpoint` is the model the adapter applies to (one
        model in memory serves a scoped edit: the adapter on inside the scope, off outside); None otherwise."""
        from pathlib import Path

        if self.folder.adapter is None or Path(checkpoint).resolve() != self.folder.base:
            return None
        return _BaseView(self)

    def with_adapter(self, path: str | os.PathLike) -> "TransformersTranslator | None":
        """The translator of the adapter folder `path` when it applies to this translator's model (a base model,
        no adapter of its own): the adapter added to this model's layers (PEFT, under a name of its own), so that
        the base weights are in memory once for the base model and all its adapters; this translator then runs
        with every adapter off, the new one with its own on. None where `path` is no adapter of this model."""
        import copy
        from pathlib import Path

        if self.folder.adapter is not None or not transformers_folder(path):
            return None
        folder = resolve(path)
        if folder.adapter is None or folder.base != self.folder.base:
            return None
        name = f"adapter{len(self._peft.peft_config) if self._peft is not None else 0}"
        onto = self._peft if self._peft is not None else self.model
        self._peft = prepared(add_adapter(onto, folder.adapter, name), self.device, self.fp16)
        twin = copy.copy(self)
        twin.folder, twin.model, twin._adapter_name = folder, self._peft, name
        twin.files = model_files(folder)
        twin.checkpoint = twin.files.checkpoint
        logger.info("adapter %s on the base model already loaded from %s (one copy of its weights)",
                    Path(folder.adapter).name, self.folder.base)
        return twin

    @contextlib.contextmanager
    def edit(self, on: bool):
        """This translator's adapter on (`on`) or every adapter off for what runs inside (nothing to switch for a
        model without one)."""
        if self._peft is None:
            yield
            return
        if on and self._adapter_name is not None:
            if self._peft.active_adapter != self._adapter_name:
                self._peft.set_adapter(self._adapter_name)
            yield
            return
        with self._peft.disable_adapter():
            yield

    @contextlib.contextmanager
    def threads_set(self):
        import torch

        before = torch.get_num_threads()
        if self.threads and before != self.threads:
            torch.set_num_threads(self.threads)
        try:
            yield
        finally:
            if torch.get_num_threads() != before:
                torch.set_num_threads(before)

    # ------------------------------------------------------------------ translating

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Source token ids of each (cleaned) text, with the source prefix, cut to the model's source positions."""
        ids = self.tokenizer([self.source_prefix + t for t in texts], truncation=True,
                             max_length=self.max_source)["input_ids"]
        return [list(x) for x in ids]

    def batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Indices sorted by length, grouped so that a batch holds at most max_tokens padded tokens."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        out: list[list[int]] = []
        for i in order:
            if out and len(out[-1]) < self.max_sentences and (len(out[-1]) + 1) * lengths[i] <= self.max_tokens:
                out[-1].append(i)
            else:
                out.append([i])
        return out

    def generate_kwargs(self) -> dict:
        kw = {"num_beams": self.beam, "max_new_tokens": self.max_len, "do_sample": False}
        if self.forced_bos is not None:
            kw["forced_bos_token_id"] = self.forced_bos
        return kw

    def decode(self, row) -> str:
        """Generated ids as text: after the decoder's start (and the forced language token), special tokens out."""
        ids = row.tolist()[1:]
        if self.forced_bos is not None and ids and ids[0] == self.forced_bos:
            ids = ids[1:]
        return self.tokenizer.decode(ids, skip_special_tokens=True).strip()

    def translate(self, texts: list[str], adapter: bool = True) -> list[str]:
        import torch

        if isinstance(texts, str):
            raise TypeError("translate() takes a list of texts")
        out = [""] * len(texts)
        cleaned = [clean_text(t or "") for t in texts]
        todo = [i for i, t in enumerate(cleaned) if t]
        if not todo:
            return out
        encoded = self.encode([cleaned[i] for i in todo])
        pad = self.tokenizer.pad_token_id
        with self.threads_set(), self.edit(adapter), torch.inference_mode():
            for batch in self.batches([len(e) for e in encoded]):
                rows = [encoded[b] for b in batch]
                width = max(map(len, rows))
                ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=self.device)
                mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=self.device)
                generated = self.model.generate(input_ids=ids, attention_mask=mask, **self.generate_kwargs())
                for b, row in zip(batch, generated):
                    out[todo[b]] = self.decode(row)
        return out


class _BaseView(Translator):
    """A transformers translator's model with its adapter off: the base model, without a second copy of it."""

    name = "transformers"

    def __init__(self, owner: TransformersTranslator):
        self.owner = owner
        self.files = owner.files.with_checkpoint(str(owner.folder.base))
        self.checkpoint = self.files.checkpoint

    def translate(self, texts: list[str]) -> list[str]:
        return self.owner.translate(texts, adapter=False)

    def why_no_search(self) -> str | None:
        return None

    def searcher(self, beam: int):
        return self.owner.searcher(beam, adapter=False)

    def describe(self) -> dict:
        return {**self.owner.describe(), "adapter": "off", "folder": str(self.owner.folder.base)}
