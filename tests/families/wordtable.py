"""A third model family, written outside the package to show what one takes (docs/families.md): a word table.

Training reads the prepared data's cleaned pairs, segments the Chinese with jieba and keeps, for each English
word, the Chinese words that co-occur with it most (Dice's coefficient), with how often each co-occurs with every
English word. A text is translated word by word; each word's candidate is chosen in its context (its Dice score
plus how strongly the text's other words call for it), so a phrase alone and in a sentence may be translated
differently, as Purity looks for. Its fine-tune learns whole phrases: each pair the table translates otherwise
becomes an entry, used wherever its source occurs as a run of whole tokens (the longest first).

The model is one JSON file; its family is registered by its own config file (conf/translator/wordtable.yaml
beside this module, on Hydra's search path), not by any file of the package.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

from repair.face import ModelFamily, Translator
from repair.fileio import write_json_atomic
from repair.nmt.preprocessing import ModelFiles, Side
from repair.text import english_tokens, source_key

MODEL = "wordtable.json"


def model_files(path: str | Path) -> ModelFiles:
    """The loop's handle of a table: its file, and sides with nothing to encode."""
    return ModelFiles(str(Path(path).resolve()), Side("en", ""), Side("zh", ""))


def chinese_words(text: str) -> list[str]:
    import jieba

    return [w for w in jieba.lcut(text) if w.strip()]


def train_table(pairs: Sequence[tuple[str, str]], candidates: int = 3) -> dict:
    """words: English word -> its candidates [[Chinese word, Dice]]; context: Chinese candidate -> {English word:
    P(candidate | the word in the text)}."""
    en_count, zh_count, both = Counter(), Counter(), Counter()
    for en, zh in pairs:
        e, z = set(english_tokens(en)), set(chinese_words(zh))
        en_count.update(e)
        zh_count.update(z)
        both.update((a, b) for a in e for b in z)
    words: dict[str, list] = {}
    for (a, b), n in both.items():
        if n >= 2:
            words.setdefault(a, []).append([b, round(2 * n / (en_count[a] + zh_count[b]), 4)])
    words = {a: sorted(c, key=lambda x: (-x[1], x[0]))[:candidates] for a, c in words.items()}
    wanted = {c for cs in words.values() for c, _ in cs}
    context: dict[str, dict[str, float]] = {}
    for (a, b), n in both.items():
        if b in wanted and n >= 2:
            context.setdefault(b, {})[a] = round(n / en_count[a], 4)
    return {"words": words, "context": context, "phrases": {}}


class WordTableTranslator(Translator):
    name = "wordtable"

    def __init__(self, checkpoint: str | None = None, *, files: ModelFiles | None = None,
                 data_dir: str | None = None, device: str = "auto", threads: int | None = None):
        self.files = files or model_files(checkpoint)
        self.table = json.loads(Path(self.files.checkpoint).read_text(encoding="utf-8"))

    def describe(self) -> dict:
        return {"name": self.name, "checkpoint": self.files.checkpoint, "words": len(self.table["words"]),
                "phrases": len(self.table["phrases"])}

    def translate(self, texts: list[str]) -> list[str]:
        return [translate_one(self.table, t) for t in texts]


def translate_one(table: Mapping[str, Any], text: str) -> str:
    tokens, out, i = english_tokens(text), [], 0
    phrases = table["phrases"]
    longest = max((len(k.split()) for k in phrases), default=0)
    while i < len(tokens):
        for n in range(min(longest, len(tokens) - i), 0, -1):
            key = " ".join(tokens[i:i + n])
            if key in phrases:
                out.append(phrases[key])
                i += n
                break
        else:
            out.append(word_in_context(table, tokens[i], tokens))
            i += 1
    return "".join(out)


def word_in_context(table: Mapping[str, Any], word: str, tokens: list[str]) -> str:
    """The word's candidate that its Dice score and the text's other words call for most; punctuation and unknown
    words as they are."""
    cands = table["words"].get(word)
    if not cands:
        return word if not word.isalnum() else ""
    others = [t for t in tokens if t != word]

    def score(cand: list) -> float:
        ctx = table["context"].get(cand[0], {})
        return cand[1] + (sum(ctx.get(t, 0.0) for t in others) / len(others) if others else 0.0)

    return max(cands, key=score)[0]


def valid_loss(table: Mapping[str, Any], pairs: Sequence[tuple[str, str]]) -> float:
    """1 - the character F1 of the translations against the references, averaged."""
    total = 0.0
    for (en, zh), out in zip(pairs, (translate_one(table, en) for en, _ in pairs)):
        common = sum((Counter(out) & Counter(zh)).values())
        total += 1.0 - (2 * common / (len(out) + len(zh)) if out or zh else 1.0)
    return round(total / max(1, len(pairs)), 4)


class WordTableFamily(ModelFamily):
    name = "wordtable"
    translator_class = WordTableTranslator
    model_help = "a word table (wordtable.json) this family trained"

    def owns(self, path: str | Path) -> bool:
        p = Path(path)
        return p.is_file() and p.suffix == ".json"

    def train(self, data_dir: Path, checkpoint_dir: Path, model_cfg: Mapping[str, Any], seed: int,
              device: str) -> Path:
        from repair.data.prepare import read_clean_pairs

        path = Path(checkpoint_dir) / MODEL
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json_atomic(path, train_table(read_clean_pairs(data_dir, "train")))
        return path

    def finetune(self, base: ModelFiles, pairs: Sequence[tuple[str, str]], valid: Sequence[tuple[str, str]],
                 out: Path, settings: Any, translator: Translator | None, *, patience: int = 15,
                 max_epoch: int = 20, epoch_checkpoints: bool = False, stop_when=None, **common: Any) -> dict:
        """Each epoch learns, as a phrase entry, every pair it translates otherwise (a source given twice: its
        last target); validation is valid_loss."""
        start, out = time.time(), Path(out)
        out.mkdir(parents=True, exist_ok=True)
        table = json.loads(Path(base.checkpoint).read_text(encoding="utf-8"))
        table["phrases"] = dict(table["phrases"])
        curve, best, since, stop = [], float("inf"), 0, None
        for epoch in range(1, max_epoch + 1):
            for src, tgt in dict(pairs).items():
                key = source_key(src)
                if key and translate_one(table, src) != tgt:
                    table["phrases"][key] = tgt
            loss = valid_loss(table, valid)
            curve.append({"epoch": epoch, "valid_loss": loss})
            if epoch_checkpoints:
                write_json_atomic(out / f"checkpoint{epoch}.json", table)
            if loss <= best:
                best, since = loss, 0
                write_json_atomic(out / "checkpoint_best.json", table)
            else:
                since += 1
            if stop_when is not None and stop_when(epoch):
                stop = {"reason": "stop_when", "epoch": epoch}
            elif patience and since >= patience:
                stop = {"reason": "patience", "epoch": epoch}
            if stop:
                break
        return {"best_checkpoint": str(out / "checkpoint_best.json"), "epochs": len(curve),
                "best_valid_loss": min(r["valid_loss"] for r in curve), "curve": curve,
                "stop": stop or {"reason": "max_epoch", "epoch": len(curve)}, "seconds": round(time.time() - start, 2)}
