"""`python -m repair.bench purity`: the Purity stage on the paper's 200 input sentences with fairseq and
CTranslate2 on the same model, timed as the paper's Table V lays it out (seconds per stage, texts,
characters); the last line is JSON.

Made for a GPU (`--device cuda`: fairseq in fp16, CTranslate2 in float16, the defaults there); it runs
on CPU too (fairseq in float32, CTranslate2 in int8). The model: --checkpoint and --data-dir, or the
translate benchmark's Tatoeba model (built once under --workdir, see `python -m repair.bench translate`).
The parser is built once and shared, and the CTranslate2 conversion is made (and timed) before the
runs, so that initialization is the loading of each translator.

With `--input FILE` it runs Purity on that file instead, as a user runs it, at one or more sizes
(repair/bench/purity_input.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from repair.bench.parse import DEFAULT_INPUTS, FILES
from repair.fileio import read_text_lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from repair.bench.translate import TATOEBA

    p = argparse.ArgumentParser(prog="python -m repair.bench purity", description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=Path, default=DEFAULT_INPUTS, help=f"folder with {' and '.join(FILES)}")
    p.add_argument("--checkpoint", type=Path, help="a fairseq checkpoint (default: the translate benchmark's model)")
    p.add_argument("--data-dir", type=Path, help="prepared data folder of --checkpoint (spm/, bin/dict.*.txt)")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/repair-bench-translate"))
    p.add_argument("--source", type=Path, default=TATOEBA, help="Tatoeba cmn.txt, to build the default model")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--compute-type", default=None, help="CTranslate2 compute type (default: the fastest whose "
                   "translations are at least 98%% fairseq's, measured once per conversion)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all)")
    p.add_argument("--parser", default="spacy")
    p.add_argument("--out", type=Path, default=Path("/tmp/repair-bench-purity"), help="the runs' folders")
    p.add_argument("--input", type=Path, help="a file of English sentences: Purity run on it as `python -m repair.purity` "
                   "runs it (CTranslate2, suggestions on; see repair/bench/purity_input.py) instead of the comparison")
    p.add_argument("--sizes", default="1", help="with --input: sizes k of the largest K, each the first k/K of the file "
                   "(1,3,10: a tenth, three tenths, all; growth exponents across them)")
    p.add_argument("--rounds", type=int, default=1, help="with --input: runs of every size (in turn)")
    p.add_argument("--timeout", type=float, default=1800, help="with --input: seconds one run may take")
    p.add_argument("overrides", nargs="*", help="with --input: repair.purity's overrides (after --), for every run")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    if args.input is not None:
        from repair.bench.purity_input import main as run_input

        run_input(args)
        return

    paths = [args.inputs / name for name in FILES]
    if not all(path.is_file() for path in paths):
        print(f"skipped: {args.inputs} lacks {' or '.join(FILES)} (the Purity paper's inputs, ../shared/data/purity-inputs)")
        print(json.dumps({"benchmark": "purity", "skipped": True}))
        return
    sentences = [line for path in paths for line in read_text_lines(path) if line.strip()]

    from repair.nmt.fairseq.ct2 import convert_checkpoint
    from repair.nmt.fairseq.translator import load_model_files
    from repair.purity.parsers import make_parser
    from repair.purity.run import TRANSLATIONS, run_purity
    from repair.purity.translators import make_translator, read_table

    if args.checkpoint is None:
        from repair.bench.translate import build_model

        checkpoint, data_dir, _ = build_model(args.workdir, args.source, n_test=500, epochs=4, device=args.device)
    else:
        checkpoint, data_dir = args.checkpoint, args.data_dir
    files = load_model_files(checkpoint, data_dir)
    options = {"beam": args.beam, "device": args.device, "threads": args.threads}
    start = time.perf_counter()
    convert_checkpoint(files)
    # the fidelity check of a new conversion (once; the first sentences as its sample), before the runs
    make_translator({"name": "ctranslate2", "compute_type": args.compute_type, **options}, files=files,
                    sample=sentences)
    convert_seconds = time.perf_counter() - start
    start = time.perf_counter()
    parser = make_parser({"name": args.parser})
    parser_seconds = time.perf_counter() - start

    backends = {"fairseq": {"name": "fairseq"},
                "ctranslate2": {"name": "ctranslate2", "compute_type": args.compute_type}}
    results: dict = {}
    for name, cfg in backends.items():
        start = time.perf_counter()
        translator = make_translator({**cfg, **options}, files=files)
        init = time.perf_counter() - start
        summary = run_purity(sentences, parser, translator, args.out / name, init_seconds=init)
        precision = "fp16" if getattr(translator, "fp16", False) else getattr(translator, "compute_type", "float32")
        results[name] = {"precision": precision, "device": str(translator.device), "texts": summary["texts"],
                         "characters": summary["characters_translated"], "seconds": summary["seconds"],
                         "issues": summary["issues"], "translator": summary["translator"]}
        del translator
    outputs = {name: read_table(args.out / name / TRANSLATIONS, empty_ok=True) for name in results}
    same = [outputs["ctranslate2"].get(t) == u for t, u in outputs["fairseq"].items()]
    results["ctranslate2"]["identical_to_fairseq"] = round(sum(same) / max(1, len(same)), 4)
    table = [("", *results), ("precision", *(r["precision"] for r in results.values())),
             ("device", *(r["device"] for r in results.values())),
             ("texts translated", *(r["texts"] for r in results.values())),
             ("characters translated", *(r["characters"] for r in results.values()))]
    for stage in results["fairseq"]["seconds"]:
        table.append((f"seconds: {stage.replace('_', ' ')}", *(f"{r['seconds'][stage]:.2f}" for r in results.values())))
    for row in table:
        print(f"{row[0]:<28}" + "".join(f"{str(v):>14}" for v in row[1:]))
    print(f"CTranslate2's translations identical to fairseq's: {results['ctranslate2']['identical_to_fairseq']:.1%} "
          f"of {len(same)} texts")
    print(f"(parser {args.parser} loaded once in {parser_seconds:.1f} s; CTranslate2 conversion and fidelity check "
          f"{convert_seconds:.1f} s, before the runs)")
    print(json.dumps({"benchmark": "purity", "sentences": len(sentences), "checkpoint": str(checkpoint),
                      "conversion_s": round(convert_seconds, 2), "backends": results}))
