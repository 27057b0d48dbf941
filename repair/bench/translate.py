"""`python -m repair.bench translate`: in-process batched translation against one text per call.

Translates 500 English texts with a small fairseq model in one batched call and one text per call
(the way a web API is called), interleaved in rounds (see `measure`), and prints as its last line
JSON with batched_per_s, single_per_s and ratio.

Without --checkpoint it builds its own small model once, outside the repository: Tatoeba's
English-Chinese pairs (../shared/data/tatoeba-cmn-eng/cmn.txt) are split into train / valid /
500 held-out test texts under --workdir (default /tmp/repair-bench-translate), prepared, and
transformer_tiny is trained on them for --epochs. Rerunning reuses it.

`--model transformer_wmt18 --random-weights` measures the paper's big architecture instead, as
initialised (one training update on the same data, so that fairseq writes a checkpoint of its
own format): random weights are fine for speed, not for the translations, which run to the
length cap. Meant for a GPU, where it decodes in fp16.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import statistics
import sys
import time
from pathlib import Path

from repair.bench.compare import compare_backends
from repair.bench.hf import add_arguments as add_transformers_arguments
from repair.errors import UserError

REPO = Path(__file__).resolve().parents[2]
TATOEBA = REPO.parent / "shared" / "data" / "tatoeba-cmn-eng" / "cmn.txt"
MODEL_CONFIGS = REPO / "conf" / "model"

logger = logging.getLogger(__name__)


def tatoeba_pairs(path: Path) -> list[tuple[str, str]]:
    from repair.fileio import read_text_lines

    pairs = []
    for n, line in enumerate(read_text_lines(path), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise UserError(f"{path}:{n}: expected English<TAB>Chinese<TAB>attribution")
        pairs.append((fields[0].strip(), fields[1].strip()))
    return pairs


def model_config(name: str) -> dict:
    """conf/model/<name>.yaml as a plain dict."""
    from omegaconf import OmegaConf

    from repair.nmt.fairseq.train import load_model_file

    path = MODEL_CONFIGS / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in MODEL_CONFIGS.glob("*.yaml"))
        raise UserError(f"--model {name}: no {path}; known: {known}")
    return OmegaConf.to_container(load_model_file(path), resolve=True)


def build_model(workdir: Path, source: Path, *, n_test: int, epochs: int, model: str = "transformer_tiny",
                random_weights: bool = False, device: str = "auto") -> tuple[Path, Path, list[str]]:
    """A prepared data folder and a trained small model under workdir; returns (checkpoint, data_dir, test texts)."""
    from repair.data.prepare import prepare_data
    from repair.nmt.fairseq.train import train_model

    data = workdir / "data"
    raw = data / "raw"
    if not (raw / "test.en").is_file():
        pairs = tatoeba_pairs(source)
        random.Random(0).shuffle(pairs)
        splits = {"test": pairs[:n_test], "valid": pairs[n_test:n_test + 500], "train": pairs[n_test + 500:]}
        raw.mkdir(parents=True, exist_ok=True)
        for split, rows in splits.items():
            for i, lang in enumerate(("en", "zh")):
                (raw / f"{split}.{lang}").write_text("".join(r[i] + "\n" for r in rows), encoding="utf-8")
    prepare_data(data, vocab_size=4000)
    cfg = model_config(model)
    start = time.time()
    if random_weights:
        # One small update: fairseq writes its checkpoint; the weights stay as initialised (warm-up lr).
        checkpoint = train_model(data, workdir / "checkpoints" / f"{cfg['name']}-random", cfg, max_update=1,
                                 device=device, extra_options={"update_freq": 1, "max_tokens": 1024})
    else:
        checkpoint = train_model(data, workdir / "checkpoints" / cfg["name"], cfg, max_epoch=epochs, device=device)
    logger.info("model ready in %.0f s: %s", time.time() - start, checkpoint)
    texts = (raw / "test.en").read_text(encoding="utf-8").splitlines()
    return checkpoint, data, texts


def measure(translator, texts: list[str], rounds: int = 5) -> dict:
    """Batched and one-text-per-call timings, interleaved so that both see the same machine.

    Each of `rounds` rounds translates all texts in one batched call, then one share of the
    texts one per call (every text once over all rounds). A shared machine that slows down or
    speeds up during the run then weighs on both sides alike. The batched time is the median
    round; the single time is the sum over all texts.
    """
    from tqdm import tqdm

    rounds = max(1, min(rounds, len(texts)))
    shares = [texts[r::rounds] for r in range(rounds)]
    batched_runs, single_runs, batched, single = [], [], None, [None] * len(texts)
    progress = tqdm(total=len(texts), desc="one text per call", unit="text", file=sys.stderr)
    for r, share in enumerate(shares):
        start = time.perf_counter()
        batched = translator.translate(texts)
        batched_runs.append(time.perf_counter() - start)
        start = time.perf_counter()
        for k, text in enumerate(share):
            single[r + k * rounds] = translator.translate([text])[0]
            progress.update()
        single_runs.append(time.perf_counter() - start)
    progress.close()
    batched_s, single_s = statistics.median(batched_runs), sum(single_runs)
    logger.info("batched: %d texts in %s s (median %.2f s, %.1f texts/s)", len(texts),
                " / ".join(f"{r:.2f}" for r in batched_runs), batched_s, len(texts) / batched_s)
    same = sum(a == b for a, b in zip(batched, single))
    return {
        "texts": len(texts),
        "rounds": rounds,
        "batched_s": round(batched_s, 2),
        "batched_runs_s": [round(r, 2) for r in batched_runs],
        "single_s": round(single_s, 2),
        "single_runs_s": [round(r, 2) for r in single_runs],
        "batched_per_s": round(len(texts) / batched_s, 2),
        "single_per_s": round(len(texts) / single_s, 2),
        "ratio": round(single_s / batched_s, 2),
        "identical_translations": same,
    }


def parse_backends(spec: str, compute_type: str | None) -> list[tuple[str, str | None]]:
    """`fairseq,ctranslate2,ctranslate2:float32` -> [(fairseq, None), (ctranslate2, int8), ...]."""
    out = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, compute = item.partition(":")
        if name not in ("fairseq", "ctranslate2"):
            raise UserError(f"--backends: unknown backend {name!r} (fairseq, ctranslate2[:COMPUTE_TYPE])")
        out.append((name, (compute or compute_type) if name == "ctranslate2" else None))
    if not out or out[0][0] != "fairseq":
        raise UserError("--backends: start with fairseq, the reference the others are compared with")
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m repair.bench translate", description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", type=Path, help="a fairseq checkpoint (default: build a small one from Tatoeba), or a "
                   "transformers model folder (repair.bench.hf: transformers vs CTranslate2, LoRA vs all weights)")
    p.add_argument("--data-dir", type=Path, help="prepared data folder of --checkpoint (spm/, bin/dict.*.txt)")
    p.add_argument("--texts", type=Path, help="English texts, one per line (default: 500 held-out Tatoeba texts)")
    p.add_argument("-n", type=int, default=500, help="number of texts (default 500)")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/repair-bench-translate"))
    p.add_argument("--source", type=Path, default=TATOEBA, help="Tatoeba cmn.txt")
    p.add_argument("--epochs", type=int, default=4, help="training epochs of the small model (default 4)")
    p.add_argument("--model", default="transformer_tiny",
                   help="conf/model/NAME.yaml to build when no --checkpoint is given (default transformer_tiny)")
    p.add_argument("--random-weights", action="store_true",
                   help="do not train: measure the architecture as initialised (for speed only)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=12000, help="source tokens per batch (default 12000)")
    p.add_argument("--max-sentences", type=int, default=512, help="texts per batch (default 512)")
    p.add_argument("--max-len", type=int, default=200)
    p.add_argument("--threads", type=int, default=2,
                   help="CPU threads (default 2, the cores of a small machine; 1 where the cores are shared with other work)")
    p.add_argument("--workers", type=int, default=None,
                   help="batches decoded at once on CPU, sharing --threads (default: fairseq 2 when threads >= 2, CTranslate2 one per thread)")
    p.add_argument("--device", default="auto")
    p.add_argument("--rounds", type=int, default=5,
                   help="rounds of one batched call and a share of the single calls, interleaved (default 5)")
    p.add_argument("--backends", default=None,
                   help="compare backends instead, batched, on the same texts: fairseq,ctranslate2[:COMPUTE_TYPE],... "
                        "(ctranslate2 alone: --compute-type)")
    p.add_argument("--compute-type", default=None,
                   help="CTranslate2 compute type for a backend without one (default: the fastest whose translations "
                        "are at least 98%% fairseq's, measured once per conversion)")
    add_transformers_arguments(p)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    if args.checkpoint is not None and (args.checkpoint / "config.json").is_file():
        run_transformers(args)
        return

    import torch

    from repair.nmt.fairseq.translator import FairseqTranslator

    if args.checkpoint is None:
        if not args.source.is_file():
            print(f"skipped: {args.source} is absent (give --checkpoint, --data-dir and --texts instead)")
            return
        threads_before = torch.get_num_threads()
        torch.set_num_threads(1)  # training: see conf/model/transformer_tiny.yaml
        checkpoint, data_dir, texts = build_model(args.workdir, args.source, n_test=args.n, epochs=args.epochs,
                                                 model=args.model, random_weights=args.random_weights,
                                                 device=args.device)
        torch.set_num_threads(threads_before)
    else:
        if args.data_dir is None:
            raise UserError("--checkpoint needs --data-dir (the folder with spm/ and bin/dict.*.txt it was trained with)")
        checkpoint, data_dir = args.checkpoint, args.data_dir
        texts = []
    if args.texts is not None:
        from repair.fileio import read_text_lines

        texts = [t for t in read_text_lines(args.texts) if t.strip()]
    if not texts:
        raise UserError("no texts to translate: give --texts FILE")
    texts = texts[: args.n]

    if args.backends:
        run_backends(args, checkpoint, data_dir, texts)
        return
    translator = FairseqTranslator(checkpoint, data_dir, beam=args.beam, max_tokens=args.max_tokens,
                                   max_sentences=args.max_sentences, max_len=args.max_len,
                                   device=args.device, threads=args.threads, workers=args.workers)
    translator.translate(texts[:8])  # warm-up: first-call allocations are not what is measured
    figures = measure(translator, texts, rounds=args.rounds)
    figures.update({"beam": args.beam, "max_tokens": args.max_tokens, "max_sentences": args.max_sentences,
                    "threads": args.threads, "workers": translator.workers, "threads_per_worker": torch.get_num_threads(),
                    "device": str(translator.device), "checkpoint": str(checkpoint)})
    print(f"{'texts':>8} {'batched/s':>10} {'single/s':>10} {'ratio':>7}  beam {args.beam}, {translator.workers} worker(s) x {figures['threads_per_worker']} thread(s), {figures['device']}")
    print(f"{figures['texts']:>8} {figures['batched_per_s']:>10} {figures['single_per_s']:>10} {figures['ratio']:>7}")
    print(json.dumps(figures))


def run_transformers(args) -> None:
    """--checkpoint names a transformers folder: repair.bench.hf on --texts (else Tatoeba's last -n English
    sentences) and Tatoeba's first --ft-pairs pairs."""
    from repair.bench import hf
    from repair.fileio import read_text_lines

    pairs = tatoeba_pairs(args.source) if args.source.is_file() else []
    if args.texts is not None:
        texts = [t for t in read_text_lines(args.texts) if t.strip()][: args.n]
    else:
        texts = [en for en, _ in pairs[-args.n:]]
    if not texts:
        raise UserError(f"no texts to translate: give --texts FILE ({args.source} is absent)")
    if args.ft_pairs and len(pairs) < args.ft_pairs:
        raise UserError(f"--ft-pairs {args.ft_pairs}: {args.source} holds {len(pairs)} pairs (give --ft-pairs 0)")
    hf.run(args, texts, pairs[: args.ft_pairs])


