"""The `ctranslate2` Purity translator: a fairseq checkpoint converted with CTranslate2's own fairseq
converter (cached beside the checkpoint), or a model folder already converted (`model_dir`).

Texts go through the same preprocessing as with `translator=fairseq` (`repair.nmt.preprocessing`:
the model's tokenizer and subword model, per side) and the same decoding rules: beam size, length
penalty, and each text's output cap max_len_a * w + max_len_b (at most max_len target tokens),
where w is the padded width of its source, as FairseqTranslator computes it. CTranslate2 takes one
cap per call, so texts are grouped by cap (a handful of groups) and each group is one call, batched
by tokens, all calls submitted at once. At the cap fairseq ends every open beam with the end token;
a text that reaches the cap is decided as fairseq would (see `_fairseq_rule` and `_AtCap`). A length penalty of 0
is searched as fairseq searches it too (CTranslate2 alone would end the search early: see `_penalties`).

The converted cache: `<checkpoint>.ct2/` (or `cache_dir/<checkpoint name>.ct2/`), converted in
float32 (the compute type is chosen when loading), with `converted.json` written last: the sha256 of
the checkpoint and both dictionaries it was converted from, the CTranslate2 version, and the sha256
of every file of the converted model. A cache whose checkpoint or dictionaries changed (a fine-tune
written over the checkpoint) is stale, one whose files do not match their hashes (or that has no
marker: a conversion that was stopped) is corrupt; either is converted again, with a log line,
never used. Conversion writes into a temporary folder beside the cache and renames it into place.
The marker also keeps what the translator reads from the checkpoint (its languages, recorded
preprocessing and source positions), so that a cached conversion is used without loading the
checkpoint (nor importing torch or fairseq), and the fidelity measured for it (`check_fidelity`).

Fidelity: CTranslate2's compute types other than float32 change a model's arithmetic (int8, int16
quantize its weights), and how many translations change depends on the model and on the CPU's
kernels. So once per cached conversion (and device and decoding settings) a sample of texts (`sample`,
or the first call's first SAMPLE texts) is translated with fairseq and with each candidate compute type
(CPU: int8, int16 where the CPU offers it, float32; GPU: int8_float16, float16, float32); each one's
share of translations identical to fairseq's and BLEU against them (sacrebleu, tok zh) are kept in the
marker. Unless `compute_type` is given, the fastest candidate with at least `min_identical` identical
is used; a `compute_type` given below that bar is used with a warning giving its agreement. A model
given by `model_dir` (converted elsewhere, no fairseq checkpoint) runs as converted, its fidelity unchecked.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Sequence

from repair.data.prepare import clean_text
from repair.errors import UserError
from repair.nmt.preprocessing import OPTION_KEYS, Codec, ModelFiles, Side, given_preprocessing
from repair.nmt.base import Translator
from repair.nmt.ct2_runtime import import_ctranslate2 as _import_ctranslate2
from repair.purity.translators import fidelity_line

logger = logging.getLogger(__name__)

MARKER = "converted.json"
MARKER_FORMAT = 2  # 2: the checkpoint's facts and the fidelity records kept in the marker
# score_batch computes the whole target vocabulary's log probabilities at every position of a batch: batches of at most
# this many target tokens keep them in the CPU's caches (the 684 hypotheses at the cap of Purity on the CNN 200, 2 cores:
# 0.77-0.82 s in batches of up to 2,000 source tokens, 0.57-0.60 s at 200 target tokens, 0.62-0.63 s at 400)
SCORE_TOKENS = 200
# fairseq's rule at the cap searches every text once keeping every hypothesis where at least this share of a
# translator's texts reach the cap, else searches those that reach it again (the same translations; 2 cores, one
# model: 500 Tatoeba sentences, 1% at the cap, 0.5 s searched again against 0.6-0.7 s in one search; the 582 texts
# of Purity on the CNN 200, 26% at the cap, 3.2 s against 2.6 s)
CAP_SHARE = 0.12
SAMPLE = 200  # texts translated by fairseq and each compute type to measure their agreement
NO_EARLY_EXIT = 1e-30  # the coverage penalty given with translator.len_penalty=0 (see _penalties)
# compute types tried, fastest first; each used only where CTranslate2 offers it on the device
CANDIDATES = {"cpu": ("int8", "int16", "float32"), "cuda": ("int8_float16", "float16", "float32")}
# GPU index -> why CTranslate2 cannot translate there (None: it can), found by one try per process
GPU_TRIED: dict[int, str | None] = {}
# What a converted model folder holds (ct2-transformers-converter, ct2-fairseq-converter).
CT2_FILES = ("config.json", "model.bin")
# The SentencePiece models OPUS-MT folders ship (copied beside a converted model with --copy_files).
OPUS_SPM = ("source.spm", "target.spm")


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _ctranslate2_version() -> str:
    import ctranslate2

    return ctranslate2.__version__


# ----------------------------------------------------------------------------- the converted cache


def cache_folder(checkpoint: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> Path:
    checkpoint = Path(checkpoint)
    if not cache_dir:
        return checkpoint.parent / f"{checkpoint.name}.ct2"
    # one folder for many models: checkpoints of the same name (checkpoint_best.pt) kept apart by their path
    where = hashlib.sha256(str(checkpoint.resolve()).encode()).hexdigest()[:12]
    return Path(cache_dir) / f"{checkpoint.name}-{where}.ct2"


def _source_hashes(files: ModelFiles) -> dict:
    return {"checkpoint": file_sha256(files.checkpoint), "src_dict": file_sha256(files.src.dict),
            "tgt_dict": file_sha256(files.tgt.dict)}


def cache_problem(folder: Path, sources: dict) -> str | None:
    """Why a converted cache cannot be used (None: it can): missing, stale or corrupt."""
    import ctranslate2

    marker = folder / MARKER
    if not folder.is_dir():
        return "missing"
    if not marker.is_file():
        return "corrupt (no marker: a conversion that did not finish)"
    try:
        saved = json.loads(marker.read_text(encoding="utf-8"))
        converted_from, hashes = saved["from"], saved["files"]
    except (ValueError, KeyError, TypeError) as e:
        return f"corrupt (unreadable {MARKER}: {e})"
    if saved.get("format") != MARKER_FORMAT:
        return "stale (converted by an earlier version, without the checkpoint's facts)"
    if converted_from != sources:
        changed = [k for k in sources if converted_from.get(k) != sources[k]]
        return f"stale ({', '.join(changed)} changed since it was converted)"
    if saved.get("ctranslate2") != ctranslate2.__version__:
        return f"stale (converted with CTranslate2 {saved.get('ctranslate2')}, this is {ctranslate2.__version__})"
    for name, digest in hashes.items():
        path = folder / name
        if not path.is_file():
            return f"corrupt ({name} is missing)"
        if file_sha256(path) != digest:
            return f"corrupt ({name} does not match its hash)"
    return None


def conversion_folder(out: Path) -> Path:
    """A temporary folder beside `out` for a conversion, renamed into place when it is done; one message where
    that folder cannot be written."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as e:
        raise UserError(f"cannot write the converted model to {out.parent} ({e.strerror}): "
                        f"give translator.cache_dir=DIR, a folder that can be written") from None


