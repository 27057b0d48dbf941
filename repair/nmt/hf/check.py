"""The check of a transformers folder before it is tested (repair.face.Translator.check_model): the share of source
tokens its tokenizer maps to its unknown token, and its translations (repair.nmt.modelcheck's measures)."""

from __future__ import annotations

from typing import Callable, Sequence

from repair.nmt.modelcheck import UNKNOWN_MAX, sample, translation_measures, translation_problems


def check_transformers_model(tokenizer, translate: Callable[[list[str]], list[str]], sentences: Sequence[str],
                             source_prefix: str = "") -> dict:
    """The check of a transformers folder: the share of source tokens its tokenizer maps to its unknown token, and
    its translations (markers, repetition). Its tokenizer is its own, so no other setting is tried."""
    sentences = sample(sentences)
    record: dict = {"problems": [], "checked": bool(sentences)}
    unk = getattr(tokenizer, "unk_token_id", None)
    if sentences and unk is not None:
        special = set(tokenizer.all_special_ids) - {unk}
        ids = [i for row in tokenizer([source_prefix + s for s in sentences])["input_ids"] for i in row
               if i not in special]
        share = sum(i == unk for i in ids) / len(ids) if ids else 0.0
        record["src"] = {"unknown": round(share, 3)}
        if share > UNKNOWN_MAX:
            record["problems"].append({"side": "src", "what": f"{share:.0%} of its source tokens are unknown to its "
                                                              f"tokenizer"})
    if sentences and not record["problems"]:
        record["translations"] = translation_measures(translate(list(sentences)))
        record["problems"] += translation_problems(record["translations"])
    record["stop"] = bool(record["problems"])
    record["message"] = None if not record["problems"] else (
        "the model does not read or write text as it was trained to (" +
        "; ".join(f"{p['side']}: {p['what']}" for p in record["problems"]) + "): check its folder's tokenizer files")
    return record
