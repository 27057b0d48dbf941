"""Backends compared on the same texts (`python -m repair.bench translate --backends`, and repair.bench.hf's
transformers vs CTranslate2): their speed, interleaved in rounds, and their agreement with the first."""

from __future__ import annotations

import logging
import statistics
import time

logger = logging.getLogger("repair.bench.translate")


def compare_backends(translators: dict, texts: list[str], rounds: int = 3) -> dict:
    """Every backend translates all texts in one batched call per round, in turn within each round
    (interleaved, so a shared machine's ups and downs weigh on all alike); per backend the median
    round gives per_s, and the others are compared with the first (fairseq): ratio of per_s, share of
    identical outputs and BLEU of their outputs against fairseq's (sacrebleu, tok:zh)."""
    import sacrebleu

    runs: dict = {name: [] for name in translators}
    outputs: dict = {}
    for r in range(max(1, rounds)):
        for name, translator in translators.items():
            start = time.perf_counter()
            outputs[name] = translator.translate(texts)
            runs[name].append(time.perf_counter() - start)
        logger.info("round %d: %s", r + 1, ", ".join(f"{n} {runs[n][-1]:.2f} s" for n in translators))
    reference = next(iter(translators))
    figures: dict = {}
    for name in translators:
        seconds = statistics.median(runs[name])
        f = {"per_s": round(len(texts) / seconds, 2), "seconds": round(seconds, 2),
             "runs_s": [round(x, 2) for x in runs[name]]}
        if name != reference:
            f["ratio"] = round(f["per_s"] / figures[reference]["per_s"], 2)
            f["identical"] = round(sum(a == b for a, b in zip(outputs[name], outputs[reference])) / len(texts), 4)
            f["bleu_vs_fairseq"] = round(sacrebleu.corpus_bleu(outputs[name], [outputs[reference]], tokenize="zh").score, 2)
        figures[name] = f
    return figures