def convert_checkpoint(files: ModelFiles, cache_dir: str | os.PathLike | None = None, valid: bool = False) -> Path:
    """The CTranslate2 model of a fairseq checkpoint: the valid cache, or a fresh conversion (`valid`: the cache
    was just checked)."""
    ctranslate2 = _import_ctranslate2()
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


def read_marker(folder: Path) -> dict:
    return json.loads((folder / MARKER).read_text(encoding="utf-8"))


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


def save_fidelity(folder: Path, key: str, record: dict) -> None:
    """A fidelity record into the marker (the converted files and their hashes unchanged)."""
    from repair.fileio import write_json_atomic

    marker = read_marker(folder)
    marker.setdefault("fidelity", {})[key] = record
    try:
        write_json_atomic(folder / MARKER, marker)
    except OSError as e:  # a cache that cannot be written (a shared model): measured again next time
        logger.warning("could not keep the fidelity record in %s (%s): it is measured again next time",
                       folder / MARKER, e.strerror or e)


def agreement(outputs: Sequence[str], reference: Sequence[str]) -> dict:
    """Share of identical translations and BLEU against the reference's (sacrebleu, tok zh)."""
    import sacrebleu

    same = sum(a == b for a, b in zip(outputs, reference))
    return {"identical": round(same / max(1, len(reference)), 4),
            "bleu": round(sacrebleu.corpus_bleu(list(outputs), [list(reference)], tokenize="zh").score, 2)}


def _reasons(error: ValueError) -> str:
    """The converter's reasons ('Option --activation-fn tanh is not supported'), on one line."""
    lines = [line[2:] for line in str(error).splitlines() if line.startswith("- ")]
    return "; ".join(lines) if lines else str(error).strip()[:300]


