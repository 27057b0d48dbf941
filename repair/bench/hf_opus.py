"""`python -m repair.bench hf`: a transformers model at CTranslate2's speed, measured (see `main`): a model of OPUS-MT
en-zh's shape through Purity on the CNN 200 with each runtime, one fine-tune epoch of each kind, and the loop's test
and verify stages on a small model with `translator.runtime` transformers and auto. The last line is JSON.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

from repair.bench.hf import child_env, finetuning, in_process
from repair.errors import UserError

logger = logging.getLogger(__name__)


OPUS_SHAPE = {"d_model": 512, "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 8,
              "decoder_attention_heads": 8, "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048,
              "max_position_embeddings": 512}
OPUS_VOCAB = 65001  # opus-mt-en-zh's vocab.json entries (<pad> last)

PURITY = """
import json, resource, sys, time
from repair.fileio import read_text_lines
from repair.purity.parsers import make_parser
from repair.purity.run import run_purity
from repair.purity.translators import make_translator
args = json.loads(sys.argv[1])
sentences = [s for path in args["inputs"] for s in read_text_lines(path) if s.strip()]
parser = make_parser({"name": "spacy"}) if args["out"] else None
start = time.perf_counter()
t = make_translator(args["translator"], **({"sample": sentences[:args["sample"]]} if args["sample"] else {}))
init = time.perf_counter() - start
summary = run_purity(sentences, parser, t, args["out"], init_seconds=init) if args["out"] else None
print(json.dumps({"init_s": round(init, 2), "seconds": summary and summary["seconds"],
                  "texts": summary and summary["texts"], "translator": t.describe(),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def marian_vocab(work: Path, en: list[str], zh: list[str], sizes: tuple[int, int],
                 entries: int | None = None):
    """A MarianTokenizer in `work`: source.spm and target.spm trained on the lines (SentencePiece, Marian's ids:
    </s> 0, <unk> 1), one vocab.json of both sides' pieces (padded with unused entries up to `entries`), <pad> last."""
    import sentencepiece as spm
    from transformers import MarianTokenizer

    vocab = {"</s>": 0, "<unk>": 1}
    for side, lines, size in (("source", en, sizes[0]), ("target", zh, sizes[1])):
        text = work / f"{side}.txt"
        text.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(work / side), vocab_size=size,
                                       character_coverage=1.0, model_type="unigram", eos_id=0, unk_id=1, bos_id=-1,
                                       pad_id=-1, hard_vocab_limit=False, minloglevel=2)
        text.unlink()
        (work / f"{side}.vocab").unlink()
        (work / f"{side}.model").rename(work / f"{side}.spm")
        sp = spm.SentencePieceProcessor(model_file=str(work / f"{side}.spm"))
        for i in range(sp.get_piece_size()):
            vocab.setdefault(sp.id_to_piece(i), len(vocab))
    while entries is not None and len(vocab) < entries - 1:
        vocab[f"<unused{len(vocab)}>"] = len(vocab)
    vocab["<pad>"] = len(vocab)
    (work / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return MarianTokenizer(str(work / "source.spm"), str(work / "target.spm"), str(work / "vocab.json"),
                           source_lang="en", target_lang="zh")


def opus_shaped(folder: Path, pairs: list[tuple[str, str]]) -> Path:
    """A MarianMT folder of OPUS-MT en-zh's shape (6 + 6 layers, 512 wide, 8 heads, feed-forward 2048, 65,001
    entries), random weights (its `<pad>` row zero, as OPUS-MT's: where both runtimes start the decoder). The
    vocabulary: SentencePiece models trained on the pairs, padded with unused entries to OPUS-MT's size, so that the
    embeddings and the output layer are of its size. Built once."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    if (folder / "config.json").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    tok = marian_vocab(folder, [e for e, _ in pairs], [z for _, z in pairs], (8000, 8000), OPUS_VOCAB)
    pad = tok.pad_token_id
    torch.manual_seed(0)
    config = MarianConfig(vocab_size=len(tok), pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0,
                          forced_eos_token_id=0, bad_words_ids=[[pad]], num_beams=5, max_length=512,
                          scale_embedding=True, share_encoder_decoder_embeddings=True, **OPUS_SHAPE)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        model.get_input_embeddings().weight[pad].zero_()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def purity_cnn(folder: Path, args, work: Path) -> dict:
    """The CNN 200 through Purity (spaCy; no suggestions) with each runtime, each in a process of its own (its peak
    resident memory): first the conversion and fidelity check (timed apart, on the first 80 sentences, as the loop's
    model check gives them), then transformers, then CTranslate2 (the compute type that check chose)."""
    from repair.bench.parse import FILES

    inputs = [str(args.inputs / name) for name in FILES]
    common = {"name": "transformers", "checkpoint": str(folder), "beam": args.beam, "max_len": args.max_len,
              "device": "cpu", "threads": args.threads, "cache_dir": str(work / "ct2")}
    shutil.rmtree(work / "ct2", ignore_errors=True)
    out = {"conversion": in_process(PURITY, {"inputs": inputs, "translator": {**common, "runtime": "ctranslate2"},
                                             "sample": 80, "out": None})}
    for runtime in ("transformers", "ctranslate2"):
        shutil.rmtree(work / f"purity-{runtime}", ignore_errors=True)
        out[runtime] = in_process(PURITY, {"inputs": inputs, "translator": {**common, "runtime": runtime},
                                           "sample": 0, "out": str(work / f"purity-{runtime}")})
    return out


def loop_inputs(corpus: Path, work: Path, n: int) -> tuple[Path, Path]:
    """The small model's corpus cut to the loop's size (2,000 training pairs, 40 valid, 60 test) and `n` of its test
    sentences of 8 words or more to test (their references beside them, for review=oracle)."""
    data, sentences = work / "loop-corpus", work / "loop-sentences.en"
    data.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", 2000), ("valid", 40), ("test", 60)):
        for lang in ("en", "zh"):
            lines = (corpus / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:count]
            (data / f"{split}.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    en = (corpus / "test.en").read_text(encoding="utf-8").splitlines()
    zh = (corpus / "test.zh").read_text(encoding="utf-8").splitlines()
    pairs = [(e, z) for e, z in zip(en, zh) if 8 <= len(e.split()) <= 25][:n]
    sentences.write_text("".join(e + "\n" for e, _ in pairs), encoding="utf-8")
    sentences.with_suffix(".zh").write_text("".join(z + "\n" for _, z in pairs), encoding="utf-8")
    return data, sentences


LOOP_VARIANTS = {"transformers": ("transformers", False), "auto": ("auto", False),
                 "auto, base cached": ("auto", True)}


def loop_run(run_dir: Path, runtime: str, cache: Path, small: Path, data: Path, sentences: Path, args) -> dict:
    """One loop run (review=oracle, one cycle) in its own process (repair.bench.stage); its stages' seconds."""
    from repair.fileio import read_json

    shutil.rmtree(run_dir, ignore_errors=True)
    overrides = ["translator=transformers", f"translator.runtime={runtime}", f"model.checkpoint={small}",
                 "data=parallel", f"data.dir={data}", f"purity.input={sentences}", "purity.holdout=15",
                 f"model.threads={args.threads}", "translator.max_len=40",
                 f"translator.min_identical={args.loop_min_identical}", f"translator.cache_dir={cache}",
                 "finetune.max_epoch=3", "finetune.lr=1e-2"]
    done = subprocess.run([sys.executable, "-m", "repair.bench.stage", str(run_dir), "report", *overrides],
                          env=child_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise UserError(f"the loop with runtime={runtime} failed: {done.stderr.strip().splitlines()[-3:]}")
    seconds = read_json(run_dir / "seconds.json")
    used = read_json(run_dir / "cycle1" / "test" / "summary.json")["translator"].get("runtime")
    logger.info("loop with runtime=%s (%s translated): %s", runtime, used, seconds)
    return {**{k: seconds.get(k) for k in ("train", "test", "finetune", "verify")}, "runtime_used": used}


def loop_stages(small: Path, corpus: Path, args, work: Path) -> dict:
    """The loop on the small model, the variants of LOOP_VARIANTS in turn, --loop-rounds times, each run in a folder
    of its own: runtime transformers; auto with a CTranslate2 cache of its own (the base model's conversion and
    fidelity check counted, as in a first run on a model); auto with the base model's conversion cached by an earlier
    run (as in every later run on it). The fine-tuned adapter is merged and converted in every auto run."""
    data, sentences = loop_inputs(corpus, work, args.loop_sentences)
    warm = work / "loop-ct2-warm"
    shutil.rmtree(warm, ignore_errors=True)
    loop_run(work / "loop-warm-up", "auto", warm, small, data, sentences, args)  # not counted: the cache it leaves
    runs: dict = {name: [] for name in LOOP_VARIANTS}
    for r in range(args.loop_rounds):
        for k, (name, (runtime, cached)) in enumerate(LOOP_VARIANTS.items()):
            run_dir = work / f"loop-{k}-{r}"
            runs[name].append(loop_run(run_dir, runtime, warm if cached else run_dir / "ct2", small, data,
                                       sentences, args))
    return runs


def median_of(runs: list[dict], keys: tuple[str, ...]) -> float:
    import statistics

    return round(statistics.median(sum(r[k] or 0.0 for k in keys) for r in runs), 2)


def report(args, results: dict) -> None:
    """The tables, then the JSON line."""
    purity = results.get("purity")
    if purity:
        conv, t, c = purity["conversion"], purity["transformers"], purity["ctranslate2"]
        print(f"Purity on the CNN 200 ({t['texts']} texts), beam {args.beam}, max_len {args.max_len}, {args.threads} "
              f"thread(s): seconds")
        print(f"{'runtime':<26} {'translation':>12} {'total':>8} {'peak MB':>8}")
        for name, f in (("transformers", t), (f"ctranslate2 ({c['translator']['compute_type']})", c)):
            print(f"{name:<26} {f['seconds']['translation']:>12} {f['seconds']['total']:>8} {f['peak_rss_mb']:>8}")
        ratio = t["seconds"]["translation"] / max(c["seconds"]["translation"], 1e-9)
        print(f"translation {ratio:.1f}x as fast with CTranslate2; its conversion and fidelity check (once per model, "
              f"cached): {conv['init_s']} s, {conv['translator']['fidelity']['identical']:.1%} of "
              f"{conv['translator']['fidelity']['sample']} sample translations identical")
    ft = results.get("finetune")
    if ft:
        print(f"fine-tune, {args.ft_epochs} epoch of {args.ft_pairs} pairs: {'seconds':>8} {'peak MB':>8} "
              f"{'trained':>11} {'written MB':>11}")
        for name in ("lora", "none"):
            f = ft[name]
            print(f"{name:<36} {f['seconds']:>8} {f['peak_rss_mb']:>8} {f['trained_parameters']:>11} "
                  f"{f['written_mb']:>11}")
    loop = results.get("loop")
    if loop:
        print(f"the loop on {args.small} ({args.loop_sentences} sentences), median of {args.loop_rounds} run(s) each, "
              f"alternated: seconds")
        print(f"{'runtime':<14} {'train (load)':>12} {'test':>8} {'finetune':>9} {'verify':>8} {'test+verify':>12}  "
              f"translated by")
        for name, runs in loop.items():
            used = ", ".join(sorted({str(r["runtime_used"]) for r in runs}))
            print(f"{name:<14} {median_of(runs, ('train',)):>12} {median_of(runs, ('test',)):>8} "
                  f"{median_of(runs, ('finetune',)):>9} {median_of(runs, ('verify',)):>8} "
                  f"{median_of(runs, ('test', 'verify')):>12}  {used}")
        results["loop_ratio"] = {}
        for name in list(loop)[1:]:
            ratios = [round(median_of(loop["transformers"], keys) / max(median_of(loop[name], keys), 1e-9), 2)
                      for keys in (("test", "verify"), ("train", "test", "verify"))]
            results["loop_ratio"][name] = {"test_verify": ratios[0], "train_test_verify": ratios[1]}
            print(f"{name}: test + verify {ratios[0]:.2f}x as fast as runtime=transformers (with the model's load "
                  f"and conversion: {ratios[1]:.2f}x)")
    print(json.dumps(results, ensure_ascii=False))


def main(argv: list[str] | None = None) -> None:
    """`python -m repair.bench hf`: a model of OPUS-MT en-zh's shape (random weights: for speed only; see
    opus_shaped) through Purity on the CNN 200 with the transformers runtime and with CTranslate2, one fine-tune epoch
    over Tatoeba pairs as a LoRA adapter and with all weights (seconds, peak resident memory), and the loop's test and
    verify stages on a small trained model (--small: the tests' tiny Marian) with translator.runtime=transformers and
    auto, alternated. Random weights give the same degenerate output for every input, up to the output cap: --max-len
    caps it (default 32 target tokens), so every text costs the cap in both runtimes. Last line JSON."""
    import argparse
    import random

    from repair.bench.parse import DEFAULT_INPUTS
    from repair.bench.translate import TATOEBA, tatoeba_pairs

    repo = Path(__file__).resolve().parents[2]
    tiny = sorted(repo.glob(".pytest_cache/d/hf-models-*/model"))
    p = argparse.ArgumentParser(prog="python -m repair.bench hf", description=main.__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, default=Path("/tmp/repair-bench-hf"))
    p.add_argument("--source", type=Path, default=TATOEBA, help="Tatoeba cmn.txt (vocabulary and fine-tune pairs)")
    p.add_argument("--inputs", type=Path, default=DEFAULT_INPUTS, help="the CNN 200 (politics.txt, business.txt)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--max-len", type=int, default=32, help="output cap in target tokens (default 32)")
    p.add_argument("--ft-pairs", type=int, default=1000)
    p.add_argument("--ft-epochs", type=int, default=1)
    p.add_argument("--small", type=Path, default=tiny[-1] if tiny else None,
                   help="a small trained transformers folder with corpus/ beside it (default: the tests' tiny Marian, "
                        "built by pytest tests/test_hf.py)")
    p.add_argument("--loop-sentences", type=int, default=70)
    p.add_argument("--loop-rounds", type=int, default=2)
    p.add_argument("--loop-min-identical", type=float, default=0.5,
                   help="translator.min_identical of the auto runs (the tiny model's searches part on about a fifth)")
    p.add_argument("--parts", default="purity,finetune,loop")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    parts = set(args.parts.split(","))
    if not args.source.is_file():
        raise UserError(f"--source {args.source}: not found (Tatoeba's cmn.txt, ../shared/data/tatoeba-cmn-eng)")
    pairs = tatoeba_pairs(args.source)
    random.Random(0).shuffle(pairs)
    args.workdir.mkdir(parents=True, exist_ok=True)
    folder = opus_shaped(args.workdir / "opus-shaped", pairs)
    results: dict = {"model": str(folder), "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    if "purity" in parts:
        results["purity"] = purity_cnn(folder, args, args.workdir)
    if "finetune" in parts:
        results["finetune"] = finetuning(folder, pairs[:args.ft_pairs], args)
    if "loop" in parts:
        if args.small is None or not (args.small.parent / "corpus").is_dir():
            raise UserError("--small: no small model (build the tests' one: pytest tests/test_hf.py -k ctranslate2)")
        results["loop"] = loop_stages(args.small, args.small.parent / "corpus", args, args.workdir)
    report(args, results)
