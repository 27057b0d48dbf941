"""`python -m repair.examples.field OUT`: a field case on real text: a model that has seldom seen a field's words,
and the field's sentences to test and hold out.

A team's model meets its own field's terms seldom in the general data it was trained on; the field's text holds
them often. This builds that case from Tatoeba's English-Chinese pairs by a stated rule:

1. **Words.** An English sentence's words are its lower-cased runs of letters a-z of 4 letters or more that are
   not spaCy's English stop words. A word's frequency is the number of distinct English sentences holding it; the
   candidates are the words in the band `--band LO HI` (default 15 to 80 sentences).
2. **Topical clusters.** Two candidates co-occur in a sentence holding both. `--clusters` clusters (default 10)
   of `--cluster-words` words each (default 8) are grown one after the other: the seed is the candidate not yet
   taken with the highest share of its sentences shared with one other candidate; then, repeatedly, the
   candidate not yet taken with the highest sum, over the cluster's words, of the share of its sentences that
   hold that word (ties: the later word alphabetically). The field words are the clusters' words.
3. **Seldom, not never.** For each field word, in the clusters' order, the `--keep` sentences (default 3) holding
   it and no other field word that come first by the SHA-1 of their English stay in training: the model sees each
   field word that often (fewer where fewer such sentences exist). Every other pair whose English holds a field
   word is kept out of the model's training: its English is a field sentence.
4. **Held out, tested, BLEU.** The field sentences sorted by SHA-1 (whitespace collapsed, as `purity.holdout`
   ranks them): the first `--holdout` (default 300) are held out; the next ones whose field words all occur in the
   held-out sentences are tested (up to `--tested`, default 936), so that what the corrections teach can recur in
   the held-out text; the rest are the BLEU test set. Each sentence's reference is the first Chinese Tatoeba
   gives it.

The model is trained on the other pairs the way `repair.examples.moses_bpe` trains one (Moses, jieba, a joint
subword-nmt BPE, fairseq). OUT holds:

    OUT/corpus/{train,valid,test}.{en,zh}   what the model was trained on (valid and test: 500 general pairs each)
    OUT/model/                              the model, as repair.examples.moses_bpe lays it out
    OUT/data/{train,valid,test}.{en,zh}     the loop's data.dir: the corpus's train and valid, the field's BLEU test
    OUT/field/purity.{en,zh}                Purity's input (held-out and tested sentences) and its references
    OUT/field/heldout.en                    the held-out sentences (the loop holds out the same ones)
    OUT/field/field.json                    the words, clusters, kept sentences and counts

and the loop runs on it with `python -m repair.loop model.checkpoint=OUT/model data=parallel data.dir=OUT/data
purity.input=OUT/field/purity.en purity.holdout=300 review=oracle` (the command is printed). Rerunning reuses what
is there.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import logging
import re
import shutil
from collections import Counter
from pathlib import Path

from repair.errors import UserError, exit_on_user_error
from repair.examples.moses_bpe import SPLITS, TATOEBA, build, check_source, write_corpus

WORD = re.compile(r"[a-z]+")
logger = logging.getLogger("repair.examples.field")


def sentence_words(sentence: str, stop: frozenset[str]) -> set[str]:
    """The rule's words of an English sentence: lower-cased runs of a-z, 4 letters or more, not stop words."""
    return {w for w in WORD.findall(sentence.lower()) if len(w) >= 4 and w not in stop}


def sha1_key(sentence: str) -> str:
    """The order `purity.holdout` ranks sentences by: SHA-1 of the text, whitespace collapsed."""
    return hashlib.sha1(" ".join(sentence.split()).encode("utf-8")).hexdigest()


