"""`python -m repair.bench translate --checkpoint FOLDER` on a transformers folder (a Marian / OPUS-MT model):

- translation: the transformers translator (the model's own `generate`) and CTranslate2 (the compute type its
  fidelity check chooses, and float32) on the same texts, batched, interleaved in rounds: texts/s and the share
  of translations identical to transformers';
- fine-tuning: the same pairs (Tatoeba's, or --pairs) fine-tuned as a LoRA adapter and with all weights, each in a
  process of its own: seconds, peak resident memory (the process's ru_maxrss, what it was once the libraries were
  imported, and the most resident memory the fine-tune added, sampled every 10 ms: on a tiny model the libraries are
  most of the peak), trained parameters and the size of what it writes.

The last line is JSON. `python -m repair.bench hf` (repair/bench/hf_opus.py) measures the same at OPUS-MT's size.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from repair.errors import UserError


FINETUNE = """
import json, os, resource, sys, threading, time
from repair.nmt.hf.finetune import finetune_model
from repair.nmt.hf.folder import model_files, resolve
args = json.loads(sys.argv[1])
pairs = [tuple(p) for p in args["pairs"]]
maxrss = lambda: round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
page = os.sysconf("SC_PAGE_SIZE") / 2**20
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * page
before, start_rss, peak, done = maxrss(), rss(), [0.0], threading.Event()
def watch():  # the resident memory the fine-tune adds (model, optimizer, activations), sampled every 10 ms
    while not done.wait(0.01):
        peak[0] = max(peak[0], rss() - start_rss)
threading.Thread(target=watch, daemon=True).start()
start = time.perf_counter()
r = finetune_model(model_files(resolve(args["folder"])), pairs, pairs[:40], args["out"], lr=1e-3, patience=100,
                   max_epoch=args["epochs"], adapter=args["adapter"], threads=args["threads"], device="cpu")
done.set()
print(json.dumps({"seconds": round(time.perf_counter() - start, 2), "trained_parameters": r["trained_parameters"],
                  "peak_rss_mb": maxrss(), "peak_rss_before_mb": before, "rss_growth_mb": round(peak[0], 1)}))
"""


def add_arguments(p) -> None:
    """This benchmark's own options, beside repair.bench.translate's."""
    p.add_argument("--ft-pairs", type=int, default=200,
                   help="transformers folder: Tatoeba pairs the fine-tunes train on (0: no fine-tune; default 200)")
    p.add_argument("--ft-epochs", type=int, default=2, help="transformers folder: epochs of each fine-tune (default 2)")


def folder_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) / 2**20, 3)


def translation(folder: Path, texts: list[str], args) -> dict:
    """transformers vs CTranslate2 (chosen type, and float32) on the texts (repair.bench.translate's rounds)."""
    from repair.bench.compare import compare_backends
    from repair.nmt.hf.ct2 import TransformersCT2Translator
    from repair.nmt.hf.translator import TransformersTranslator

    common = {"beam": args.beam, "max_len": args.max_len, "max_tokens": args.max_tokens, "device": args.device,
              "threads": args.threads}
    translators = {"transformers": TransformersTranslator(folder, **common)}
    chosen = TransformersCT2Translator(folder, sample=texts, compute_type=args.compute_type, **common)
    translators[f"ctranslate2:{chosen.compute_type}"] = chosen
    if chosen.compute_type != "float32":
        translators["ctranslate2:float32"] = TransformersCT2Translator(folder, compute_type="float32", **common)
    for t in translators.values():
        t.translate(texts[:8])  # warm-up
    figures = compare_backends(translators, texts, rounds=args.rounds)
    return {"backends": figures, "fidelity": chosen.fidelity}


def finetuning(folder: Path, pairs: list[tuple[str, str]], args) -> dict:
    """LoRA and all weights, each fine-tuned in a process of its own on the same pairs for --ft-epochs."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="repair-bench-ft-") as tmp:
        for adapter in ("lora", "none"):
            job = {"folder": str(folder), "pairs": pairs, "out": f"{tmp}/{adapter}", "epochs": args.ft_epochs,
                   "adapter": adapter, "threads": args.threads}
            figures = in_process(FINETUNE, job)
            out[adapter] = {**figures, "written_mb": folder_mb(Path(tmp) / adapter / "checkpoint_best")}
    out["base_mb"] = folder_mb(folder)
    return out


def run(args, texts: list[str], pairs: list[tuple[str, str]]) -> None:
    """The benchmark on args.checkpoint (a transformers folder): tables, then the JSON line."""
    folder = Path(args.checkpoint)
    load = [round(x, 2) for x in os.getloadavg()]
    start = time.perf_counter()
    tr = translation(folder, texts, args)
    ft = finetuning(folder, pairs[: args.ft_pairs], args) if args.ft_pairs else None
    print(f"{'backend':<22} {'texts/s':>9} {'ratio':>7} {'identical':>10}  beam {args.beam}, {args.threads} "
          f"thread(s), {len(texts)} texts, load average before {' '.join(map(str, load))}")
    for name, f in tr["backends"].items():
        print(f"{name:<22} {f['per_s']:>9} {f.get('ratio', 1.0):>7} {f.get('identical', 1.0):>10}")
    if ft:
        print(f"{'fine-tune':<10} {'seconds':>8} {'peak MB':>8} {'imports MB':>11} {'added MB':>9} {'trained':>10} "
              f"{'written MB':>11}  "
              f"{args.ft_pairs} pairs, {args.ft_epochs} epochs; base model {ft['base_mb']} MB")
        for name in ("lora", "none"):
            f = ft[name]
            print(f"{name:<10} {f['seconds']:>8} {f['peak_rss_mb']:>8} {f['peak_rss_before_mb']:>11} "
                  f"{f['rss_growth_mb']:>9} {f['trained_parameters']:>10} {f['written_mb']:>11}")
    print(json.dumps({"checkpoint": str(folder), "texts": len(texts), "beam": args.beam, "threads": args.threads,
                      "load_average_before": load, "translation": tr, "finetune": ft,
                      "seconds": round(time.perf_counter() - start, 1)}, ensure_ascii=False))


def child_env() -> dict:
    """The environment of a benchmark's own process: this checkout's package first."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                         os.environ.get("PYTHONPATH", "")])}


def in_process(script: str, job: dict) -> dict:
    """`script` run in a Python process of its own with `job` (JSON); the JSON its last line prints."""
    done = subprocess.run([sys.executable, "-c", script, json.dumps(job, ensure_ascii=False)], env=child_env(),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise UserError(f"a benchmark process failed: {done.stderr.strip().splitlines()[-3:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
