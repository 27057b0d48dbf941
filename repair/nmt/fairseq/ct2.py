"""The `ctranslate2` Purity translator: a fairseq checkpoint converted with CTranslate2's own fairseq
converter (cached beside the checkpoint), or a model folder already converted (`model_dir`).

Texts go through the same preprocessing as with `translator=fairseq` (`repair.nmt.preprocessing`:
the model's tokenizer and subword model, per side) and the same decoding rules: beam size, length
penalty, and each text's output cap max_len_a * w + max_len_b (at most max_len target tokens),
where w is the padded width of its source, as FairseqTranslator computes it. CTranslate2 takes one
cap per call, so texts are grouped by cap (a handful of groups) and each group is one call, batched
by tokens, all calls submitted at once. At the cap fairseq ends every open beam with the end token;
a text that reaches the cap is decided as fairseq would (repair.nmt.fairseq.ct2_cap). A length penalty of 0
is searched as fairseq searches it too (CTranslate2 alone would end the search early: see `_penalties`).

The converted cache (repair.nmt.ct2.cache): `<checkpoint>.ct2/` (or under `cache_dir`), converted in float32 with
CTranslate2's fairseq converter, keyed by the sha256 of the checkpoint and both dictionaries (a fine-tune written over
the checkpoint makes it stale); its marker also keeps what the translator reads from the checkpoint (its languages,
recorded preprocessing and source positions), so that a cached conversion is used without loading the checkpoint (nor
importing torch or fairseq), and the fidelity measured for it against fairseq (repair.nmt.ct2.translator). fairseq's
end of the search at the output cap: repair.nmt.fairseq.ct2_cap. A model given by `model_dir` (converted elsewhere, no
fairseq checkpoint) runs as converted, its fidelity unchecked.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Sequence

from repair.data.prepare import clean_text
from repair.errors import UserError
from repair.fileio import file_sha256
from repair.nmt.ct2.cache import MARKER, MARKER_FORMAT, cache_folder, cache_problem, conversion_folder, read_marker
from repair.nmt.ct2.runtime import import_ctranslate2
from repair.nmt.ct2.translator import CTranslate2Runtime
from repair.nmt.fairseq.ct2_cap import FairseqCapRule
from repair.nmt.ct2.search import converted_vocabulary
from repair.nmt.preprocessing import OPTION_KEYS, Codec, ModelFiles, Side, given_preprocessing

logger = logging.getLogger(__name__)


# What a converted model folder holds (ct2-transformers-converter, ct2-fairseq-converter).
CT2_FILES = ("config.json", "model.bin")
# The SentencePiece models OPUS-MT folders ship (copied beside a converted model with --copy_files).
OPUS_SPM = ("source.spm", "target.spm")


def _source_hashes(files: ModelFiles) -> dict:
    return {"checkpoint": file_sha256(files.checkpoint), "src_dict": file_sha256(files.src.dict),
            "tgt_dict": file_sha256(files.tgt.dict)}


def convert_checkpoint(files: ModelFiles, cache_dir: str | os.PathLike | None = None, valid: bool = False) -> Path:
    """The CTranslate2 model of a fairseq checkpoint: the valid cache, or a fresh conversion (`valid`: the cache
    was just checked)."""
    ctranslate2 = import_ctranslate2()
    folder = cache_folder(files.checkpoint, cache_dir)
    sources = None if valid else _source_hashes(files)
    problem = None if valid else cache_problem(folder, sources)
    if problem is None:
        logger.info("CTranslate2 model %s (cached)", folder)
        return folder
    if problem != "missing":
        logger.warning("CTranslate2 cache %s is %s: converting again", folder, problem)
    from repair.nmt.fairseq.checkpoint import allow_fairseq_globals, checkpoint_cfg, load_checkpoint
    from repair.nmt.fairseq.model_files import checkpoint_facts

    allow_fairseq_globals()  # the converter loads the checkpoint with torch's weights-only unpickler
    facts = checkpoint_facts(checkpoint_cfg(load_checkpoint(files.checkpoint)))
    tmp = conversion_folder(folder)
    try:
        with tempfile.TemporaryDirectory() as data_dir:
            # The converter reads <data_dir>/dict.<lang>.txt: the model's own dictionaries, wherever they are.
            for side in (files.src, files.tgt):
                os.symlink(os.path.abspath(side.dict), os.path.join(data_dir, f"dict.{side.lang}.txt"))
            converter = ctranslate2.converters.FairseqConverter(
                files.checkpoint, data_dir, source_lang=files.src.lang, target_lang=files.tgt.lang)
            try:
                converter.convert(str(tmp / "model"), quantization="float32", force=True)
            except ValueError as e:
                raise UserError(f"{files.checkpoint}: CTranslate2 cannot convert this model: {_reasons(e)}. "
                                f"Test it with translator=fairseq instead") from None
            except Exception as e:  # the converter rebuilds the model with fairseq: any failure there
                raise UserError(f"{files.checkpoint}: CTranslate2's fairseq converter failed "
                                f"({type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}). "
                                f"Test it with translator=fairseq instead") from None
        model = tmp / "model"
        marker = {"format": MARKER_FORMAT, "from": sources, "ctranslate2": ctranslate2.__version__,
                  "files": {p.name: file_sha256(p) for p in sorted(model.iterdir()) if p.is_file()},
                  "checkpoint": facts, "fidelity": {}}
        from repair.fileio import write_json_atomic

        write_json_atomic(model / MARKER, marker)  # last: a folder without it is an unfinished conversion
        if folder.exists():
            aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old.", dir=folder.parent))
            os.replace(folder, aside / "old")
            shutil.rmtree(aside, ignore_errors=True)
        os.replace(model, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("converted %s with CTranslate2 %s into %s", files.checkpoint, ctranslate2.__version__, folder)
    return folder


def cached_model_files(checkpoint: str | os.PathLike, data_dir: str | os.PathLike | None,
                       cache_dir: str | os.PathLike | None, preprocessing: dict) -> ModelFiles | None:
    """The model's files resolved with the checkpoint's facts kept in its converted cache (None: no usable
    cache), without loading the checkpoint; the cache is then checked against the files' hashes as always."""
    from repair.nmt.fairseq.model_files import checkpoint_path, resolve_model_files

    path = checkpoint_path(checkpoint)
    marker = cache_folder(path, cache_dir) / MARKER
    try:
        facts = json.loads(marker.read_text(encoding="utf-8"))["checkpoint"] if path.is_file() else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(facts, dict):
        return None
    files = resolve_model_files(checkpoint, data_dir, facts, **preprocessing)
    # facts of another checkpoint (one written over it since) may name other files: used only by a valid cache
    return files if cache_problem(marker.parent, _source_hashes(files)) is None else None