def run_backends(args, checkpoint, data_dir, texts: list[str]) -> None:
    """--backends: each backend on the same model and texts; last line JSON, per backend."""
    from repair.nmt.fairseq.ct2 import CTranslate2Translator
    from repair.nmt.fairseq.translator import FairseqTranslator, load_model_files

    load = [round(x, 2) for x in os.getloadavg()]  # a shared machine: what else ran, as uptime says it
    files = load_model_files(checkpoint, data_dir)
    translators: dict = {}
    for name, compute in parse_backends(args.backends, args.compute_type):
        if name == "fairseq":
            t = FairseqTranslator(files=files, beam=args.beam, max_tokens=args.max_tokens,
                                  max_sentences=args.max_sentences, max_len=args.max_len, device=args.device,
                                  threads=args.threads, workers=args.workers)
        else:
            t = CTranslate2Translator(files=files, beam=args.beam, max_tokens=args.max_tokens, max_len=args.max_len,
                                      compute_type=compute, device=args.device, threads=args.threads,
                                      workers=args.workers, sample=texts)  # fidelity measured here, if not yet
            name = f"ctranslate2:{t.compute_type}"
        t.translate(texts[:8])  # warm-up
        translators[name] = t
    backends = compare_backends(translators, texts, rounds=args.rounds)
    print(f"{'backend':<22} {'texts/s':>9} {'ratio':>7} {'identical':>10} {'BLEU vs fairseq':>16}  beam {args.beam}, "
          f"{args.threads} thread(s), {len(texts)} texts, load average before {' '.join(map(str, load))}")
    for name, f in backends.items():
        print(f"{name:<22} {f['per_s']:>9} {f.get('ratio', 1.0):>7} {f.get('identical', 1.0):>10} "
              f"{f.get('bleu_vs_fairseq', 100.0):>16}")
    print(json.dumps({"texts": len(texts), "beam": args.beam, "threads": args.threads, "rounds": args.rounds,
                      "load_average_before": load,
                      "max_tokens": args.max_tokens, "checkpoint": str(checkpoint), "backends": backends}))
