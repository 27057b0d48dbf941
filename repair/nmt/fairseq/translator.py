"""In-process batched beam search with a fairseq checkpoint: the `fairseq` Purity translator."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from repair.data.prepare import clean_text, load_dictionary
from repair.errors import UserError
from repair.face import Translator
from repair.nmt.fairseq.checkpoint import checkpoint_cfg, load_checkpoint
from repair.nmt.device import torch_device, use_fp16
from repair.nmt.preprocessing import OPTION_KEYS, Codec, ModelFiles, given_preprocessing
from repair.nmt.fairseq.model_files import resolve_model_files

logger = logging.getLogger(__name__)


class FairseqTranslator(Translator):
    """Translates English to Chinese with a fairseq transformer checkpoint.

    `checkpoint` is a checkpoint file or a model folder (fairseq's published layout: model.pt,
    dict.<lang>.txt, bpecodes or sentencepiece.bpe.model, optional preprocessing.yaml); the
    model's preprocessing is found as `repair.nmt.preprocessing` says, or given by `files` or
    the preprocessing options (tokenizer, bpe, bpe_codes, sentencepiece_model, per side with
    src_/tgt_, src_dict, tgt_dict). Texts are cleaned like the training data, encoded with the
    model's own tokenizer and subword model (fairseq's encoders), grouped into length buckets,
    batched up to `max_tokens` source tokens, decoded with beam search, and turned back into
    text as fairseq-interactive does (subwords joined, detokenized), with no spaces between
    Chinese characters. Every text is padded to its bucket's fixed width, alone or in a batch,
    so its encoding and its output cap (max_len_a * width + max_len_b, at most max_len) are its
    own: a translation does not depend on the batch it lands in.

    On CPU, `threads` cores are shared out as `workers` batches decoded at once, each with
    threads // workers torch threads: beam search spends much of each step in Python, and a
    second batch computes while the first is between operations (on 2 cores, two batches with one
    thread each ran 1.3-1.6x faster than one batch with two threads). On GPU one batch runs at a time.
    """

    name = "fairseq"
    extra_options = OPTION_KEYS

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        data_dir: str | os.PathLike | None = None,
        *,
        files: ModelFiles | None = None,
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
        **preprocessing: Any,
    ):
        import torch

        from repair import startup

        startup.import_with("fairseq", startup.fairseq_metrics())  # without the metrics it never calls (repair.startup)
        if checkpoint is None and files is None:
            raise UserError("translator=fairseq needs translator.checkpoint=PATH (a fairseq checkpoint file or model folder)")
        if beam < 1 or max_tokens < 1:
            raise UserError(f"translator: beam ({beam}) and max_tokens ({max_tokens}) must be positive")
        self.beam, self.max_tokens, self.max_sentences, self.max_len = int(beam), int(max_tokens), int(max_sentences), int(max_len)
        preprocessing = given_preprocessing(files, preprocessing)
        if files is None:
            from repair.nmt.fairseq.model_files import checkpoint_path

            state = load_checkpoint(checkpoint_path(checkpoint))
            files = resolve_model_files(checkpoint, data_dir, checkpoint_cfg(state), **preprocessing)
        else:
            state = load_checkpoint(files.checkpoint)
        self.files = files
        self.checkpoint = files.checkpoint
        self.src_dict, self.tgt_dict = load_dictionary(files.src.dict), load_dictionary(files.tgt.dict)
        self.src_codec, self.tgt_codec = Codec(files.src), Codec(files.tgt, fit=frozenset(self.tgt_dict.symbols))

        self.device = torch.device(torch_device(device, "translator.device"))
        self.fp16 = use_fp16(fp16, self.device.type == "cuda")
        if workers is not None and int(workers) < 1:
            raise UserError(f"translator: workers ({workers}) must be at least 1")
        if self.device.type == "cpu":
            cores = int(threads) if threads else torch.get_num_threads()
            self.workers = int(workers) if workers else min(2, cores)
            self.threads = max(1, cores // self.workers)
        else:
            self.workers, self.threads = 1, None

        self.model = self._load_model(state)
        del state
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

    def check_model(self, sentences: Sequence[str], valid_pairs: Sequence[tuple[str, str]] = (),
                    data_dir: str | os.PathLike | None = None) -> dict:
        """The model and its preprocessing checked on a sample of `sentences` and `valid_pairs` (repair.nmt.fairseq.modelcheck)."""
        from repair.nmt.fairseq.modelcheck import check_fairseq_model

        return check_fairseq_model(self.files, self.translate, sentences, valid_pairs, data_dir=data_dir)

    # ------------------------------------------------------------------ suggestions

    def why_no_search(self) -> str | None:
        return None

    def searcher(self, beam: int) -> tuple["FairseqTranslator", str]:
        return self, ""

    def translate_constrained(self, sources: list[str], constraints: list[list[str]], **options: Any) -> list:
        """n-best hypotheses per source, each containing its constraints (repair.nmt.fairseq.constrained)."""
        from repair.nmt.fairseq.constrained import translate_constrained

        return translate_constrained(self, sources, constraints, **options)

    def phrase_tokens(self, phrase: str, start: bool = False) -> int:
        """Target tokens of a phrase as the constrained search spells it (inside a sentence, or at its `start`)."""
        from repair.nmt.fairseq.constrained import encode_phrase

        ids = encode_phrase(self, phrase, start=start)
        return len(ids) if ids is not None else len(self.tgt_codec.encode_all([phrase])[0].split())

    def score(self, sources: list[str], targets: list[str]) -> list[float]:
        """The model's score of each target as its source's translation (repair.nmt.fairseq.constrained)."""
        from repair.nmt.fairseq.constrained import score_translations

        return score_translations(self, sources, targets)

    # ------------------------------------------------------------------ loading

    def _load_model(self, state: dict):
        from fairseq import checkpoint_utils
        from fairseq.dataclass.utils import merge_with_parent
        from fairseq.tasks.translation import TranslationConfig, TranslationTask
        from omegaconf import open_dict

        if state.get("cfg") is not None:
            state["cfg"] = checkpoint_cfg(state)
        state = checkpoint_utils._upgrade_state_dict(state)
        cfg = state["cfg"]
        task_name = getattr(cfg.task, "_name", None) or getattr(cfg.task, "task", None)
        if task_name != "translation":
            raise UserError(f"{self.checkpoint}: a fairseq '{task_name}' checkpoint; a translation model is needed")
        check_dictionaries(self.checkpoint, state["model"], self.files, len(self.src_dict), len(self.tgt_dict))
        with open_dict(cfg):
            cfg.task.data = str(os.path.dirname(self.checkpoint))
            cfg.task.source_lang, cfg.task.target_lang = self.files.src.lang, self.files.tgt.lang
        task_cfg = merge_with_parent(TranslationConfig(), cfg.task, remove_missing=True)
        task = TranslationTask(task_cfg, self.src_dict, self.tgt_dict)
        model = task.build_model(cfg.model, from_checkpoint=True)
        try:
            model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
        except RuntimeError as e:
            raise UserError(
                f"{self.checkpoint} does not fit the dictionaries given ({len(self.src_dict)} source / "
                f"{len(self.tgt_dict)} target entries): use the dict files it was trained with "
                f"({str(e).splitlines()[0][:200]})"
            ) from None
        model.eval()
        if self.fp16:
            model.half()
        return model.to(self.device)

    # ------------------------------------------------------------------ translating

    def encode_all(self, texts: Sequence[str], *, cleaned: bool = False) -> list:
        """Source token ids of each text, with the model's own tokenizer and subword model, cut to
        the model's maximum positions."""
        import torch

        indices, unk, eos = self.src_dict.indices, self.src_dict.unk(), self.src_dict.eos()
        out = []
        for line in self.src_codec.encode_all(list(texts) if cleaned else [clean_text(t) for t in texts]):
            ids = [indices.get(p, unk) for p in line.split()]
            if len(ids) >= self.max_source_positions:
                ids = ids[: self.max_source_positions - 1]
                self._truncated += 1
            out.append(torch.tensor(ids + [eos], dtype=torch.long))
        return out

    def bucket(self, length: int) -> int:
        return bucket_width(length, self.max_source_positions)

    def source_input(self, tokens: Sequence) -> dict:
        """A batch's encoded sources as the model takes them: left-padded to their bucket's width (so that a
        translation never depends on its batch), with their lengths."""
        import torch
        from fairseq.data import data_utils

        return {"src_tokens": data_utils.collate_tokens(tokens, self.src_dict.pad(), self.src_dict.eos(), left_pad=True,
                                                        pad_to_length=self.bucket(max(len(t) for t in tokens))
                                                        ).to(self.device),
                "src_lengths": torch.tensor([len(t) for t in tokens], device=self.device)}

    def use_threads(self) -> None:
        """torch's thread count set to this translator's (training in the same process may have set another)."""
        import torch

        if self.threads and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)

    @contextlib.contextmanager
    def all_threads(self):
        """torch's thread count set to every core this translator's workers share, for one batch at a time (a
        teacher-forced pass, a few dozen searches in one batch), then back to what it was."""
        import torch

        before = torch.get_num_threads()
        torch.set_num_threads((self.threads or before) * max(1, self.workers))
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def _batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Indices grouped by bucket, each group cut to max_tokens / max_sentences."""
        by_width: dict[int, list[int]] = {}
        for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
            by_width.setdefault(self.bucket(lengths[i]), []).append(i)
        size = lambda width: max(1, min(self.max_sentences, self.max_tokens // width))  # noqa: E731
        return [group[k:k + size(w)] for w, group in sorted(by_width.items()) for k in range(0, len(group), size(w))]

    def translate(self, texts: list[str]) -> list[str]:
        import torch

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
        symbols = self.tgt_dict.symbols
        ignore = {self.tgt_dict.unk(), self.tgt_dict.pad(), self.tgt_dict.bos(), self.tgt_dict.eos()}

        def run(batch: list[int], generator) -> None:
            idx = [todo[b] for b in batch]
            tokens = [encoded[i] for i in idx]
            with torch.inference_mode():
                hypos = generator.generate([self.model], {"net_input": self.source_input(tokens)})
            for i, hyps in zip(idx, hypos):
                tokens = " ".join(symbols[t] for t in hyps[0]["tokens"].tolist() if t not in ignore)
                out[i] = self.tgt_codec.decode(tokens)

        self.use_threads()
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


def bucket_width(length: int, max_positions: int) -> int:
    """The padded width of a source of `length` tokens: the next multiple of 8 (of 32 above 64),
    at most the model's source positions. Its output cap follows from it (max_len_a * width + max_len_b)."""
    step = 8 if length <= 64 else 32
    return min(max_positions, -(-length // step) * step)


def load_model_files(checkpoint: str | os.PathLike, data_dir: str | os.PathLike | None = None, **options: Any) -> ModelFiles:
    """A checkpoint (file or model folder) with its dictionaries and preprocessing, resolved as
    repair.nmt.preprocessing says and checked against the checkpoint's embedding sizes."""
    from repair.nmt.fairseq.model_files import checkpoint_path

    state = load_checkpoint(checkpoint_path(checkpoint))
    files = resolve_model_files(checkpoint, data_dir, checkpoint_cfg(state), **options)
    check_dictionaries(files.checkpoint, state["model"], files, len(load_dictionary(files.src.dict)),
                       len(load_dictionary(files.tgt.dict)))
    Codec(files.src), Codec(files.tgt)  # codes and models readable: fail here, before any work
    return files


def check_dictionaries(checkpoint: str, model_state: dict, files: ModelFiles, n_src: int, n_tgt: int) -> None:
    """The dictionaries must have as many entries as the checkpoint's embeddings have rows."""
    for side, n, key in (("source", n_src, "encoder.embed_tokens.weight"), ("target", n_tgt, "decoder.embed_tokens.weight")):
        weight = model_state.get(key)
        if weight is None or weight.shape[0] == n:
            continue
        d = files.src.dict if side == "source" else files.tgt.dict
        raise UserError(
            f"{d} has {n} entries but {checkpoint} embeds {weight.shape[0]} {side} tokens: "
            f"the dictionaries do not belong to this model (source {files.src.dict}, target {files.tgt.dict}); "
            f"give the dict files it was trained with (translator.src_dict= / translator.tgt_dict=)"
        )
