"""What a repair did, in the three measures of model editing, from the files two models' runs wrote.

- efficacy: the corrected sources themselves (repair.stats.verify_fixes);
- generality: the same kind of case elsewhere: held-out sentences with Purity issues (McNemar on
  sentences, not on Purity's pairs, which share their sentence's translation), held-out texts
  translated exactly as their reference, and the recall of the words corrections put in (on the held-out
  and BLEU-test sentences, and on the held-out ones alone); and its reach: how many held-out sentences with
  issues show a change that a correction made (a repair that learns what its corrections changed can only
  carry that far), and which held-out sentences changed, with the corrected words and changes they gained;
- locality: everything else: texts whose English contains no corrected source, how many changed,
  exact-match transitions against their reference (sign test) and the mean sentence chrF change
  with its bootstrap interval.

Every function takes plain values; repair.stages.verify reads the files and calls them.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from repair.text import PUNCTUATION, contains_any, singular, source_key  # noqa: F401 (used here and by callers)
from repair.stats import bootstrap_mean_ci, mcnemar_exact, sign_test, squeeze

MCNEMAR = "McNemar exact (binomial on discordant sentences)"


# ---------------------------------------------------------------- generality


def sentence_generality(sentences: Sequence[str], pairs: Sequence[Mapping], before_ids: set[str],
                        after_ids: set[str]) -> dict:
    """Held-out sentences with issues before and after: a sentence has issues when any of its Purity cases
    (`pairs`: {"id", "sentence"}) is an issue (its id in `before_ids` / `after_ids`); McNemar on sentences.
    Each distinct sentence counts once; one without cases has none."""
    keys = list(dict.fromkeys(" ".join(s.split()) for s in sentences if s.strip()))
    flagged_before = {" ".join(p["sentence"].split()) for p in pairs if p["id"] in before_ids}
    flagged_after = {" ".join(p["sentence"].split()) for p in pairs if p["id"] in after_ids}
    test = mcnemar_exact([k in flagged_before for k in keys], [k in flagged_after for k in keys])
    return {"sentences": len(keys), "with_issues_before": sum(k in flagged_before for k in keys),
            "with_issues_after": sum(k in flagged_after for k in keys), "resolved": test["resolved"],
            "new": test["new"], "p_value": test["p_value"], "test": MCNEMAR}


def exact_generality(texts: Sequence[str], references: Mapping[str, str] | None, before: Mapping[str, str],
                     after: Mapping[str, str]) -> dict | None:
    """Texts (those with a reference) translated exactly as their reference, whitespace aside, before and
    after; McNemar on texts. None without references."""
    if references is None:
        return None
    rows = [(squeeze(before.get(t)) == squeeze(r), squeeze(after.get(t)) == squeeze(r))
            for t in dict.fromkeys(texts) if (r := references.get(t)) is not None]
    test = mcnemar_exact([b for b, _ in rows], [a for _, a in rows])
    return {"texts": len(rows), "before": sum(b for b, _ in rows), "after": sum(a for _, a in rows),
            "lost": test["resolved"], "gained": test["new"], "p_value": test["p_value"], "test": MCNEMAR}


def is_word(w: str, stop: set[str]) -> bool:
    """Whether one of jieba's words counts: not empty, not a stop token, not punctuation alone."""
    return bool(w) and w not in stop and not all(c in PUNCTUATION for c in w)


def words(text: str, stop_tokens: Iterable[str] = ()) -> set[str]:
    """jieba's words of a Chinese text, stop tokens, whitespace and punctuation left out."""
    import jieba

    stop = set(stop_tokens)
    return {w for w in (t.strip() for t in jieba.lcut(squeeze(text))) if is_word(w, stop)}


def correction_terms(corrections: Sequence[Mapping], stop_tokens: Iterable[str] = ()) -> list[str]:
    """The words a correction put in that the model's translation lacked (jieba's words of the correction
    that the translation does not contain; containment, not word sets, as jieba may segment the two
    differently), over all corrections, sorted."""
    terms: set[str] = set()
    for c in corrections:
        had = squeeze(c.get("translation"))
        terms |= {w for w in words(c["correction"], stop_tokens) if w not in had}
    return sorted(terms)