def _reasons(error: ValueError) -> str:
    """The converter's reasons ('Option --activation-fn tanh is not supported'), on one line."""
    lines = [line[2:] for line in str(error).splitlines() if line.startswith("- ")]
    return "; ".join(lines) if lines else str(error).strip()[:300]


def model_dir_files(model_dir: str | os.PathLike, **preprocessing: Any) -> ModelFiles:
    """A converted CTranslate2 model folder with its preprocessing: the options given, else the
    SentencePiece models an OPUS-MT folder ships (source.spm, target.spm)."""
    from repair.nmt.preprocessing import check_option_keys

    folder = Path(model_dir)
    missing = [f for f in CT2_FILES if not (folder / f).is_file()]
    if missing:
        raise UserError(f"translator.model_dir={folder}: not a CTranslate2 model folder (no {', '.join(missing)}; "
                        f"convert a model with ct2-transformers-converter --output_dir {folder})")
    check_option_keys(preprocessing, "translator")
    given = {k: v for k, v in preprocessing.items() if v not in (None, "")}
    dicts = [k for k in given if k.endswith("_dict")]
    if dicts:
        raise UserError(f"translator.model_dir: {', '.join(dicts)} do not apply, the vocabularies are in {folder}")

    def side(name: str, lang: str, default_spm: str) -> Side:
        def pick(key: str) -> Any:
            return given.get(f"{name}_{key}") or given.get(key)

        spm = pick("sentencepiece_model")
        bpe = pick("bpe") or ("sentencepiece" if spm or (folder / default_spm).is_file() else "none")
        if bpe == "sentencepiece":
            spm = spm or str(folder / default_spm)
            if not Path(spm).is_file():
                raise UserError(f"SentencePiece model {spm} not found ({lang} side of {folder}): give "
                                f"translator.{name}_sentencepiece_model=FILE")
        codes = pick("bpe_codes")
        if bpe in ("subword_nmt", "fastbpe") and not (codes and Path(codes).is_file()):
            raise UserError(f"bpe={bpe} needs translator.{name}_bpe_codes=FILE ({lang} side of {folder})")
        return Side(lang, "", pick("tokenizer") or "none", bpe, codes if bpe in ("subword_nmt", "fastbpe") else None,
                    spm if bpe == "sentencepiece" else None)

    if not any((folder / f).is_file() for f in OPUS_SPM) and not given:
        raise UserError(f"translator.model_dir={folder}: no preprocessing found: copy the model's SentencePiece "
                        f"models in as {' and '.join(OPUS_SPM)} (ct2-transformers-converter --copy_files "
                        f"{' '.join(OPUS_SPM)}), or give translator.src_sentencepiece_model= and "
                        f"translator.tgt_sentencepiece_model=")
    return ModelFiles(str(folder), side("src", "en", OPUS_SPM[0]), side("tgt", "zh", OPUS_SPM[1]))


