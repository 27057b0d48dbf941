"""The translator both families run on CTranslate2 (repair.nmt.fairseq.ct2, repair.nmt.hf.ct2 subclass it): where it
runs (device, workers and threads, a GPU CTranslate2 cannot compute on), the model loaded with a compute type, and the
fidelity check that chooses the compute type.

Fidelity: CTranslate2's compute types other than float32 change a model's arithmetic (int8, int16 quantize its
weights), and how many translations change depends on the model and on the CPU's kernels. So once per cached
conversion (and device and decoding settings) a sample of texts (`sample`, or the first call's first SAMPLE texts) is
translated by the model's own translator (`against`: `reference_translations`) and with each candidate compute type
(CPU: int8, int16 where the CPU offers it, float32; GPU: int8_float16, float16, float32); each one's share of
translations identical to the reference and BLEU against them (sacrebleu, tok zh) are kept in the marker. Unless
`compute_type` is given, the fastest candidate with at least `min_identical` identical is used; a `compute_type` given
below that bar is used with a warning giving its agreement.

A subclass sets `model_path`, `beam`, `min_identical`, `_pending`, and gives `fidelity_key`, `reference_translations`
and `_translate`.
"""

from __future__ import annotations

import logging
import os
from typing import Sequence

from repair.data.prepare import clean_text
from repair.errors import UserError
from repair.face import Translator
from repair.nmt.ct2.cache import save_fidelity
from repair.purity.translators import fidelity_line

logger = logging.getLogger(__name__)

SAMPLE = 200  # texts translated by fairseq and each compute type to measure their agreement

# compute types tried, fastest first; each used only where CTranslate2 offers it on the device
CANDIDATES = {"cpu": ("int8", "int16", "float32"), "cuda": ("int8_float16", "float16", "float32")}
# GPU index -> why CTranslate2 cannot translate there (None: it can), found by one try per process
GPU_TRIED: dict[int, str | None] = {}


def agreement(outputs: Sequence[str], reference: Sequence[str]) -> dict:
    """Share of identical translations and BLEU against the reference's (sacrebleu, tok zh)."""
    import sacrebleu

    same = sum(a == b for a, b in zip(outputs, reference))
    return {"identical": round(same / max(1, len(reference)), 4),
            "bleu": round(sacrebleu.corpus_bleu(list(outputs), [list(reference)], tokenize="zh").score, 2)}



class CTranslate2Runtime(Translator):
    """A model converted for CTranslate2, placed, loaded and checked (see the module doc)."""

    name = "ctranslate2"
    against = "the model's own translator"  # whose translations the compute types are compared with

    @staticmethod
    def check_settings(beam: int, max_tokens: int, max_len: int, min_identical: float) -> None:
        """The decoding and fidelity keys every CTranslate2 translator takes, each in its range."""
        if beam < 1 or max_tokens < 1 or max_len < 1:
            raise UserError(f"translator: beam ({beam}), max_tokens ({max_tokens}) and max_len ({max_len}) must be "
                            f"positive")
        if not 0 <= float(min_identical) <= 1:
            raise UserError(f"translator.min_identical={min_identical}: a share between 0 and 1 (e.g. 0.98)")

    @property
    def fidelity_key(self) -> str:
        """What a fidelity record holds for: the device and the decoding settings."""
        raise NotImplementedError

    def reference_translations(self, sample: list[str]) -> list[str]:
        """`sample` translated by the model's own translator (float32, the same decoding settings)."""
        raise NotImplementedError

    def _translate(self, texts: Sequence[str]) -> list[str]:
        raise NotImplementedError

    def check_fidelity(self, texts: Sequence[str]) -> dict:
        """Up to SAMPLE of `texts` translated by the model's own translator and with each candidate compute type;
        their agreement, kept in the converted model's marker and returned."""
        sample = self.fidelity_sample(texts)
        return self.measure_types(sample, self.reference_translations(sample))

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
        self._loaded(compute_type)

    def _loaded(self, compute_type: str) -> None:
        """What a subclass settles once a compute type is loaded."""

    def candidates(self) -> list[str]:
        return [c for c in CANDIDATES.get(self.kind, ("float32",)) if c in self.supported]

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

    def translate(self, texts: list[str]) -> list[str]:
        if isinstance(texts, str):
            raise TypeError("translate() takes a list of texts")
        if self._pending and any(clean_text(t or "") for t in texts):  # the first texts are the sample
            self._pending = False
            self._use(self.check_fidelity(texts))
        return self._translate(texts)