def term_recall(terms: Sequence[str], rows: Sequence[Mapping]) -> dict:
    """One-shot recall of the corrections' words: over `rows` ({"reference", "before", "after"}) whose
    reference contains a term, a row recalls when its translation contains every term its reference
    contains; before vs after, McNemar on sentences."""
    before, after = [], []
    for r in rows:
        ref = squeeze(r.get("reference"))
        wanted = [t for t in terms if t in ref]
        if not ref or not wanted:
            continue
        b, a = squeeze(r["before"]), squeeze(r["after"])
        before.append(all(t in b for t in wanted))
        after.append(all(t in a for t in wanted))
    test = mcnemar_exact([not x for x in before], [not x for x in after])  # "resolved": a miss became a recall
    return {"terms": len(terms), "sentences": len(before), "before": sum(before), "after": sum(after),
            "gained": test["resolved"], "lost": test["new"], "p_value": test["p_value"], "test": MCNEMAR}


def changes(translation: str, correction: str, stop_tokens: Iterable[str] = ()) -> set[tuple[str, str]]:
    """What turns `translation` into `correction`: each run of jieba's words taken out with the run put in
    its place (difflib on the two segmentations), stop tokens, whitespace and punctuation left out of both,
    and the characters both runs begin or end with (jieba may segment the two texts differently); a change
    that is nothing but those is none."""
    import difflib
    import os

    import jieba

    stop = set(stop_tokens)

    def cut(text: str) -> list[str]:
        return [w for w in jieba.lcut(squeeze(text)) if w.strip()]

    def kept(run: list[str]) -> str:
        return "".join(w for w in run if is_word(w, stop))

    def trimmed(x: str, y: str) -> tuple[str, str]:  # characters both runs share at either end are no change
        n = len(os.path.commonprefix([x, y]))
        x, y = x[n:], y[n:]
        n = len(os.path.commonprefix([x[::-1], y[::-1]]))
        return x[:len(x) - n], y[:len(y) - n]

    a, b = cut(translation), cut(correction)
    out = set()
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        change = trimmed(kept(a[i1:i2]), kept(b[j1:j2]))
        if op != "equal" and change[0] != change[1]:
            out.add(change)
    return out


def reach(corrections: Sequence[Mapping], pairs: Sequence[Mapping], before_ids: set[str],
          translations: Mapping[str, str], references: Mapping[str, str] | None,
          stop_tokens: Iterable[str] = ()) -> dict | None:
    """Held-out sentences with issues (before) whose issue texts (with a reference) differ from their
    reference by a change that some correction made to the model's translation (`changes`): the errors
    of a kind the corrections showed. None without references."""
    if references is None:
        return None
    stop = list(stop_tokens)
    corrected = set().union(*(changes(c.get("translation") or "", c["correction"], stop) for c in corrections))
    texts: dict[str, set[str]] = {}
    for p in pairs:
        if p["id"] in before_ids:
            texts.setdefault(" ".join(p["sentence"].split()), set()).update(s["source"] for s in p["sides"])
    shared = 0
    for sources in texts.values():
        found = set().union(*(changes(translations.get(t, ""), references[t], stop) for t in sources
                              if references.get(t) is not None))
        shared += bool(found & corrected)
    return {"sentences_with_issues": len(texts), "with_a_corrected_change": shared, "changes": len(corrected)}


def reach_by_sentence(terms: Sequence[str], rows: Sequence[Mapping], corrections: Sequence[Mapping] = (),
                      taught: Sequence[str] = (), stop_tokens: Iterable[str] = ()) -> dict:
    """The reach sentence by sentence: each row ({"source", "reference" or None, "before", "after"}, a held-out
    sentence) translated differently after the repair, with what its new translation gained: `gained`, the
    corrections' words (`terms`) it holds that the old one did not (`right`: those its reference holds too);
    `changes`, the changes some correction made (`changes`) that its own change repeats; `taught_words`, the
    words a scoped edit taught that its English holds (what sent it to the fine-tuned model)."""
    stop = list(stop_tokens)
    corrected = set().union(*(changes(c.get("translation") or "", c["correction"], stop) for c in corrections))
    scope = {singular(w): w for w in taught}
    listed = []
    for r in rows:
        b, a = squeeze(r["before"]), squeeze(r["after"])
        if b == a:
            continue
        ref = squeeze(r.get("reference"))
        gained = [t for t in terms if t in a and t not in b]
        listed.append({"source": r["source"], "before": r["before"], "after": r["after"], "gained": gained,
                       "right": [t for t in gained if ref and t in ref],
                       "changes": sorted(map(list, changes(r["before"], r["after"], stop) & corrected)),
                       "taught_words": sorted({scope[w] for w in map(singular, source_key(r["source"]).split())
                                               if w in scope})})
    return {"sentences": len({r["source"] for r in rows}), "changed": len(listed),
            "gained_a_word": sum(bool(x["gained"]) for x in listed),
            "gained_a_right_word": sum(bool(x["right"]) for x in listed),
            "repeat_a_change": sum(bool(x["changes"]) for x in listed), "changed_sentences": listed}


