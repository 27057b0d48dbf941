"""`translator=ctranslate2` on a transformers folder: the model converted with CTranslate2's converter for
transformers models (an adapter merged into its base model first: CTranslate2 cannot apply one at run time),
cached as the fairseq conversion is (`<folder>.ct2/` or under `cache_dir`, `converted.json` last, with the sha256
of the folders it was converted from: a changed model or adapter is converted again), with the same fidelity check
(a sample translated by the transformers translator and by each candidate compute type, the fastest with at least
`min_identical` identical translations chosen, the record kept in the marker) and the same keys.
CTranslate2's beam search (float32) gives generate()'s translations with early_stopping=True and no end token forced
at the cap; the transformers translator's generate() goes on past `beam` ended hypotheses (early_stopping=False) and
forces the end token at the cap, so the two differ where that changes the best hypothesis (the fidelity check's
figure; tests/test_hf.py).

`runtime="auto"` (`translator=transformers`, the transformers family's default): CTranslate2 where the fidelity check
allows (a compute type gives at least `min_identical` of the sample's translations as the transformers translator
does), else the transformers translator itself (in-process, batched by length): where no compute type reaches the bar,
or where the model cannot be converted or loaded (an architecture the converter does not know, a cache folder that
cannot be written). The switch is logged as a warning and `describe()` says which runtime translated and why.
`runtime="ctranslate2"` (`translator=ctranslate2` on a transformers folder) always uses CTranslate2: the closest
compute type below the bar, with a warning.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from repair.data.prepare import clean_text
from repair.errors import UserError
from repair.fileio import file_sha256
from repair.nmt.ct2.cache import MARKER, MARKER_FORMAT, cache_folder, cache_problem, conversion_folder, read_marker
from repair.nmt.ct2.runtime import import_ctranslate2
from repair.nmt.ct2.translator import CTranslate2Runtime
from repair.nmt.hf.folder import Folder, folder_sha256, load_model, load_tokenizer, model_files, resolve
from repair.nmt.hf.translator import UNUSED, refuse_set

if TYPE_CHECKING:
    from repair.nmt.hf.translator import TransformersTranslator

logger = logging.getLogger(__name__)


def source_hashes(folder: Folder) -> dict:
    return {"model": folder_sha256(folder.base), "adapter": folder_sha256(folder.adapter) if folder.adapter else None}


def convert_folder(folder: Folder, cache_dir: str | os.PathLike | None = None) -> Path:
    """The CTranslate2 model of a transformers folder: its valid cache, or a fresh float32 conversion."""
    ctranslate2 = import_ctranslate2()
    out = cache_folder(folder.path, cache_dir)
    sources = source_hashes(folder)
    problem = cache_problem(out, sources)
    if problem is None:
        logger.info("CTranslate2 model %s (cached)", out)
        return out
    if problem != "missing":
        logger.warning("CTranslate2 cache %s is %s: converting again", out, problem)
    tmp = conversion_folder(out)
    try:
        source = folder.base
        if folder.adapter is not None:  # merged into a whole model folder first
            merged = load_model(folder).merge_and_unload()
            source = tmp / "merged"
            merged.save_pretrained(str(source))
            load_tokenizer(Folder(folder.base, folder.base))[0].save_pretrained(str(source))
        try:
            ctranslate2.converters.TransformersConverter(str(source)).convert(str(tmp / "model"),
                                                                             quantization="float32", force=True)
        except Exception as e:  # the converter's reasons (an architecture it does not know) on one line
            raise UserError(f"{folder.path}: CTranslate2 cannot convert this model ({type(e).__name__}: "
                            f"{str(e).splitlines()[0][:300] if str(e) else ''}); test it with "
                            f"translator=transformers instead") from None
        model = tmp / "model"
        marker = {"format": MARKER_FORMAT, "from": sources, "ctranslate2": ctranslate2.__version__,
                  "files": {p.name: file_sha256(p) for p in sorted(model.iterdir()) if p.is_file()}, "fidelity": {}}
        from repair.fileio import write_json_atomic

        write_json_atomic(model / MARKER, marker)  # last: a folder without it is an unfinished conversion
        if out.exists():
            shutil.rmtree(out)
        os.replace(model, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("converted %s with CTranslate2 %s into %s", folder.path, ctranslate2.__version__, out)
    return out


EPOCH_ADAPTER = re.compile(r"checkpoint\d+")  # a fine-tune's adapter of one epoch (repair.face: checkpoint<epoch>)
RUNTIMES = ("auto", "ctranslate2", "transformers")  # translator.runtime of a transformers folder
# keys of the converted model's translator that the in-process one has no use for (dropped with runtime=transformers)
CT2_ONLY = ("compute_type", "min_identical", "cache_dir", "sample", "fairseq_cap", "max_len_a", "max_len_b")


class TransformersCT2Translator(CTranslate2Runtime):
    """A transformers folder run with CTranslate2 (see the module): the folder's tokenizer encodes and decodes,
    the target language's token is the target prefix where the model needs one, at most `max_len` new tokens.
    `runtime`: ctranslate2, or auto (the transformers translator where the fidelity check fails: `fallback`, built
    with `fp16` and `max_sentences`, which CTranslate2 does not use)."""

    name = "ctranslate2"
    extra_options = (*UNUSED, "fairseq_cap", "max_len_a", "max_len_b")  # fairseq's output cap: max_len alone here
    against = "transformers"  # bleu_vs_fairseq: BLEU against the transformers translator's translations here

    def __init__(self, checkpoint: str | os.PathLike | None = None, *, files=None, source_prefix: str | None = None,
                 tgt_lang: str | None = None, cache_dir: str | os.PathLike | None = None, beam: int = 5,
                 max_tokens: int = 4000, max_len: int = 200, compute_type: str | None = None,
                 min_identical: float = 0.98, sample: Sequence[str] | None = None, device: str = "auto",
                 threads: int | None = None, workers: int | None = None, runtime: str = "ctranslate2",
                 fp16: bool | str = "auto", max_sentences: int = 128, **unused: Any):
        ctranslate2 = import_ctranslate2()
        refuse_set({k: v for k, v in unused.items() if k not in ("fairseq_cap", "max_len_a", "max_len_b", "data_dir",
                                                                 "workers")}, self.name)
        self.check_settings(beam, max_tokens, max_len, min_identical)
        if runtime not in RUNTIMES[:2]:
            raise UserError(f"translator.runtime={runtime}: one of {', '.join(RUNTIMES)}")
        path = checkpoint if checkpoint is not None else (files.checkpoint if files is not None else None)
        if path is None:
            raise UserError("translator=ctranslate2 needs translator.checkpoint=FOLDER")
        self.folder = resolve(path)
        self.beam, self.max_tokens, self.max_len = int(beam), int(max_tokens), int(max_len)
        self.min_identical = float(min_identical)
        self.source_prefix = (source_prefix.strip() + " ") if source_prefix else ""
        self._tgt_lang = tgt_lang
        self.runtime, self.fallback, self.runtime_why, self._reference = runtime, None, None, None
        self.kind, self._searching = "cpu", (None, None)  # the device's kind once placed; the searches' translator
        self._positions = None  # the decoder's positions (_target_positions)
        self._epochs = None  # the in-process translator a fine-tune's epoch adapters are added to (with_adapter)
        self._in_process = {"device": device, "threads": threads, "fp16": fp16, "max_sentences": max_sentences}
        self.tokenizer, self.forced_bos = load_tokenizer(self.folder, tgt_lang)
        self._prefix = [self.tokenizer.convert_ids_to_tokens(self.forced_bos)] if self.forced_bos is not None else None
        self.files = model_files(self.folder)
        self.checkpoint = self.files.checkpoint
        self.model, self.compute_type, self.fidelity, self._pending = None, None, None, False
        try:
            self.model_path = convert_folder(self.folder, cache_dir)
        except UserError as e:  # an architecture the converter does not know, a cache that cannot be written
            if runtime != "auto":
                raise
            self._fall_back(f"CTranslate2 cannot serve it ({e})")
            return
        self._place(ctranslate2, device, threads, workers, compute_type)
        self._begin_fidelity(read_marker(self.model_path), sample, compute_type)

    @property
    def fidelity_key(self) -> str:
        return f"{self.kind} beam={self.beam} max_len={self.max_len} transformers"

    # ------------------------------------------------------------------ which runtime translates

    def in_process(self, fp16: bool | str) -> "TransformersTranslator":
        """The transformers translator of the same folder and decoding settings."""
        from repair.nmt.hf.translator import TransformersTranslator

        options = {**self._in_process, "fp16": fp16}
        return TransformersTranslator(self.folder.path, beam=self.beam, max_len=self.max_len,
                                      max_tokens=self.max_tokens, tgt_lang=self._tgt_lang,
                                      source_prefix=self.source_prefix or None, **options)

    def _use(self, record: dict) -> None:
        """The compute type the fidelity record allows (CTranslate2Runtime._use); with runtime=auto and no compute
        type given, the transformers translator where none reaches translator.min_identical."""
        super()._use(record)
        reference, self._reference = self._reference, None
        f = self.fidelity
        if self.runtime == "auto" and not self._explicit and f.get("checked") and f["identical"] < self.min_identical:
            self._fall_back(f"the fidelity check: the closest compute type, {f['compute_type']}, gave "
                            f"{f['identical']:.1%} of {f['sample']} sample translations as the transformers "
                            f"translator does, below translator.min_identical={self.min_identical}", reference)

    def _fall_back(self, why: str, reference=None) -> None:
        """The transformers translator translates from now on (`reference`, the fidelity check's, where it is the one
        that would be built: float32)."""
        from repair.nmt.device import use_fp16

        self.runtime_why, self.name, self.model = why, "transformers", None
        gpu = str(self._in_process["device"]).startswith("cuda") or self.kind == "cuda"
        same = reference is not None and not use_fp16(self._in_process["fp16"], gpu)
        self.fallback = reference if same else self.in_process(self._in_process["fp16"])
        logger.warning("%s: %s; translated by the transformers runtime instead (in-process, batched by length)",
                       self.folder.path, why)

    def describe(self) -> dict:
        return {"name": self.name, "runtime": "transformers" if self.fallback is not None else "ctranslate2",
                "runtime_asked": self.runtime, "why": self.runtime_why, "folder": str(self.folder.path),
                "adapter": str(self.folder.adapter) if self.folder.adapter else None,
                "compute_type": None if self.fallback is not None else self.compute_type, "fidelity": self.fidelity}

    def check_model(self, sentences: Sequence[str], valid_pairs: Sequence[tuple[str, str]] = (),
                    data_dir: str | os.PathLike | None = None) -> dict:
        """The folder's tokenizer and translations checked on a sample of `sentences` (repair.nmt.hf.check); these
        translations are the first, so the fidelity check's sample too."""
        from repair.nmt.hf.check import check_transformers_model

        return check_transformers_model(self.tokenizer, self.translate, sentences, self.source_prefix)

    def why_no_search(self) -> str | None:
        return None

    def searcher(self, beam: int):
        """CTranslate2 has no lexical constraints: it searches with the phrases in a forced beginning of the
        translation (a target prefix: repair.nmt.ct2.search); the transformers model this one was converted from, loaded
        then, only for phrases in any order (the review memory's terms)."""
        if self.fallback is not None:
            return self.fallback.searcher(beam)
        from repair.nmt.ct2.search import OnDemand, PrefixSearch

        if self._searching[0] != beam:  # made once for the searches of a run
            def build():
                from repair.nmt.hf.translator import TransformersTranslator

                return TransformersTranslator(
                    self.folder.path, beam=beam, max_len=self.max_len, device=self.kind,
                    threads=self.threads * self.workers, tgt_lang=self._tgt_lang,
                    source_prefix=self.source_prefix or None).searcher(beam)[0]
            self._searching = (beam, PrefixSearch(self, OnDemand(build)))
        return self._searching[1], f", {self.name} with the phrases in a forced beginning of the translation"

    # ------------------------------------------------------------------ what PrefixSearch asks (repair.nmt.ct2.search)

    @property
    def tgt_codec(self):
        from repair.nmt.hf.search import TargetCodec

        return TargetCodec(self.tokenizer)

    @property
    def decoder_prefix(self) -> list[str]:
        return list(self._prefix or [])

    def source_tokens(self, cleaned: Sequence[str]) -> list[list[str]]:
        ids = self.tokenizer([self.source_prefix + c for c in cleaned], truncation=True)["input_ids"]
        return [self.tokenizer.convert_ids_to_tokens(x) for x in ids]

    def target_tokens(self, texts: Sequence[str]) -> list[list[str]]:
        ids = self.tokenizer(text_target=list(texts), add_special_tokens=False)["input_ids"]
        return [self.tokenizer.convert_ids_to_tokens(x) for x in ids]

    def text_of(self, tokens: Sequence[str]) -> str:
        return self.tokenizer.decode(self.tokenizer.convert_tokens_to_ids(list(tokens)), skip_special_tokens=True).strip()

    def target_vocabulary(self) -> list[str]:
        from repair.nmt.ct2.search import converted_vocabulary

        return converted_vocabulary(self.model_path)

    def search_caps(self, tokens: Sequence[Sequence[str]]) -> list[int]:
        # translation's max_decoding_length counts the language token forced first (decoder_prefix); a search's cap not
        return [self.max_len - len(self.decoder_prefix)] * len(tokens)

    def search_options(self, batch: list[list[str]]) -> dict:
        return {"length_penalty": 1.0, "max_batch_size": self.max_tokens, "batch_type": "tokens", "asynchronous": True}

    def _target_positions(self) -> int:
        """The decoder's positions (the folder's max_position_embeddings; a text re-encoded from a translation cut at
        the cap may need more tokens than the search wrote)."""
        import json

        if self._positions is None:  # read once: every scoring pass asks
            try:
                config = json.loads((Path(self.folder.base) / "config.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                config = {}
            self._positions = int(config.get("max_position_embeddings") or 1024)
        return self._positions

    def teacher_scores(self, sources: Sequence[str], targets: Sequence[str]) -> list[float]:
        """As the transformers search scores (repair.nmt.hf.search.Searcher.score): the log-probability of the
        target's tokens (the language token before them, where the model has one) and the end token, over their
        number; -inf where the source or the target is empty."""
        from repair.nmt.ct2.search import teacher_forced

        limit = self._target_positions() - 1  # the end token CTranslate2 adds takes the last position
        return teacher_forced(self, sources, targets,
                              lambda texts: [(self.decoder_prefix + t)[:limit] for t in self.target_tokens(texts)],
                              lambda log_probs, y: sum(log_probs) / max(1, len(log_probs)))

    def without_edit(self, fallback: str):
        return self.fallback.without_edit(fallback) if self.fallback is not None else None

    def with_adapter(self, path: str):
        """An adapter of this model, added to the transformers translator where that translates this model. With
        CTranslate2 translating, a fine-tune's epoch adapter (`checkpoint<epoch>/`, translated only to choose the epoch
        the fine-tune keeps: a few correction sources) is added to this model's in-process translator, loaded once for
        every epoch, instead of being merged, converted and checked once per epoch; the adapter kept
        (checkpoint_best/, checkpoint_selected/) is converted by the translator made for it (None here)."""
        if self.fallback is not None:
            return self.fallback.with_adapter(path)
        if not EPOCH_ADAPTER.fullmatch(Path(path).name):
            return None
        if self._epochs is None:
            self._epochs = self.in_process(self._in_process["fp16"])
        return self._epochs.with_adapter(path)

    def begin(self, texts: list[str]):
        return None

    def reference_translations(self, sample: list[str]) -> list[str]:
        """`sample` translated by the transformers translator (float32, the same settings), kept for a fallback."""
        self._reference = self.in_process(False)
        return self._reference.translate(sample)

    def _translate(self, texts: Sequence[str]) -> list[str]:
        if self.fallback is not None:  # the fidelity check failed on the first texts: translated by transformers
            return self.fallback.translate(list(texts))
        out = [""] * len(texts)
        cleaned = [clean_text(t or "") for t in texts]
        todo = [i for i, t in enumerate(cleaned) if t]
        if not todo:
            return out
        ids = self.tokenizer([self.source_prefix + cleaned[i] for i in todo], truncation=True)["input_ids"]
        tokens = [self.tokenizer.convert_ids_to_tokens(x) for x in ids]
        results = self.model.translate_batch(
            tokens, target_prefix=[self._prefix] * len(tokens) if self._prefix else None, beam_size=self.beam,
            max_decoding_length=self.max_len, max_batch_size=self.max_tokens, batch_type="tokens", num_hypotheses=1,
            length_penalty=1.0, return_scores=False)
        for i, r in zip(todo, results):
            hyp = r.hypotheses[0][1:] if self._prefix else r.hypotheses[0]
            out[i] = self.tokenizer.decode(self.tokenizer.convert_tokens_to_ids(hyp), skip_special_tokens=True).strip()
        return out