def clusters(sentences: list[set[str]], band: tuple[int, int], n_clusters: int, size: int) -> list[list[str]]:
    """Topical clusters of the band's words (rule 2 of the module's docstring)."""
    freq = Counter(w for ws in sentences for w in ws)
    lo, hi = band
    cand = sorted(w for w, n in freq.items() if lo <= n <= hi)
    inband = set(cand)
    co: Counter = Counter()
    for ws in sentences:
        for x, y in itertools.combinations(sorted(ws & inband), 2):
            co[x, y] += 1
            co[y, x] += 1
    near: dict[str, dict[str, int]] = {}
    for (x, y), n in co.items():
        near.setdefault(x, {})[y] = n
    taken: set[str] = set()
    out = []
    for _ in range(n_clusters):
        left = [w for w in cand if w not in taken]
        if not left:
            break
        seed = max(left, key=lambda w: (max(near.get(w, {}).values(), default=0) / freq[w], w))
        cluster = [seed]
        taken.add(seed)
        while len(cluster) < size:
            scored = [(sum(near.get(w, {}).get(f, 0) for f in cluster) / freq[w], w) for w in cand if w not in taken]
            best = max(scored, default=(0, ""))
            if best[0] <= 0:
                break
            cluster.append(best[1])
            taken.add(best[1])
        out.append(cluster)
    return out


def split_field(pairs: list[tuple[str, str]], *, band=(15, 80), n_clusters=10, size=8, keep=3, holdout=300,
                tested=936) -> dict:
    """The rule applied to Tatoeba's pairs: the field words, the pairs the model trains on, and the field's
    held-out, tested and BLEU-test sentences with their references."""
    from spacy.lang.en.stop_words import STOP_WORDS

    stop = frozenset(STOP_WORDS)
    english = list(dict.fromkeys(en for en, _ in pairs))
    reference: dict[str, str] = {}
    for en, zh in pairs:
        reference.setdefault(en, zh)
    held_words = {en: sentence_words(en, stop) for en in english}
    groups = clusters(list(held_words.values()), band, n_clusters, size)
    field = [w for c in groups for w in c]
    if not field:
        raise UserError(f"no word of Tatoeba's English has a frequency in the band {band[0]}..{band[1]}: widen --band")
    fset = set(field)
    in_field = sorted((en for en in english if held_words[en] & fset), key=sha1_key)
    kept: dict[str, list[str]] = {}
    for w in field:
        kept[w] = [en for en in in_field if held_words[en] & fset == {w}][:keep]
    kept_set = {en for ens in kept.values() for en in ens}
    rest = [en for en in in_field if en not in kept_set]  # in SHA-1 order
    held = rest[:holdout]
    held_fw = set().union(*(held_words[en] & fset for en in held))
    test, bleu = [], []
    for en in rest[holdout:]:
        (test if len(test) < tested and held_words[en] & fset <= held_fw else bleu).append(en)
    out_of_training = set(rest)
    return {"clusters": groups, "words": field, "kept": kept, "heldout": held, "tested": test, "bleu": bleu,
            "reference": {en: reference[en] for en in rest},
            "train_pairs": [(en, zh) for en, zh in pairs if en not in out_of_training],
            "field_words_of": {en: sorted(held_words[en] & fset) for en in rest}}


def write_field(out: Path, pairs: list[tuple[str, str]], **rule) -> dict:
    """OUT/field/{purity.en,purity.zh,heldout.en,field.json} from the rule; returns split_field's result."""
    from repair.fileio import write_json_atomic, write_text_atomic
    from repair.heldout import heldout_split

    split = split_field(pairs, **rule)
    folder = out / "field"
    purity = split["heldout"] + split["tested"]
    ref = split["reference"]
    held, _ = heldout_split(purity, len(split["heldout"])) if split["heldout"] else ([], None)
    if {purity[i] for i in held} != set(split["heldout"]):  # the loop must hold out exactly these
        raise RuntimeError("the field's held-out sentences are not the ones purity.holdout would hold out")
    write_text_atomic(folder / "purity.en", "".join(s + "\n" for s in purity))
    write_text_atomic(folder / "purity.zh", "".join(ref[s] + "\n" for s in purity))
    write_text_atomic(folder / "heldout.en", "".join(s + "\n" for s in split["heldout"]))
    count = Counter(w for s in split["heldout"] + split["tested"] + split["bleu"] for w in split["field_words_of"][s])
    write_json_atomic(folder / "field.json", {
        "rule": {k: list(v) if isinstance(v, tuple) else v for k, v in rule.items()},
        "clusters": split["clusters"],
        "kept_in_training": split["kept"],
        "sentences": {"heldout": len(split["heldout"]), "tested": len(split["tested"]), "bleu": len(split["bleu"]),
                      "train_pairs": len(split["train_pairs"])},
        "field_sentences_per_word": {w: count[w] for w in split["words"]},
    })
    return split


