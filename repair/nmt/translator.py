"""In-process batched beam search with a fairseq checkpoint: the `fairseq` Purity translator."""

from __future__ import annotations

import logging
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Mapping, Sequence

from repair.data.prepare import clean_text, load_dictionary, load_spm, spm_paths
from repair.errors import UserError
from repair.nmt.checkpoint import load_checkpoint
from repair.purity.translators import Translator

logger = logging.getLogger(__name__)

_CJK = "\u2e80-\u9fff\u3000-\u303f\uf900-\ufaff\uff00-\uffef"
# SentencePiece's word boundaries leave spaces between Chinese characters: Chinese has none.
_CJK_SPACE = re.compile(f"(?<=[{_CJK}]) +(?=[{_CJK}])")


def detokenize_zh(text: str) -> str:
    return _CJK_SPACE.sub("", text).strip()


class FairseqTranslator(Translator):
    """Translates English to Chinese with a fairseq transformer checkpoint.

    Texts are cleaned like the training data, encoded with the source SentencePiece model,
    grouped into length buckets, batched up to `max_tokens` source tokens, decoded with beam
    search, and turned back into text with the target SentencePiece model. Every text is padded
    to its bucket's fixed width, alone or in a batch, so its encoding and its output cap
    (max_len_a * width + max_len_b, at most max_len) are its own: a translation does not
    depend on the batch it lands in.

    On CPU, `threads` cores are shared out as `workers` batches decoded at once, each with
    threads // workers torch threads: beam search spends much of each step in Python, and a
    second batch computes while the first is between operations (on 2 cores, two batches with one
    thread each ran 1.3-1.6x faster than one batch with two threads). On GPU one batch runs at a time.
    """

    name = "fairseq"

    def __init__(
        self,
        checkpoint: str | os.PathLike,
        data_dir: str | os.PathLike | None = None,
        *,
        src_spm: str | os.PathLike | None = None,
        tgt_spm: str | os.PathLike | None = None,
        src_dict: str | os.PathLike | None = None,
        tgt_dict: str | os.PathLike | None = None,
        beam: int = 5,
        max_tokens: int = 4000,
        max_sentences: int = 128,
        max_len: int = 200,
        max_len_a: float = 1.2,
        max_len_b: int = 10,
        len_penalty: float = 1.0,
        device: str = "auto",
        fp16: bool | str = "auto",
        threads: int | None = None,
        workers: int | None = None,
    ):
        import torch

        if data_dir is None and None in (src_spm, tgt_spm, src_dict, tgt_dict):
            raise UserError("the fairseq translator needs data_dir (with spm/ and bin/) or all of src_spm, tgt_spm, src_dict, tgt_dict")
        if data_dir is not None:
            spms = spm_paths(data_dir)
            src_spm, tgt_spm = src_spm or spms["en"], tgt_spm or spms["zh"]
            src_dict = src_dict or Path(data_dir) / "bin" / "dict.en.txt"
            tgt_dict = tgt_dict or Path(data_dir) / "bin" / "dict.zh.txt"
        if beam < 1 or max_tokens < 1:
            raise UserError(f"translator: beam ({beam}) and max_tokens ({max_tokens}) must be positive")
        self.checkpoint = Path(checkpoint)
        self.beam, self.max_tokens, self.max_sentences, self.max_len = int(beam), int(max_tokens), int(max_sentences), int(max_len)
        self.sp_src, self.sp_tgt = load_spm(src_spm), load_spm(tgt_spm)
        self.src_dict, self.tgt_dict = load_dictionary(src_dict), load_dictionary(tgt_dict)

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise UserError(f"translator device={device}, but torch sees no CUDA device")
        self.device = torch.device(device)
        self.fp16 = self.device.type == "cuda" and fp16 in (True, "auto", "true")
        if workers is not None and int(workers) < 1:
            raise UserError(f"translator: workers ({workers}) must be at least 1")
        if self.device.type == "cpu":
            cores = int(threads) if threads else torch.get_num_threads()
            self.workers = int(workers) if workers else min(2, cores)
            self.threads = max(1, cores // self.workers)
        else:
            self.workers, self.threads = 1, None

        self.model = self._load_model()
        from fairseq.sequence_generator import SequenceGenerator

        def generator():
            return SequenceGenerator(
                [self.model], self.tgt_dict, beam_size=self.beam, max_len_a=float(max_len_a), max_len_b=int(max_len_b),
                max_len=self.max_len + 1, len_penalty=len_penalty,
            )

        self.generator = generator()  # the calling thread's; each worker has its own (beam search keeps state)
        self._generators = [generator() for _ in range(self.workers - 1)]
        self._pool = None
        self._truncated = 0
        self.max_source_positions = int(self.model.max_positions()[0])

    # ------------------------------------------------------------------ loading

    def _load_model(self):
        from fairseq import checkpoint_utils
        from fairseq.dataclass.utils import merge_with_parent
        from fairseq.tasks.translation import TranslationConfig, TranslationTask
        from omegaconf import OmegaConf, open_dict

        state = load_checkpoint(self.checkpoint)
        if state.get("cfg") is not None:
            state["cfg"] = OmegaConf.create(state["cfg"], flags={"allow_objects": True})
        state = checkpoint_utils._upgrade_state_dict(state)
        cfg = state["cfg"]
        task_name = getattr(cfg.task, "_name", None) or getattr(cfg.task, "task", None)
        if task_name != "translation":
            raise UserError(f"{self.checkpoint}: a fairseq '{task_name}' checkpoint; a translation model is needed")
        with open_dict(cfg):
            cfg.task.data = str(self.checkpoint.parent)
        task_cfg = merge_with_parent(TranslationConfig(), cfg.task, remove_missing=True)
        task = TranslationTask(task_cfg, self.src_dict, self.tgt_dict)
        model = task.build_model(cfg.model, from_checkpoint=True)
        try:
            model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
        except RuntimeError as e:
            raise UserError(
                f"{self.checkpoint} does not fit the dictionaries given ({len(self.src_dict)} source / "
                f"{len(self.tgt_dict)} target entries): use the dict.en.txt/dict.zh.txt it was trained with "
                f"({str(e).splitlines()[0][:200]})"
            ) from None
        model.eval()
        if self.fp16:
            model.half()
        return model.to(self.device)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "FairseqTranslator":
        """From conf/translator/fairseq.yaml (name, checkpoint, data_dir, beam, max_tokens, ...)."""
        try:
            from omegaconf import OmegaConf

            if OmegaConf.is_config(cfg):
                cfg = OmegaConf.to_container(cfg, resolve=True)  # type: ignore[assignment]
        except ImportError:  # pragma: no cover
            pass
        options = {k: v for k, v in dict(cfg).items() if k != "name"}
        if not options.get("checkpoint"):
            raise UserError("translator=fairseq needs translator.checkpoint=PATH (a fairseq checkpoint file)")
        known = {"checkpoint", "data_dir", "src_spm", "tgt_spm", "src_dict", "tgt_dict", "beam", "max_tokens",
                 "max_sentences", "max_len", "max_len_a", "max_len_b", "len_penalty", "device", "fp16", "threads",
                 "workers"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise UserError(f"translator config: unknown key(s) {unknown}; known: {sorted(known)}")
        return cls(**options)

    # ------------------------------------------------------------------ translating

    def encode(self, text: str):
        """Source token ids (with EOS) of one text, cut to the model's maximum positions."""
        return self.encode_all([text])[0]

    def encode_all(self, texts: Sequence[str], *, cleaned: bool = False) -> list:
        """Source token ids of each text: one SentencePiece call for all of them (a call per text
        costs ~0.2 ms, more than the encoding itself)."""
        import torch

        indices, unk, eos = self.src_dict.indices, self.src_dict.unk(), self.src_dict.eos()
        out = []
        for pieces in self.sp_src.encode(list(texts) if cleaned else [clean_text(t) for t in texts], out_type=str):
            ids = [indices.get(p, unk) for p in pieces]
            if len(ids) >= self.max_source_positions:
                ids = ids[: self.max_source_positions - 1]
                self._truncated += 1
            out.append(torch.tensor(ids + [eos], dtype=torch.long))
        return out

    def bucket(self, length: int) -> int:
        """The padded width of a source of `length` tokens: the next multiple of 8 (of 32 above 64)."""
        step = 8 if length <= 64 else 32
        return min(self.max_source_positions, -(-length // step) * step)

    def _batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Indices grouped by bucket, each group cut to max_tokens / max_sentences."""
        by_width: dict[int, list[int]] = {}
        for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
            by_width.setdefault(self.bucket(lengths[i]), []).append(i)
        size = lambda width: max(1, min(self.max_sentences, self.max_tokens // width))  # noqa: E731
        return [group[k:k + size(w)] for w, group in sorted(by_width.items()) for k in range(0, len(group), size(w))]

    def translate(self, texts: list[str]) -> list[str]:
        import torch
        from fairseq.data import data_utils

        if isinstance(texts, str):
            raise TypeError("translate() takes a list of texts")
        out = [""] * len(texts)
        self._truncated = 0
        cleaned = [clean_text(t or "") for t in texts]
        todo = [i for i, t in enumerate(cleaned) if t]
        encoded = dict(zip(todo, self.encode_all([cleaned[i] for i in todo], cleaned=True)))
        if self._truncated:
            logger.warning("%d text(s) longer than the model's %d source positions were truncated",
                           self._truncated, self.max_source_positions)
        pad, eos = self.src_dict.pad(), self.src_dict.eos()
        symbols = self.tgt_dict.symbols
        ignore = {self.tgt_dict.unk(), self.tgt_dict.pad(), self.tgt_dict.bos(), self.tgt_dict.eos()}

        def run(batch: list[int], generator) -> None:
            idx = [todo[b] for b in batch]
            tokens = [encoded[i] for i in idx]
            sample = {
                "net_input": {
                    "src_tokens": data_utils.collate_tokens(
                        tokens, pad, eos, left_pad=True, pad_to_length=self.bucket(max(len(t) for t in tokens))
                    ).to(self.device),
                    "src_lengths": torch.tensor([len(t) for t in tokens], device=self.device),
                }
            }
            with torch.inference_mode():
                hypos = generator.generate([self.model], sample)
            for i, hyps in zip(idx, hypos):
                pieces = [symbols[t] for t in hyps[0]["tokens"].tolist() if t not in ignore]
                out[i] = detokenize_zh(self.sp_tgt.decode(pieces))

        if self.threads and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)  # training in the same process may have set another count
        batches = self._batches([len(encoded[i]) for i in todo])
        if self.workers == 1 or len(batches) < 2:
            for batch in batches:
                run(batch, self.generator)
            return out
        # Largest batches first, each taken by whichever worker is free: the calling thread and
        # workers - 1 pool threads, each with its own generator.
        batches.sort(key=lambda b: -len(b) * self.bucket(max(len(encoded[todo[i]]) for i in b)))
        queue = iter(batches)
        lock, stop = threading.Lock(), threading.Event()

        def drain(generator) -> None:
            try:
                while not stop.is_set():
                    with lock:
                        batch = next(queue, None)
                    if batch is None:
                        return
                    run(batch, generator)
            except BaseException:
                stop.set()  # the others finish the batch they hold and take no more
                raise

        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers - 1, thread_name_prefix="translate")
        futures = [self._pool.submit(drain, g) for g in self._generators]
        try:
            drain(self.generator)  # Ctrl-C lands here, in the calling thread
        finally:
            for f in futures:
                f.result()
        return out