# ----------------------------------------------------------------------------- an already converted model


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


# ----------------------------------------------------------------------------- the translator


class CTranslate2Translator(Translator):
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
        ctranslate2 = _import_ctranslate2()
        if beam < 1 or max_tokens < 1 or max_len < 1:
            raise UserError(f"translator: beam ({beam}), max_tokens ({max_tokens}) and max_len ({max_len}) must be positive")
        if not 0 <= float(min_identical) <= 1:
            raise UserError(f"translator.min_identical={min_identical}: a share between 0 and 1 (e.g. 0.98)")
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
        self.src_codec, self.tgt_codec = Codec(files.src), Codec(files.tgt)
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

    def _begin_fidelity(self, marker: dict, sample, compute_type: str | None) -> None:
        """The compute type from the converted model's fidelity record for these settings, else measured on
        `sample`, else on the first texts translated (a compute type given is loaded meanwhile)."""
        if self.fidelity_key in marker.get("fidelity", {}):
            self._use(marker["fidelity"][self.fidelity_key])
        elif sample is not None:
            self._use(self.check_fidelity(sample))
        else:
            self._pending = True
            if compute_type:
                self._load(compute_type)

    def _place(self, ctranslate2, device: str, threads: int | None, workers: int | None,
               compute_type: str | None) -> None:
        """Device, compute types offered there, workers and threads."""
        given = device
        if device == "auto":
            device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
        if device.startswith("cuda") and ctranslate2.get_cuda_device_count() == 0:
            raise UserError(f"translator device={device}, but CTranslate2 sees no CUDA device")
        self.kind, _, index = device.partition(":")
        self._index = int(index or 0)
        if self.kind == "cuda" and not self._computes_on_gpu(ctranslate2, given):
            self.kind, self._index, device = "cpu", 0, "cpu"
        self.device = device
        self.supported = ctranslate2.get_supported_compute_types(self.kind)
        if compute_type and compute_type not in self.supported and compute_type not in ("default", "auto"):
            raise UserError(f"translator.compute_type={compute_type}: not offered on {self.kind} "
                            f"(offered: {', '.join(sorted(self.supported))})")
        self._explicit = compute_type
        if workers is not None and int(workers) < 1:
            raise UserError(f"translator: workers ({workers}) must be at least 1")
        cores = int(threads) if threads else (os.cpu_count() or 1)
        # On CPU one thread per batch, as many batches at once as cores (on 2 cores, 2 workers of one thread
        # translated 3x as fast as one of two threads: README); on GPU one batch at a time.
        self.workers = int(workers) if workers else (cores if self.kind == "cpu" else 1)
        self.threads = max(1, cores // self.workers)

    def _computes_on_gpu(self, ctranslate2, given: str) -> bool:
        """Whether CTranslate2 computes on the GPU it sees: its Linux wheels load CUDA 12's cuBLAS only when they
        first compute (a machine with CUDA 13 alone loads the model, then fails to translate). One text of one
        token tells. With device=auto a GPU it cannot use means the CPU, with a warning; named, a clear error."""
        def first_line(e: Exception) -> str:
            return str(e).splitlines()[0][:300] if str(e) else type(e).__name__

        why = GPU_TRIED.get(self._index, "untried")
        if why == "untried":
            try:
                probe = ctranslate2.Translator(str(self.model_path), device="cuda", device_index=self._index)
            except (RuntimeError, ValueError, OSError) as e:  # this model there: not kept for others
                why = first_line(e)
            else:
                try:
                    probe.translate_batch([["."]], max_decoding_length=1)
                    why = None
                except (RuntimeError, ValueError, OSError) as e:
                    why = first_line(e)
                GPU_TRIED[self._index] = why  # the machine's libraries: the same for any model, once per process
        if why is not None:
            if given == "auto":
                logger.warning("CTranslate2 sees a GPU but cannot translate on it (%s): translating on the CPU "
                               "(translator.device=cpu says so without trying)", why)
                return False
            raise UserError(f"translator.device={given}: CTranslate2 cannot translate on the GPU ({why}). Its wheels "
                            f"need CUDA 12's cuBLAS (e.g. pip install nvidia-cublas-cu12, on LD_LIBRARY_PATH); or "
                            f"translator.device=cpu")
        return True

    def _load(self, compute_type: str) -> None:
        import ctranslate2

        try:
            self.model = ctranslate2.Translator(
                str(self.model_path), device=self.kind, device_index=self._index, compute_type=compute_type,
                inter_threads=self.workers, intra_threads=self.threads if self.kind == "cpu" else 0)
        except (RuntimeError, ValueError) as e:
            raise UserError(f"{self.model_path}: CTranslate2 cannot load this model "
                            f"({str(e).splitlines()[0][:300]})") from None
        self.compute_type = compute_type
        # fairseq's end of the search at the output cap costs a search with patience 2 and scores; worth it
        # where the translations are to be fairseq's (float32), not where the weights are approximate anyway
        self.fairseq_cap = compute_type == "float32" if self._fairseq_cap is None else bool(self._fairseq_cap)

    # ------------------------------------------------------------------ fidelity

    @property
    def fidelity_key(self) -> str:
        """What a fidelity record holds for: the device and the decoding settings."""
        return (f"{self.kind} beam={self.beam} len_penalty={self.len_penalty} max_len={self.max_len} "
                f"max_len_a={self.max_len_a} max_len_b={self.max_len_b} fairseq_cap={self._fairseq_cap}")

    def candidates(self) -> list[str]:
        return [c for c in CANDIDATES.get(self.kind, ("float32",)) if c in self.supported]

    def check_fidelity(self, texts: Sequence[str]) -> dict:
        """Up to SAMPLE of `texts` translated with fairseq (float32, the same decoding settings) and with each
        candidate compute type; their agreement, kept in the converted model's marker and returned."""
        from repair.nmt.fairseq.translator import FairseqTranslator

        sample = self.fidelity_sample(texts)
        fairseq = FairseqTranslator(files=self.files, beam=self.beam, max_len=self.max_len, max_len_a=self.max_len_a,
                                    max_len_b=self.max_len_b, len_penalty=self.len_penalty, device=self.kind,
                                    fp16=False, threads=self.workers * self.threads)
        reference = fairseq.translate(sample)
        del fairseq
        return self.measure_types(sample, reference)

    def fidelity_sample(self, texts: Sequence[str]) -> list[str]:
        """The fidelity check's texts: the first SAMPLE distinct non-empty ones, cleaned."""
        sample = [t for t in dict.fromkeys(clean_text(t or "") for t in texts) if t][:SAMPLE]
        logger.info("fidelity of %s's compute types: %d texts with %s and %s", self.model_path, len(sample),
                    self.against, ", ".join(self.candidates()))
        return sample

    def measure_types(self, sample: list[str], reference: list[str]) -> dict:
        """Each candidate compute type's translations of `sample` against `reference` (the model's own translator's,
        float32): agreement and seconds, kept in the converted model's marker and returned."""
        import time

        results = {}
        for compute_type in self.candidates():
            self._load(compute_type)
            start = time.perf_counter()
            outputs = self._translate(sample)
            results[compute_type] = {**agreement(outputs, reference), "seconds": round(time.perf_counter() - start, 3)}
        record = {"sample": len(sample), "reference": f"{self.against} float32 on {self.kind}", "candidates": results}
        save_fidelity(self.model_path, self.fidelity_key, record)
        return record

    def _use(self, record: dict) -> None:
        """The compute type to use, from a fidelity record: the one given, else the fastest at or above the bar."""
        measured = record["candidates"]
        if self._explicit:
            compute_type, how = self._explicit, "given (translator.compute_type)"
        else:
            passing = [c for c in self.candidates() if c in measured and measured[c]["identical"] >= self.min_identical]
            compute_type = passing[0] if passing else max(measured, key=lambda c: measured[c]["identical"])
            how = "the fastest at or above translator.min_identical" if passing else "none reached min_identical: the closest"
        figures = measured.get(compute_type)
        self.fidelity = {"checked": figures is not None, "compute_type": compute_type, "chosen": how,
                         "against": self.against,
                         "min_identical": self.min_identical, "sample": record["sample"],
                         **({"identical": figures["identical"], "bleu_vs_fairseq": figures["bleu"]} if figures else {}),
                         "candidates": measured}
        if figures is None:
            logger.warning("CTranslate2 compute type %s: fidelity unchecked (measured: %s)", compute_type,
                           ", ".join(measured))
        else:
            below = figures["identical"] < self.min_identical
            (logger.warning if below else logger.info)("CTranslate2 %s%s", fidelity_line(self.fidelity),
                                                       f"; below translator.min_identical={self.min_identical}" if below else "")
        self._load(compute_type)

    def describe(self) -> dict:
        return {"name": self.name, "compute_type": self.compute_type, "fidelity": self.fidelity}

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
        """CTranslate2 has no lexical constraints: fairseq searches on the checkpoint this model was converted from."""
        why = self.why_no_search()
        if why:
            return None, why
        from repair.nmt.fairseq.ondemand import FairseqOnDemand, ct2_scores

        def build():
            from repair.nmt.fairseq.translator import FairseqTranslator

            return FairseqTranslator(files=self.files, beam=beam, device=self.device, threads=self.threads * self.workers)

        # fairseq loaded when a search is asked for; scores from this model where it computes as fairseq (float32)
        scorer = (lambda sources, targets: ct2_scores(self, sources, targets)) if self.compute_type == "float32" else None
        return FairseqOnDemand(build, scorer), f", fairseq on the {self.name} model's checkpoint"

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

    def translate(self, texts: list[str]) -> list[str]:
        if isinstance(texts, str):
            raise TypeError("translate() takes a list of texts")
        if self._pending and any(clean_text(t or "") for t in texts):  # the first texts are the sample
            self._pending = False
            self._use(self.check_fidelity(texts))
        return self._translate(texts)

    def _translate(self, texts: Sequence[str]) -> list[str]:
        out = [""] * len(texts)
        cleaned = [clean_text(t or "") for t in texts]
        todo = [i for i, t in enumerate(cleaned) if t]
        tokens = [self.source_prefix + line.split() for line in self.src_codec.encode_all([cleaned[i] for i in todo])]
        if self.max_source_positions is not None:
            limit = self.max_source_positions - 1  # the converted model adds the end token
            cut = sum(len(t) > limit for t in tokens)
            if cut:
                logger.warning("%d text(s) longer than the model's %d source positions were truncated",
                               cut, self.max_source_positions)
                tokens = [t[:limit] for t in tokens]
        by_cap: dict[int, list[int]] = {}
        for k, cap in enumerate(self.caps([len(t) + 1 for t in tokens])):
            by_cap.setdefault(cap, []).append(k)
        tokens = [t + self._source_suffix for t in tokens]
        decide = self._fairseq_rule if self.fairseq_cap else self._own_rule
        for k, hypothesis in decide(tokens, by_cap).items():
            out[todo[k]] = self._text(hypothesis)
        return out

    def _own_rule(self, tokens: list[list[str]], by_cap: dict[int, list[int]]) -> dict[int, list[str]]:
        """CTranslate2's own stop at the cap: the best hypothesis of a search up to cap + 1 tokens, cut at the cap.
        One call per cap, all submitted before any is awaited: the workers take batches from every group."""
        calls = [(cap, group, self._first_search([tokens[k] for k in group], cap))
                 for cap, group in sorted(by_cap.items())]
        chosen = {}
        for cap, group, results in calls:
            for k, result in zip(group, results):
                hypothesis = result.result().hypotheses[0]
                chosen[k] = hypothesis[:-1] if self._ended(hypothesis) else hypothesis[:cap]
        return chosen

    def _penalties(self) -> dict:
        """The search's length penalty. At 0 CTranslate2 would end a search as soon as its best hypothesis ends,
        whatever the patience (it does so where the length and coverage penalties are both 0), unlike fairseq; a
        coverage penalty too small to change any score (NO_EARLY_EXIT times a sum of logs of attention weights, added
        to a score of order 1 in float32) keeps the search going as fairseq's does."""
        if self.len_penalty:
            return {"length_penalty": self.len_penalty}
        return {"length_penalty": 0.0, "coverage_penalty": NO_EARLY_EXIT}

    def _first_search(self, sources: list[list[str]], cap: int) -> list:
        """fairseq's search (patience 1: it ends once `beam` hypotheses ended) up to cap + 1 tokens: the best
        hypothesis."""
        return self.model.translate_batch(sources, beam_size=self.beam, **self._penalties(),
                                          max_decoding_length=cap + 1, return_end_token=True,
                                          **self._batching(sources))

    def _fairseq_rule(self, tokens: list[list[str]], by_cap: dict[int, list[int]]) -> dict[int, list[str]]:
        """fairseq's translations, its end of the search at the cap included, in one of two ways that give the same
        translations at different costs: a text that reaches the cap must be searched keeping every hypothesis
        (see _AtCap). Where few do (a model that ends its sentences), each text is searched as fairseq searches and
        those few again (`_cap_searched_again`); where many do (a model that repeats itself), every text is searched
        once keeping every hypothesis (`_one_search`), which costs a little more per text and spares the second
        searches. Which: by the share of this translator's texts so far that reached the cap (CAP_SHARE), the
        second way for its first call."""
        seen, reached = self._cap_counts
        # with beam 1 CTranslate2 searches greedily, ignoring patience: its list tells nothing, always the second way
        together = self.beam > 1 and (seen == 0 or reached >= CAP_SHARE * seen)
        chosen, at_cap = (self._one_search if together else self._cap_searched_again)(tokens, by_cap)
        with self._cap_lock:  # Purity's sentences are translated in a thread of their own meanwhile (begin)
            seen, reached = self._cap_counts
            self._cap_counts = (seen + len(tokens), reached + at_cap)
        logger.debug("fairseq's rule (%s): %d sources, %d reached the cap", "one search" if together else
                     "searched again at the cap", len(tokens), at_cap)
        return chosen

    def _cap_searched_again(self, tokens: list[list[str]], by_cap: dict[int, list[int]]) -> tuple[dict, int]:
        """Each source searched as fairseq searches (_first_search, up to cap + 1 tokens); one whose best hypothesis is
        still open there searched again up to the cap keeping every hypothesis, and decided as _AtCap says.
        Returns the hypotheses chosen and how many sources were searched again."""
        calls = [(cap, group, self._first_search([tokens[k] for k in group], cap))
                 for cap, group in sorted(by_cap.items())]
        chosen: dict[int, list[str]] = {}
        again = []
        for cap, group, results in calls:
            still_open = []
            for k, result in zip(group, results):
                hypothesis = result.result().hypotheses[0]
                if self._ended(hypothesis):
                    # Ended: fairseq's choice too (the same search and scores; one that ended at the cap beats
                    # every other hypothesis ended there by fairseq's forced end token, being better ranked).
                    chosen[k] = hypothesis[:-1]
                else:
                    still_open.append(k)
            if still_open:  # submitted while the next groups are still searched
                at_cap = [(k, _AtCap(tokens[k], cap)) for k in still_open]
                again.append((at_cap, self._search([c for _, c in at_cap], cap)))
        scoring = [(at_cap, self._score_open([c for _, c in at_cap], [r.result() for r in results]))
                   for at_cap, results in again]
        self._decide_at_cap(scoring, chosen)
        return chosen, sum(len(at_cap) for at_cap, _ in again)

    def _one_search(self, tokens: list[list[str]], by_cap: dict[int, list[int]]) -> tuple[dict, int]:
        """Each cap's sources searched with patience 2 up to the cap, every hypothesis returned (_search): this tells
        fairseq's choice for a source whose search ends before the cap, and gives the hypotheses open at the cap of
        one that reaches it, scored with the end token (_AtCap). A list cut by CTranslate2 that cannot tell
        (`_ended_before_cap`) is searched again as fairseq searches (_first_search: these end before the cap).
        Returns the hypotheses chosen and how many sources reached the cap."""
        calls = [(cap, group, self._search([_AtCap(tokens[k], cap) for k in group], cap))
                 for cap, group in sorted(by_cap.items())]
        chosen: dict[int, list[str]] = {}
        scoring, again = [], []
        for cap, group, results in calls:
            at_cap, unsure = [], []
            for k, result in zip(group, results):
                result = result.result()
                verdict, hypothesis = self._ended_before_cap(result)
                if verdict == "ended":
                    chosen[k] = hypothesis
                elif verdict == "cap":
                    at_cap.append((k, _AtCap(tokens[k], cap), result))
                else:
                    unsure.append(k)
            if at_cap:  # scored while the next groups are still searched
                scoring.append(([(k, c) for k, c, _ in at_cap],
                                self._score_open([c for _, c, _ in at_cap], [r for _, _, r in at_cap])))
            if unsure:
                again.append((cap, unsure, self._first_search([tokens[k] for k in unsure], cap)))
        late = []  # searched again, yet open at the cap: not expected (see _ended_before_cap), decided as at the cap
        for cap, group, results in again:
            for k, result in zip(group, results):
                hypothesis = result.result().hypotheses[0]
                if self._ended(hypothesis):
                    chosen[k] = hypothesis[:-1]
                else:
                    late.append((cap, k))
        if late:
            logger.warning("%d text(s) searched again as fairseq searches (patience 1) were still open at the output cap, "
                           "which the search with patience 2 had ruled out (CTranslate2 %s did not search as this "
                           "translator assumes); each is decided by fairseq's rule at the cap", len(late),
                           _ctranslate2_version())
        for cap, k in late:
            c = _AtCap(tokens[k], cap)
            scoring.append(([(k, c)], self._score_open([c], [r.result() for r in self._search([c], cap)])))
        self._decide_at_cap(scoring, chosen)
        return chosen, sum(len(group) for group, _ in scoring)

    def _ended_before_cap(self, result) -> tuple[str, list[str] | None]:
        """What fairseq's search (patience 1) of a source chooses, told from CTranslate2's search with patience 2 up
        to the cap (the same steps, going on until 2 * beam hypotheses ended; all returned, best first, up to
        2 * beam): ("ended", its hypothesis) where it ends before the cap, ("cap", None) where it reaches the cap,
        ("unsure", None) where the list was cut and the dropped hypotheses could change the choice.

        A hypothesis of n tokens (the end token included) ended at step n - 1; fairseq stops at the first step s*
        by which `beam` have ended and chooses the best ended by then. A whole list (under 2 * beam) tells s*. A cut
        list holds the best 2 * beam: the dropped ones score below all of them and ended at most at the last step
        t; fewer than n of them ended before t, n being the listed ones that ended at t (else the search had stopped
        before t). So the best listed hypothesis ended by the step where `beam` of the listed had ended is fairseq's
        choice when fewer than `beam` can have ended before it: those listed plus n - 1."""
        listed = list(zip(result.scores, result.hypotheses))
        ended = [len(h) - 1 for _, h in listed if self._ended(h)]
        if len(listed) < 2 * self.beam:
            if len(ended) < self.beam:
                return "cap", None
            stop = sorted(ended)[self.beam - 1]
            return "ended", next(h[:-1] for _, h in listed if self._ended(h) and len(h) - 1 <= stop)
        steps = [len(h) - 1 for _, h in listed]
        last = max(steps)
        stop = sorted(steps)[self.beam - 1]  # before `last`: at most `beam` end at a step
        best = next(h for _, h in listed if len(h) - 1 <= stop)
        if self._ended(best) and sum(s < len(best) - 1 for s in steps) + steps.count(last) <= self.beam:
            return "ended", best[:-1]
        return "unsure", None

    def _decide_at_cap(self, scoring: list, chosen: dict[int, list[str]]) -> None:
        """The sources at the cap, their open hypotheses being scored: each one's best; those a hypothesis fairseq
        keeps open and CTranslate2 did not return could beat searched one step further (_search_one_more_step)."""
        undecided = []
        for group, scored in scoring:
            self._take_scores(scored)
            undecided += [(k, c) for k, c in group if c.bound > c.score]
            for k, c in group:
                chosen[k] = c.hypothesis
        if undecided:
            self._search_one_more_step([c for _, c in undecided])
            for k, c in undecided:
                chosen[k] = c.hypothesis
            unsure = sum(c.bound > c.score for _, c in undecided)
            if unsure:
                logger.info("%d translation(s) reaching the output cap may differ from fairseq's: a hypothesis "
                            "fairseq keeps open there is not among those CTranslate2 returns", unsure)

    def _ended(self, hypothesis: Sequence[str]) -> bool:
        """Whether a hypothesis (returned with its end token) ended, rather than stopping open at the search's last step."""
        return bool(hypothesis) and hypothesis[-1] == self._end

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

    # Sources whose best hypothesis is still open at the cap (see _AtCap).

    def _search(self, at_cap: list[_AtCap], cap: int, steps: int = 0) -> list:
        """The search again, up to cap + steps tokens, returning every hypothesis (patience 2: the same
        search, none dropped from the results), with scores."""
        if cap + steps == 0:
            return [_NoResult() for _ in at_cap]
        return self.model.translate_batch(
            [c.source for c in at_cap], beam_size=self.beam, patience=2, num_hypotheses=2 * self.beam,
            **self._penalties(), max_decoding_length=cap + steps, return_end_token=True,
            return_scores=True, **self._batching([c.source for c in at_cap]))

    def _score_open(self, at_cap: list[_AtCap], results: list) -> list:
        """Candidates from a search up to the cap: ended ones as they are, open ones scored with the end token
        (those that can beat the best ended one), being scored; a bound on what fairseq may keep open besides."""
        for c, result in zip(at_cap, results):
            shrink = (c.cap / (c.cap + 1)) ** self.len_penalty
            hypotheses = list(zip(result.scores, result.hypotheses))
            for score, hypothesis in hypotheses:
                if self._ended(hypothesis):
                    c.offer(score, hypothesis[:-1])
            # An open hypothesis's score grows at most from over cap ** len_penalty to over (cap + 1) ** len_penalty
            # once the end token's log probability (<= 0) is added.
            for score, hypothesis in hypotheses:
                if not self._ended(hypothesis) and score * shrink > c.score:
                    c.to_score.append(hypothesis)
            last = [(score, h) for score, h in hypotheses if len(h) == c.cap]  # the best `beam` of the last step
            c.open = {tuple(h) for _, h in last if not self._ended(h)}
            if len(c.open) < len(last):
                # fairseq keeps as many runners-up open as hypotheses ended there, which CTranslate2 does not
                # return; ranked below all of the last step's best, they score at most its worst with the end token.
                c.bound = min(score for score, _ in last) * shrink
        return self._score_batch(at_cap)

    def _score_batch(self, at_cap: list[_AtCap]) -> list:
        pairs = [(c, h) for c in at_cap for h in c.to_score if tuple(h) not in c.scored]
        for c in at_cap:
            c.scored.update(tuple(h) for h in c.to_score)
            c.to_score = []
        if not pairs:
            return []
        sources, targets = [c.source for c, _ in pairs], [h for _, h in pairs]
        size = max(1, SCORE_TOKENS // (max(map(len, targets)) + 1))
        results = self.model.score_batch(sources, targets, max_batch_size=size, batch_type="examples",
                                         asynchronous=True)
        return [(c, h, r) for (c, h), r in zip(pairs, results)]

    def _take_scores(self, scored: list) -> None:
        for c, hypothesis, result in scored:
            c.offer(sum(result.result().log_probs) / (c.cap + 1) ** self.len_penalty, hypothesis)

    def _search_one_more_step(self, at_cap: list[_AtCap]) -> None:
        """Undecided sources: searched to cap + 1 tokens, where CTranslate2 returns the best `beam` continuations
        of all hypotheses fairseq keeps open at the cap: those ended are fairseq's candidates as they are, the
        others' first cap tokens are scored with the end token."""
        for cap in sorted({c.cap for c in at_cap}):
            group = [c for c in at_cap if c.cap == cap]
            for c, result in zip(group, self._search(group, cap, steps=1)):
                result = result.result()
                last = []
                for score, hypothesis in zip(result.scores, result.hypotheses):
                    if self._ended(hypothesis):
                        c.offer(score, hypothesis[:-1])
                    elif hypothesis[:cap] not in c.to_score:
                        c.to_score.append(hypothesis[:cap])
                    if len(hypothesis) == cap + 1:
                        last.append(score)
                        c.open.add(tuple(hypothesis[:cap]))
                if len(c.open) == self.beam:  # all hypotheses fairseq keeps open at the cap: seen
                    c.bound = -math.inf
                elif last:  # one with no continuation among these scores at most their worst with the end token
                    c.bound = min(c.bound, min(last))
            self._take_scores(self._score_batch(group))


class _AtCap:
    """A source whose best hypothesis is still open at its cap. After `cap` tokens fairseq allows only the
    end token: each hypothesis still open is ended, scored with the end token's log probability, normalized by
    its length with the end token (cap + 1) and compared with those that ended before. CTranslate2 instead
    takes the best `beam` of all continuations at its last step. So the source is searched up to `cap` tokens
    keeping every hypothesis (_search), the open hypotheses are scored with the end token (score_batch includes
    it) and the best of all, as fairseq's finalize scores them, is its translation. `bound`: the best score a hypothesis fairseq kept
    open and CTranslate2 did not return can have (-inf: none)."""

    def __init__(self, source: list[str], cap: int):
        self.source, self.cap = source, cap
        self.score, self.hypothesis, self.bound = -math.inf, [], -math.inf
        self.to_score: list[list[str]] = []
        self.scored: set[tuple[str, ...]] = set()
        self.open: set[tuple[str, ...]] = set()  # hypotheses open at the cap seen so far

    def offer(self, score: float, hypothesis: list[str]) -> None:
        if score > self.score:
            self.score, self.hypothesis = score, hypothesis


class _NoResult:
    """The result of a search of no step (a cap of 0 tokens)."""

    scores: list = []
    hypotheses: list = []

    def result(self) -> "_NoResult":
        return self