def write_data(out: Path, corpus: Path, split: dict) -> Path:
    """OUT/data: the loop's data.dir (the corpus's train and valid, the field's BLEU-test sentences as test)."""
    from repair.fileio import write_text_atomic

    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    for s in SPLITS[:2]:
        for lang in ("en", "zh"):
            if not (data / f"{s}.{lang}").is_file():
                shutil.copyfile(corpus / f"{s}.{lang}", data / f"{s}.{lang}")
    write_text_atomic(data / "test.en", "".join(s + "\n" for s in split["bleu"]))
    write_text_atomic(data / "test.zh", "".join(split["reference"][s] + "\n" for s in split["bleu"]))
    return data


def loop_command(out: Path, holdout: int) -> str:
    return (f"python -m repair.loop model.checkpoint={out}/model data=parallel data.dir={out}/data "
            f"purity.input={out}/field/purity.en purity.holdout={holdout} review=oracle run_dir={out}/loop")


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    from repair.bench.translate import tatoeba_pairs

    p = argparse.ArgumentParser(prog="python -m repair.examples.field", description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="output folder (corpus/, model/, data/, field/, work/)")
    p.add_argument("--tatoeba", type=Path, default=TATOEBA, help=f"Tatoeba's cmn.txt (default: {TATOEBA})")
    p.add_argument("--band", type=int, nargs=2, default=(15, 80), metavar=("LO", "HI"),
                   help="candidate words: held by LO to HI distinct English sentences")
    p.add_argument("--clusters", type=int, default=10, help="topical clusters of field words")
    p.add_argument("--cluster-words", type=int, default=8, help="words per cluster")
    p.add_argument("--keep", type=int, default=3, help="sentences of each field word left in training")
    p.add_argument("--holdout", type=int, default=300, help="field sentences held out")
    p.add_argument("--tested", type=int, default=936, help="field sentences Purity tests (at most)")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--merges", type=int, default=6000, help="BPE merge operations")
    p.add_argument("--train-pairs", type=int, default=None, help="train on only the first N training pairs")
    p.add_argument("--no-model", action="store_true", help="write the field and the corpus, train no model")
    args = p.parse_args(argv)
    if args.holdout < 1 or args.tested < 1 or args.keep < 0:
        raise UserError("--holdout and --tested must be 1 or more, --keep 0 or more")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    check_source(args.tatoeba)
    out = args.out
    split = write_field(out, tatoeba_pairs(args.tatoeba), band=tuple(args.band), n_clusters=args.clusters,
                        size=args.cluster_words, keep=args.keep, holdout=args.holdout, tested=args.tested)
    corpus = write_corpus(out, args.tatoeba, n_train=args.train_pairs, pairs=split["train_pairs"])
    data = write_data(out, corpus, split)
    print(f"field: {len(split['words'])} words; {len(split['heldout'])} held out, {len(split['tested'])} tested, "
          f"{len(split['bleu'])} BLEU test ({out / 'field'})\ndata: {data}", flush=True)
    if args.no_model:
        return
    model = build(out, source=args.tatoeba, epochs=args.epochs, merges=args.merges, n_train=args.train_pairs,
                  pairs=split["train_pairs"])
    print(f"model: {model}\nthe loop: {loop_command(out, len(split['heldout']))}", flush=True)


if __name__ == "__main__":
    main()