class CTranslate2Translator(FairseqCapRule, CTranslate2Runtime):
    """Translates English to Chinese with CTranslate2.

    `checkpoint` (a fairseq checkpoint file or model folder, with `data_dir` and the preprocessing
    options as for translator=fairseq) or resolved `files` is converted once and cached (see the
    module doc); `model_dir` is a model already converted, tested as it is. `compute_type`: None
    means the fastest whose translations agree with fairseq's on at least `min_identical` of a sample
    (`sample`, else the first call's texts; see the module doc); any type CTranslate2 offers on the
    device. `max_tokens`: source tokens per batch. `threads` CPU cores, shared out as `workers`
    batches translated at once (default on CPU: one per core, of one thread each). `fidelity` says
    what was measured and chosen (None until it is known).
    """

    name = "ctranslate2"
    extra_options = OPTION_KEYS
    against = "fairseq"  # the translator whose translations the compute types are compared with

    def __init__(
        self,
        checkpoint: str | os.PathLike | None = None,
        data_dir: str | os.PathLike | None = None,
        *,
        files: ModelFiles | None = None,
        model_dir: str | os.PathLike | None = None,
        source_prefix: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        beam: int = 5,
        max_tokens: int = 4000,
        max_len: int = 200,
        max_len_a: float = 1.2,
        max_len_b: int = 10,
        len_penalty: float = 1.0,
        compute_type: str | None = None,
        min_identical: float = 0.98,
        sample: Sequence[str] | None = None,
        device: str = "auto",
        threads: int | None = None,
        workers: int | None = None,
        fairseq_cap: bool | None = None,
        **preprocessing: Any,
    ):
        ctranslate2 = import_ctranslate2()
        self.check_settings(beam, max_tokens, max_len, min_identical)
        self.beam, self.max_tokens, self.max_len = int(beam), int(max_tokens), int(max_len)
        self.max_len_a, self.max_len_b, self.len_penalty = float(max_len_a), int(max_len_b), float(len_penalty)
        self.min_identical, self._fairseq_cap = float(min_identical), fairseq_cap
        self.source_prefix = source_prefix.split() if source_prefix else []
        preprocessing = given_preprocessing(files, preprocessing)
        sources = [k for k, v in (("checkpoint", checkpoint), ("files", files), ("model_dir", model_dir)) if v]
        if not sources:
            raise UserError("translator=ctranslate2 needs translator.checkpoint=PATH (a fairseq checkpoint file or model "
                            "folder) or translator.model_dir=DIR (a model converted with ct2-transformers-converter)")
        if len(sources) > 1:
            raise UserError(f"translator=ctranslate2: give one of translator.checkpoint and translator.model_dir "
                            f"(given: {', '.join(sources)})")
        if model_dir:
            files = model_dir_files(model_dir, **preprocessing)
            path, self.max_source_positions, marker = Path(model_dir), None, None
        else:
            valid = False
            if files is None:  # a valid cached conversion keeps what is needed of the checkpoint: it is not loaded
                files = cached_model_files(checkpoint, data_dir, cache_dir, preprocessing)
                valid = files is not None
            if files is None:
                from repair.nmt.fairseq.translator import load_model_files

                files = load_model_files(checkpoint, data_dir, **preprocessing)
            path = convert_checkpoint(files, cache_dir, valid=valid)
            marker = read_marker(path)
            self.max_source_positions = int(marker["checkpoint"]["model"]["max_source_positions"])
        self.files, self.model_path = files, path
        self.checkpoint = files.checkpoint
        # the target spelt with the pieces the model writes (its converted vocabulary: the fairseq dictionary's)
        self.src_codec = Codec(files.src)
        self.tgt_codec = Codec(files.tgt, fit=frozenset(converted_vocabulary(path)))
        self._read_config(path)
        self._place(ctranslate2, device, threads, workers, compute_type)
        self.model, self.compute_type, self.fidelity, self._pending = None, None, None, False
        self._cap_counts = (0, 0)  # texts translated with fairseq's rule at the cap, and how many reached it
        self._cap_lock = threading.Lock()
        if marker is None:  # converted elsewhere: nothing to compare with
            self.fidelity = {"checked": False, "compute_type": compute_type or "default",
                             "why": "translator.model_dir: a model converted elsewhere, no fairseq checkpoint to "
                                    "compare its translations with"}
            logger.warning("CTranslate2 model %s: fidelity unchecked (%s)", path, self.fidelity["why"])
            self._load(compute_type or "default")
        else:
            self._begin_fidelity(marker, sample, compute_type)

    @property
    def fidelity_key(self) -> str:
        """What a fidelity record holds for: the device and the decoding settings."""
        return (f"{self.kind} beam={self.beam} len_penalty={self.len_penalty} max_len={self.max_len} "
                f"max_len_a={self.max_len_a} max_len_b={self.max_len_b} fairseq_cap={self._fairseq_cap}")

    def reference_translations(self, sample: list[str]) -> list[str]:
        """`sample` translated with fairseq (float32, the same decoding settings)."""
        from repair.nmt.fairseq.translator import FairseqTranslator

        fairseq = FairseqTranslator(files=self.files, beam=self.beam, max_len=self.max_len, max_len_a=self.max_len_a,
                                    max_len_b=self.max_len_b, len_penalty=self.len_penalty, device=self.kind,
                                    fp16=False, threads=self.workers * self.threads)
        return fairseq.translate(sample)

    def _loaded(self, compute_type: str) -> None:
        # fairseq's end of the search at the output cap costs a search with patience 2 and scores; worth it
        # where the translations are to be fairseq's (float32), not where the weights are approximate anyway
        self.fairseq_cap = compute_type == "float32" if self._fairseq_cap is None else bool(self._fairseq_cap)

    def _read_config(self, path: Path) -> None:
        """The tokens left out of a translation, and the end token (given to sources that lack it), from the
        converted model's config.json."""
        self._ignore = {"<unk>", "<pad>", "<blank>", "<s>", "</s>"}
        try:
            config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise UserError(f"{path / 'config.json'}: not readable ({e})") from None
        self._end = config.get("eos_token") or "</s>"
        self._ignore.add(self._end)
        # A model whose config does not add the end token to the source (Marian / OPUS-MT) is given it, as its
        # own tokenizer does; fairseq's converter sets add_source_eos.
        self._source_suffix = [] if config.get("add_source_eos") else [self._end]

    def caps(self, lengths: Sequence[int]) -> list[int]:
        """Each source's output cap in target tokens, as fairseq's generator sets it for
        FairseqTranslator (lengths with the end token)."""
        if self.max_source_positions is None:
            return [self.max_len] * len(lengths)
        from repair.nmt.fairseq.translator import bucket_width

        return [min(int(self.max_len_a * bucket_width(n, self.max_source_positions) + self.max_len_b), self.max_len)
                for n in lengths]

    def check_model(self, sentences: Sequence[str], valid_pairs: Sequence[tuple[str, str]] = (),
                    data_dir: str | os.PathLike | None = None) -> dict:
        """The fairseq model this one was converted from, checked on a sample (repair.nmt.fairseq.modelcheck): its
        dictionaries and preprocessing, and its validation loss; the translations are not sampled here (the first
        texts translated are the fidelity check's sample)."""
        from repair.nmt.fairseq.modelcheck import check_fairseq_model

        if not str(self.files.checkpoint or "").endswith(".pt"):
            return {"checked": False, "problems": [], "why": "no fairseq checkpoint (a model converted elsewhere)"}
        return check_fairseq_model(self.files, None, sentences, valid_pairs, data_dir=data_dir)

    def why_no_search(self) -> str | None:
        if not str(self.files.checkpoint or "").endswith(".pt"):  # model_dir=: converted elsewhere
            return f"translator={self.name} has no fairseq checkpoint to search"
        return None

    def searcher(self, beam: int):
        """CTranslate2 has no lexical constraints: in float32 it searches with the phrases in a forced beginning of the
        translation (a target prefix: repair.nmt.ct2.search), fairseq on the checkpoint this model was
        converted from only for phrases in any order; in another compute type fairseq searches all."""
        why = self.why_no_search()
        if why:
            return None, why
        from repair.nmt.fairseq.ondemand import FairseqOnDemand

        def build():
            from repair.nmt.fairseq.translator import FairseqTranslator

            return FairseqTranslator(files=self.files, beam=beam, device=self.device, threads=self.threads * self.workers)

        # fairseq loaded when a search is asked for; where this model computes as fairseq (float32) its scores, its
        # n-best lists and the searches that begin with their phrases from this model (repair.nmt.ct2.search)
        if self.compute_type != "float32":
            return FairseqOnDemand(build, None), f", fairseq on the {self.name} model's checkpoint"
        from repair.nmt.ct2.search import PrefixSearch

        fallback = FairseqOnDemand(build, self.teacher_scores)
        return PrefixSearch(self, fallback), f", {self.name} with the phrases in a forced beginning of the translation"


    def begin(self, texts: list[str]):
        """The texts translated by CTranslate2's own threads while the caller goes on (its searches release the
        GIL: on 2 cores, Purity's 200 CNN sentences translated while spaCy parses them took 0.35 s off the two
        one after the other, the same translations). Not before the fidelity check, which picks the compute type
        on the first texts translated."""
        if self._pending or self.model is None or not texts:
            return None
        box: dict = {}

        def work() -> None:
            try:
                box["out"] = self._translate(list(texts))
            except BaseException as e:  # raised again in the caller's thread
                box["error"] = e

        thread = threading.Thread(target=work, name="ct2-begin", daemon=True)
        thread.start()

        def wait() -> list[str]:
            thread.join()
            if "error" in box:
                raise box["error"]
            return box["out"]
        return wait

    def _translate(self, texts: Sequence[str]) -> list[str]:
        out = [""] * len(texts)
        cleaned = [clean_text(t or "") for t in texts]
        todo = [i for i, t in enumerate(cleaned) if t]
        tokens = self.source_tokens([cleaned[i] for i in todo], warn=True)
        by_cap: dict[int, list[int]] = {}
        for k, cap in enumerate(self.caps(self.source_lengths(tokens))):
            by_cap.setdefault(cap, []).append(k)
        decide = self._fairseq_rule if self.fairseq_cap else self._own_rule
        for k, hypothesis in decide(tokens, by_cap).items():
            out[todo[k]] = self._text(hypothesis)
        return out

    def source_tokens(self, cleaned: Sequence[str], warn: bool = False) -> list[list[str]]:
        """Cleaned texts as the converted model reads them: preprocessed, the source prefix before, cut to the model's
        source positions, the end token after where the model does not add it."""
        tokens = [self.source_prefix + line.split() for line in self.src_codec.encode_all(list(cleaned))]
        if self.max_source_positions is not None:
            limit = self.max_source_positions - 1  # the converted model adds the end token
            cut = sum(len(t) > limit for t in tokens)
            if cut:
                if warn:
                    logger.warning("%d text(s) longer than the model's %d source positions were truncated",
                                   cut, self.max_source_positions)
                tokens = [t[:limit] for t in tokens]
        return [t + self._source_suffix for t in tokens]

    def source_lengths(self, tokens: Sequence[Sequence[str]]) -> list[int]:
        """The lengths fairseq counts for the caps (with the end token) of source_tokens' sources."""
        return [len(t) - len(self._source_suffix) + 1 for t in tokens]

    # ------------------------------------------------------------------ what PrefixSearch asks (repair.nmt.ct2.search)

    decoder_prefix: list[str] = []

    def target_tokens(self, texts: Sequence[str]) -> list[list[str]]:
        return [line.split() for line in self.tgt_codec.encode_all(list(texts))]

    def text_of(self, tokens: Sequence[str]) -> str:
        return self._text(tokens)

    def target_vocabulary(self) -> list[str]:
        return converted_vocabulary(self.model_path)

    def search_caps(self, tokens: Sequence[Sequence[str]]) -> list[int]:
        return self.caps(self.source_lengths(tokens))

    def search_options(self, batch: list[list[str]]) -> dict:
        return {**self._penalties(), **self._batching(batch)}

    def teacher_scores(self, sources: Sequence[str], targets: Sequence[str]) -> list[float]:
        from repair.nmt.fairseq.ondemand import ct2_scores

        return ct2_scores(self, sources, targets)

    def _text(self, hypothesis: Sequence[str]) -> str:
        return self.tgt_codec.decode(" ".join(t for t in hypothesis if t not in self._ignore))

    def _batching(self, sources: list[list[str]]) -> dict:
        """A call's batches: at most max_tokens source tokens; on CPU also at most a (2 * workers)th of the call,
        so that every worker has batches to take (on 2 cores, 2 workers with batches of 500-2000 tokens translated
        the benchmark's texts 1.2-1.7x as fast as with one batch per call; README)."""
        size = self.max_tokens
        if self.device.startswith("cpu"):
            size = min(size, -(-sum(map(len, sources)) // (2 * self.workers)))
        return {"max_batch_size": max(1, size), "batch_type": "tokens", "max_input_length": 0, "asynchronous": True}