# ---------------------------------------------------------------- locality


def chrf_scorer():
    from sacrebleu.metrics import CHRF

    metric = CHRF()
    return lambda hyp, ref: float(metric.sentence_score(hyp, [ref]).score)


def locality(rows: Sequence[Mapping], corrected_sources: Iterable[str], *, samples: int = 1000,
             seed: int = 12345, taught: Sequence[str] = ()) -> dict:
    """Texts unrelated to the corrections: rows ({"kind", "source", "reference" or None, "before",
    "after"}) whose English contains no corrected source (case and whitespace aside), each text once.

    changed: translated differently; correct_before, correct_to_wrong, wrong_to_correct: exact matches
    of the reference (whitespace aside), with a two-sided sign test on the transitions; chrf_delta: the
    mean sentence chrF change over the texts with a reference, with its 95% bootstrap interval.
    taught: the words a scoped edit taught (finetune.scope=terms); the counts are then also given apart for
    the texts that hold one of them (`taught_words`: the edit's reach beyond its corrected sources) and the
    others (`outside`).
    """
    keys = {source_key(s) for s in corrected_sources}
    seen: set[str] = set()
    unrelated = []
    for r in rows:
        k = source_key(r["source"])
        if k in seen or contains_any(r["source"], keys):
            continue
        seen.add(k)
        unrelated.append(r)
    chrf = chrf_scorer()
    counts = {"texts": 0, "changed": 0, "with_reference": 0, "correct_before": 0, "correct_to_wrong": 0,
              "wrong_to_correct": 0}
    by_kind: dict[str, dict] = {}
    deltas = []
    parts: dict[str, dict] = {}
    if taught:
        from repair.text import singular

        words = frozenset(map(singular, taught))
        parts = {name: {"texts": 0, "changed": 0, "correct_before": 0, "correct_to_wrong": 0, "wrong_to_correct": 0}
                 for name in ("taught_words", "outside")}
    for r in unrelated:
        group = by_kind.setdefault(r.get("kind") or "text", {"texts": 0, "changed": 0, "correct_before": 0,
                                                              "correct_to_wrong": 0, "wrong_to_correct": 0})
        b, a = squeeze(r["before"]), squeeze(r["after"])
        inc = {"texts": 1, "changed": int(b != a)}
        ref = r.get("reference")
        if ref is not None:
            good_b, good_a = b == squeeze(ref), a == squeeze(ref)
            inc.update(with_reference=1, correct_before=int(good_b), correct_to_wrong=int(good_b and not good_a),
                       wrong_to_correct=int(good_a and not good_b))
            deltas.append(0.0 if b == a else chrf(r["after"], ref) - chrf(r["before"], ref))
        for key, n in inc.items():
            counts[key] += n
            if key in group:
                group[key] += n
        if taught:
            held = not words.isdisjoint(map(singular, source_key(r["source"]).split()))
            part = parts["taught_words" if held else "outside"]
            for key in part:
                part[key] += inc.get(key, 0)
    ci = bootstrap_mean_ci(deltas, samples=samples, seed=seed)
    return {
        **parts,
        **counts,
        "changed_share": counts["changed"] / counts["texts"] if counts["texts"] else None,
        "correct_to_wrong_share": (counts["correct_to_wrong"] / counts["correct_before"]
                                   if counts["correct_before"] else None),
        "p_value": sign_test(counts["correct_to_wrong"], counts["wrong_to_correct"]),
        "test": "sign test (binomial on correct -> wrong against wrong -> correct)",
        "chrf_delta": round(sum(deltas) / len(deltas), 4) if deltas else None,
        "chrf_delta_ci": [round(x, 4) for x in ci] if ci else None,
        "chrf": "sacrebleu sentence chrF, mean after - before, 95% percentile bootstrap over texts",
        "by_kind": by_kind,
    }


# ---------------------------------------------------------------- BLEU on lines no fine-tuning pair came from


def bleu_lines(test_en: Sequence[str], finetune_sources: Iterable[str]) -> tuple[list[int], int]:
    """Indices of the BLEU-test lines no fine-tuning source came from (whitespace-normalized English equal),
    and how many lines left the set."""
    tuned = {" ".join(s.split()) for s in finetune_sources}
    kept = [i for i, en in enumerate(test_en) if " ".join(en.split()) not in tuned]
    return kept, len(test_en) - len(kept)
