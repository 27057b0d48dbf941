"""report.json, report.md and the plots of one run of the loop."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path

from repair.fileio import write_json_atomic, write_text_atomic

PACKAGES = ["repair", "torch", "fairseq-fixed", "sacrebleu", "sentencepiece", "spacy", "stanza", "jieba", "hydra-core",
            "transformers", "peft", "ctranslate2"]


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def issues_at(summary: dict, threshold) -> int:
    """Issues at threshold d from a Purity summary (its `issues` maps str(d) to a count)."""
    return int(summary["issues"].get(str(threshold), 0))


def relation_figures(summary: dict, review: dict, threshold) -> dict:
    """Per test relation: cases, issues at d, and the review's erroneous translations and precision."""
    judged = review.get("by_relation") or {}
    out = {}
    for name, f in (summary.get("by_relation") or {}).items():
        j = judged.get(name) or {}
        out[name] = {"cases": f["cases"], "issues": issues_at(f, threshold), "issues_per_threshold": f["issues"],
                     "erroneous_translations": j.get("erroneous_translations"), "judged": j.get("judged", 0),
                     "precision": j.get("precision")}
    return out


def suggestion_seconds(review: dict, summary: dict) -> dict:
    """review.suggestions gets the test stage's seconds: the suggestion step's and the rest's."""
    seconds = summary.get("seconds") or {}
    if "suggestions" not in seconds:
        return {}
    step = seconds["suggestions"]
    rest = round(sum(v for k, v in seconds.items() if k not in ("suggestions", "total")), 3)
    figures = {**(review.get("suggestions") or {}), "seconds": step, "test_other_seconds": rest,
               "seconds_share": round(step / rest, 4) if rest else None}
    return {"review": {**{k: v for k, v in review.items() if k not in ("notes", "by_relation")}, "suggestions": figures}}


def cycle_summary(c: dict, threshold) -> dict:
    test, review, verify, ft = c["test"], c["review"], c["verify"], c["finetune"]
    out = {
        "cycle": c["cycle"],
        "purity": {
            "before": {
                "issues": issues_at(test["summary"], threshold),
                "erroneous_translations": len(c["corrections"]),
                "issues_per_threshold": test["summary"]["issues"],
                "by_relation": relation_figures(test["summary"], review, threshold),
            },
        },
        "review": {k: v for k, v in review.items() if k not in ("notes", "by_relation")},
        # the suggestion step's seconds beside the rest of the same test stage's
        **suggestion_seconds(review, test["summary"]),
        "review_notes": review.get("notes") or {},
        "corrections": len(c["corrections"]),
    }
    if test["summary"].get("translator"):  # the translator tested and, for CTranslate2, its measured fidelity
        out["translator"] = test["summary"]["translator"]
    if "slice" in c:
        idx = c["slice"]
        out["tested"] = {"sentences": len(idx), "lines": f"{idx[0] + 1}-{idx[-1] + 1}" if idx else None}
    if verify is None:
        return out
    after = verify["purity_after"]
    out["purity"]["after"] = {
        "issues": issues_at(after, threshold),
        "issues_per_threshold": after["issues"],
        "regressions": len(verify["regressions"]),
        "by_relation": {name: {"issues": issues_at(f, threshold), "issues_per_threshold": f["issues"]}
                        for name, f in (after.get("by_relation") or {}).items()},
    }
    if after.get("translator"):  # the fine-tuned model's translator (its runtime, where the family has several)
        out["translator_finetuned"] = after["translator"]
    out.update(
        fixed=verify["fixes"]["fixed"],
        fix_rate=verify["fixes"]["fix_rate"],
        fixed_within_d=verify["fixes"].get("fixed_within_d"),
        heldout=verify.get("heldout"),
        changes=verify.get("changes"),
        bleu=verify["bleu"],
        finetune={
            "epochs": ft["epochs"],
            "best_valid_loss": ft["best_valid_loss"],
            "curve": ft.get("curve", []),
            "checkpoint": ft["best_checkpoint"],
            **({"scope": ft["scope"]} if ft.get("scope") else {}),
            **{k: ft[k] for k in ("stop", "warnings", "encoding", "probe_loss_before", "probe_loss_after",
                                   "learning_rate") if k in ft},
        },
        regressions=verify["regressions"],
    )
    if verify.get("repair"):
        out["repair"] = verify["repair"]
    return out


def plot(run_dir: Path, cycles: list[dict], thresholds: list) -> dict:
    """plots/valid_loss.png (fine-tuning) and plots/issues.png (issues per threshold, before and after)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def save(name: str, title: str, ylabel: str, draw) -> str:
        fig, ax = plt.subplots(figsize=(5, 3.2), dpi=120)
        draw(ax)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.legend()
        fig.tight_layout()
        path = run_dir / "plots" / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
        plt.close(fig)
        return str(path.relative_to(run_dir))

    plots = {}
    last = cycles[-1]
    curve = (last.get("finetune") or {}).get("curve") or []
    if curve:
        def draw_curve(ax):
            epochs = [p["epoch"] for p in curve]
            ax.plot(epochs, [p["valid_loss"] for p in curve], marker="o", label="validation")
            if all(p.get("train_loss") is not None for p in curve):
                ax.plot(epochs, [p["train_loss"] for p in curve], marker=".", linestyle="--", label="train")
            ax.set_xlabel("epoch")

        plots["valid_loss"] = save("valid_loss", "Fine-tuning loss", "loss", draw_curve)
    before = last["purity"]["before"].get("issues_per_threshold") or {}
    after = (last["purity"].get("after") or {}).get("issues_per_threshold") or {}
    if before:
        def draw_issues(ax):
            xs = list(range(len(thresholds)))
            w = 0.38
            ax.bar([x - w / 2 for x in xs], [before.get(str(t), 0) for t in thresholds], w, label="before")
            if after:
                ax.bar([x + w / 2 for x in xs], [after.get(str(t), 0) for t in thresholds], w, label="after")
            ax.set_xticks(xs, [f"d={t}" for t in thresholds])

        plots["issues"] = save("issues", "Purity issues per threshold", "suspicious issues", draw_issues)
    verified = [c for c in cycles if "fixed" in c]
    if len(cycles) > 1 and verified:
        def draw_cycles(ax):
            ks = [c["cycle"] for c in verified]
            series = {
                "issues found": [c["purity"]["before"]["issues"] for c in verified],
                "corrections": [c["corrections"] for c in verified],
                "fixed": [c["fixed"] for c in verified],
                "held-out issues": [(c.get("heldout") or {}).get("issues_after") for c in verified],
                "degraded": [(c.get("changes") or {}).get("degraded") for c in verified],
            }
            for label, ys in series.items():
                if all(y is not None for y in ys):
                    ax.plot(ks, ys, marker="o", label=label)
            ax.set_xlabel("cycle")
            ax.set_xticks(ks)
            bleu = ax.twinx()
            bleu.plot(ks, [c["bleu"]["after"] for c in verified], color="black", linestyle="--", marker="s")
            bleu.set_ylabel("BLEU after (dashed)")

        plots["cycles"] = save("cycles", "Per cycle", "count", draw_cycles)
    return plots


def runtimes(translator: dict) -> list[str]:
    """Which runtime translated, where a translator says (a transformers model: ctranslate2, or transformers and
    why), a scoped edit's models each."""
    if "edited" in translator:
        return [f"{role}: {r}" for role in ("edited", "fallback") for r in runtimes(translator.get(role) or {})]
    if not translator.get("runtime"):
        return []
    return [translator["runtime"] + (f" ({translator['why']})" if translator.get("why") else "")]


def translator_markdown(translator: dict, finetuned: dict | None = None) -> list[str]:
    """The runtime that translated, the compute type a CTranslate2 translator tested with, and how its translations
    agree with its model's own translator's (fairseq's, or transformers')."""
    lines = []
    for who, record in (("the model tested", translator), ("the fine-tuned model", finetuned or {})):
        if runtimes(record):
            lines.append(f"- Runtime of {who}: {'; '.join(runtimes(record))}")
    f = translator.get("fidelity")
    if not f:
        return lines
    from repair.purity.translators import fidelity_line

    return [*lines, f"- Translator {translator['name']}, {fidelity_line(f)}"]


def model_origin(model: dict) -> str:
    return f" (brought along: `{model['checkpoint']}`)" if model.get("trained_here") is False else ""


def markdown(report: dict) -> str:
    lines = ["# Repair report", ""]
    r = report
    if r.get("warnings"):
        lines += ["**Warnings**", ""] + [f"- {w}" for w in r["warnings"]] + [""]
    lines += [
        f"Model `{r['model']['name']}`{model_origin(r['model'])} on data `{r['data']['name']}`, parser "
        f"`{r['parser']['name']}`, "
        f"review `{r['review']['method']}`, threshold d = {r['threshold']}.",
        "",
        "| | before | after |",
        "| --- | --- | --- |",
        f"| Purity issues (d = {r['threshold']}{', the last cycle' if len(r.get('cycles', [])) > 1 else ''}) | "
        f"{r['purity']['before']['issues']} | "
        f"{r['purity'].get('after', {}).get('issues', '–')} |",
    ]
    if "bleu" in r:
        b = r["bleu"]
        lines.append(f"| BLEU ({b['sentences']} sentences) | {b['before']:.2f} | {b['after']:.2f} |")
    lines += [""]
    lines += relations_markdown(r)
    lines.append(
        f"- Erroneous translations corrected: **{r['corrections']}** "
        f"(review precision: {fmt(r['review'].get('precision'))})"
    )
    if "fixed" in r:
        lines.append(f"- Fixed after fine-tuning: **{r['fixed']} of {r['corrections']}** (fix rate {fmt(r['fix_rate'])}); "
                     f"within the Purity threshold (bag-of-words distance to the correction ≤ {r['threshold']}): "
                     f"**{r['fixed_within_d']}**")
        lines += bleu_markdown(r["bleu"])
        ft = r["finetune"]
        lines += finetune_markdown(ft)
        if ft.get("scope"):
            sc = ft["scope"]
            taught = sc.get("words") or []
            if sc["kind"] == "source":
                reach = "containing a corrected source"
            elif sc["kind"] == "terms":
                listed = f" ({', '.join(taught[:12])}{', ...' if len(taught) > 12 else ''})" if taught else ""
                reach = f"containing a corrected source or one of the {len(taught)} words the fine-tune taught{listed}"
            else:
                reach = f"holding {sc['share']:.0%} of a corrected source's content words"
            lines.append(f"- A scoped edit (`finetune.scope={sc['kind']}`): the fine-tuned model translates the inputs "
                         f"{reach} ({sc['sources']} corrected sources), the base model `{sc['fallback']}` all others")
            if sc.get("words_checkpoint"):
                lines.append(f"  - the inputs holding a taught word and no corrected source: `{sc['words_checkpoint']}` "
                             f"(the fine-tune's lowest validation loss, `finetune.scope_words_epoch=loss`)")
        lines.append(f"- New Purity issues the base model did not have (regressions): {r['purity']['after']['regressions']}")
    lines += suggestions_markdown(r["review"].get("suggestions"))
    lines += projection_markdown(r["review"])
    lines += translator_markdown(r.get("translator") or {}, r.get("translator_finetuned"))
    notes = r.get("review_notes") or {}
    superseded = notes.get("superseded") if isinstance(notes, dict) else None
    if superseded:
        lines.append(f"- Sources corrected more than once (the latest correction was used): {len(superseded)}")
        lines += [f"  - {s}" for s in superseded]
    lines += ["", "## Time per stage (s)", "", "| stage | seconds |", "| --- | --- |"]
    lines += [f"| {k} | {v:.1f} |" for k, v in r["seconds"].items()]
    if r.get("resumed"):
        lines += ["", f"Resumed: the stages {', '.join(r['resumed'])} were already done when the run was restarted."]
    for name, path in r.get("plots", {}).items():
        lines += ["", f"![{name}]({path})"]
    lines += repair_markdown(r)
    lines += heldout_markdown(r)
    lines += changes_markdown(r)
    lines += cycles_markdown(r)
    lines += regressions_markdown(r.get("regressions") or [])
    lines += ["", "## Reproduce", "", "```", r["command"], "```", "", f"Versions: {r['versions']}", ""]
    return "\n".join(lines)


def bleu_markdown(b: dict) -> list[str]:
    """BLEU before and after, whether the change is significant, and sacrebleu's signature (its tokenizer,
    version and settings: what makes the figure comparable with a published one)."""
    verdict = "a significant change" if b["significant"] else "not a significant change"
    lines = [f"- BLEU {b['before']:.2f} → {b['after']:.2f} (Δ {b['delta']:+.2f}, paired bootstrap p = {b['p_value']:.3f}): "
             f"**{verdict}** at α = {b['alpha']}"]
    if b.get("signature"):
        lines.append(f"  (sacrebleu's corpus BLEU, signature `{b['signature']}`)")
    return lines


def finetune_markdown(ft: dict) -> list[str]:
    """The fine-tune's epochs, its best validation loss, why it stopped, and what it checked first."""
    best = ft.get("best_valid_loss")
    stop = (ft.get("stop") or {}).get("why")
    lines = [f"- Fine-tuning: {ft['epochs']} epochs, best validation loss "
             f"{'none (never validated)' if best is None else f'{best:.4f}'}" + (f"; stopped: {stop}" if stop else "")]
    rate = ft.get("learning_rate") or {}
    if rate.get("lr") is not None and rate.get("lr") != rate.get("given"):
        lines.append(f"  - learning rate {rate['lr']:g}: {rate.get('why')}")
    enc = ft.get("encoding") or {}
    if enc.get("checked"):
        lines.append(f"  - the base model's validation loss on the fine-tune's encoding {enc['base_valid_loss']} (its "
                     f"checkpoint recorded {enc['recorded_valid_loss']}): the encoding is the model's own")
    elif enc:
        lines.append(f"  - the fine-tune's encoding was not checked ({enc.get('why')})")
    if ft.get("probe_loss_before") is not None and ft.get("probe_loss_after") is not None:
        lines.append(f"  - the corrections' loss {ft['probe_loss_before']:.3f} (base) → {ft['probe_loss_after']:.3f} "
                     f"(fine-tuned), bits per token")
    return lines


def suggestions_markdown(s: dict | None) -> list[str]:
    """The suggested corrections: how many sides had one, how many were right as they are, characters saved."""
    if not s:
        return []

    def share(a, b) -> str:
        return f"{a / b:.0%}" if b else "–"

    out = []
    if "wrong_sides" in s:
        out.append(f"- Suggested corrections (judged by the references): of {s['wrong_sides']} wrong translations, "
                   f"{s['offered']} had a suggestion and **{s['accepted']} ({share(s['accepted'], s['wrong_sides'])})** "
                   f"were the reference as they are; characters to edit **{s['chars_to_edit_with']}** with them against "
                   f"{s['chars_to_edit_without']} from the pre-fill alone "
                   f"({share(s['chars_to_edit_without'] - s['chars_to_edit_with'], s['chars_to_edit_without'])} fewer)")
    if s.get("projected_prefills") or s.get("by_projection"):
        out.append(f"- Phrase sides pre-filled with the projection of their sentence's correction (earlier or in the same issue): "
                   f"{s['projected_prefills']}, {s['projected_equal']} of them the reference as they are; characters "
                   f"to edit from the pre-fill {s['chars_to_edit_without']} against "
                   f"{s['chars_to_edit_without_projection']} without the projections"
                   + (f" ({s['by_projection']} of the wrong sides judged by projection: their reference is one)"
                      if s.get("by_projection") else ""))
    if "from_memory" in s:
        out.append(f"- Review memory (words earlier corrections taught): {s['from_memory']} of those suggestions came from "
                   f"it, {s['memory_accepted']} of them the reference as they are ({s['memory_searched']} searches, "
                   f"{s['memory_seconds']:.1f} s during the review)")
    if "seconds" in s:
        out.append(f"- Suggestion step: {s['seconds']:.1f} s beside the test stage's other {s['test_other_seconds']:.1f} s "
                   f"({share(s['seconds'], s['test_other_seconds'])} of it)")
    return out


def projection_markdown(review: dict) -> list[str]:
    """Phrase references projected from sentence references: the sides judged by them, and how often a projection
    is the phrase's own reference where it has one (the demo)."""
    out = []
    a = review.get("alignment")
    if a:
        out.append(f"- Word alignment (eflomal, learnt on {a['pairs']} training pairs, Chinese in "
                   f"{'jieba words' if a['unit'] == 'word' else 'characters'}): {a['seconds']:.1f} s to learn "
                   f"(cached in the data folder)")
    if review.get("sides_by_projection") is not None and (a or review.get("sides_by_projection")):
        out.append(f"- Phrase sides judged by the projection of their sentence's reference: "
                   f"**{review['sides_by_projection']}** ({review.get('corrections_by_projection', 0)} corrections "
                   f"made with one); sides still without a reference: {review.get('sides_not_judged', 0)}")
    p = review.get("projection")
    if p and p.get("sides"):
        sure = p["by_confidence"].get(f">={p['threshold']}") or {}
        out.append(f"- Projections against the phrases' own references: **{p['equal']} of {p['sides']} "
                   f"({p['equal_share']:.0%})** equal (whitespace aside); {p['projected']} had a projection"
                   + (f"; of those at confidence ≥ {p['threshold']}, {sure['equal']} of {sure['sides']} equal"
                      if sure else ""))
    return out


def regressions_markdown(issues: list[dict], most: int = 50) -> list[str]:
    """New issues of the fine-tuned model, each side's text and translation."""
    if not issues:
        return []
    lines = ["", "## Regressions", ""]
    for i in issues[:most]:
        sides = " / ".join(f"{s['role']} “{s['source']}” → {s['translation']}" for s in i["sides"])
        lines.append(f"- `{i['id']}` {i['relation']}: {sides}")
    return lines


def relations_markdown(r: dict) -> list[str]:
    before = r["purity"]["before"].get("by_relation") or {}
    if len(before) < 2:
        return []
    after = r["purity"].get("after", {}).get("by_relation") or {}
    lines = ["| relation | cases | issues before | issues after | erroneous translations | precision |",
             "| --- | --- | --- | --- | --- | --- |"]
    for name, f in before.items():
        lines.append(f"| {name} | {f['cases']} | {f['issues']} | {dash(after.get(name, {}).get('issues'))} | "
                     f"{dash(f['erroneous_translations'])} | {fmt(f['precision'])} |")
    return lines + [""]


def pvalue(x) -> str:
    return "–" if x is None else f"{x:.3g}"


def share(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def repair_markdown(r: dict) -> list[str]:
    """Efficacy, generality and locality of the repair (the run's: every cycle's corrections)."""
    m = r.get("repair")
    if not m:
        return []
    e, g, loc = m["efficacy"], m["generality"], m["locality"]
    several = len(r.get("cycles", [])) > 1
    lines = ["", "## Efficacy, generality, locality", "",
             ("Every cycle's corrections, the first base model against the last fine-tuned one."
              if several else "The base model against the fine-tuned one."), "",
             "| measure | units | before | after | p |", "| --- | --- | --- | --- | --- |",
             f"| efficacy: corrections translated as corrected | {e['corrections']} corrections | – | "
             f"{e['fixed']} ({fmt(e['fix_rate'])}) | – |"]
    s = g.get("sentences")
    if s:
        lines.append(f"| generality: held-out sentences with Purity issues | {s['sentences']} sentences | "
                     f"{s['with_issues_before']} | {s['with_issues_after']} | {pvalue(s['p_value'])} |")
    p = g.get("pairs")
    if p:
        lines.append(f"| held-out Purity pairs that are issues (pairs share their sentence's translation: "
                     f"not independent) | {p['pairs']} pairs | {p['issues_before']} | {p['issues_after']} | "
                     f"{pvalue(p['p_value'])} |")
    x = g.get("exact")
    if x:
        lines.append(f"| generality: held-out texts translated exactly as their reference | {x['texts']} texts | "
                     f"{x['before']} | {x['after']} | {pvalue(x['p_value'])} |")
    t = g.get("term_recall")
    if t:
        lines.append(f"| generality: sentences recalling every corrected word their reference has "
                     f"({t['terms']} words) | {t['sentences']} sentences | {t['before']} | {t['after']} | "
                     f"{pvalue(t['p_value'])} |")
    th = g.get("term_recall_heldout")
    if th:
        lines.append(f"| generality: held-out sentences among them | {th['sentences']} sentences | {th['before']} | "
                     f"{th['after']} | {pvalue(th['p_value'])} |")
    lines.append(f"| locality: unrelated texts translated exactly as their reference | {loc['with_reference']} "
                 f"texts | {loc['correct_before']} | {loc['correct_before'] - loc['correct_to_wrong'] + loc['wrong_to_correct']} | "
                 f"{pvalue(loc['p_value'])} |")
    ci = loc.get("chrf_delta_ci")
    lines += ["", f"- Locality: of {loc['texts']} texts whose English contains no corrected source (BLEU-test lines "
                  f"and held-out texts), **{loc['changed']} ({share(loc['changed_share'])})** are translated "
                  f"differently; correct → wrong **{loc['correct_to_wrong']}** of {loc['correct_before']} correct "
                  f"({share(loc['correct_to_wrong_share'])}), wrong → correct {loc['wrong_to_correct']} "
                  f"(sign test p = {pvalue(loc['p_value'])}); mean sentence chrF change "
                  f"{dash(loc['chrf_delta'])} (95% bootstrap interval "
                  f"{'–' if not ci else f'{ci[0]:+.3f} to {ci[1]:+.3f}'})."]
    if "taught_words" in loc:
        t, o = loc["taught_words"], loc["outside"]
        lines.append(f"- Of them, {t['texts']} hold a word the fine-tune taught (the edit's reach past its corrected "
                     f"sources): **{t['changed']}** changed, correct → wrong {t['correct_to_wrong']} of "
                     f"{t['correct_before']}, wrong → correct {t['wrong_to_correct']}; of the {o['texts']} others, "
                     f"**{o['changed']}** changed, correct → wrong {o['correct_to_wrong']} of {o['correct_before']}.")
    rc = g.get("reach")
    if rc:
        lines.append(f"- Reach: {rc['with_a_corrected_change']} of the {rc['sentences_with_issues']} held-out sentences "
                     f"with issues differ from their references by a change one of the corrections made "
                     f"({rc['changes']} changes: words taken out and put in); a repair that learns what its "
                     f"corrections changed can only carry that far.")
    lines += reach_markdown(g.get("reach_sentences"))
    per_cycle = [c for c in r.get("cycles", []) if c.get("repair")]
    if several and per_cycle:
        lines += ["", "Per cycle (each cycle's corrections, its base model against its fine-tuned one):", "",
                  "| cycle | fixed | held-out sentences with issues (p) | exact (p) | term recall (p) | "
                  "unrelated changed | correct → wrong | chrF change |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for c in per_cycle:
            ce, cg, cl = c["repair"]["efficacy"], c["repair"]["generality"], c["repair"]["locality"]
            cs, cx, ct = cg.get("sentences") or {}, cg.get("exact") or {}, cg.get("term_recall") or {}
            lines.append(
                f"| {c['cycle']} | {ce['fixed']} of {ce['corrections']} | {dash(cs.get('with_issues_before'))} → "
                f"{dash(cs.get('with_issues_after'))} ({pvalue(cs.get('p_value'))}) | {dash(cx.get('before'))} → "
                f"{dash(cx.get('after'))} ({pvalue(cx.get('p_value'))}) | {dash(ct.get('before'))} → "
                f"{dash(ct.get('after'))} ({pvalue(ct.get('p_value'))}) | {cl['changed']} of {cl['texts']} | "
                f"{cl['correct_to_wrong']} of {cl['correct_before']} | {dash(cl['chrf_delta'])} |")
    b = r.get("bleu") or {}
    if "excluded" in b:
        lines.append(f"- BLEU is scored on the {b['sentences']} of {b['lines']} test lines no fine-tuning pair came "
                     f"from ({b['excluded']} left out).")
    return lines


def reach_markdown(rs: dict | None, shown: int = 15) -> list[str]:
    """The held-out sentences the repair changed, with the corrected words and changes they gained."""
    if not rs:
        return []
    lines = [f"- Reach by sentence: {rs['changed']} of the {rs['sentences']} held-out sentences are translated "
             f"differently; {rs['gained_a_word']} gained a word a correction put in ({rs['gained_a_right_word']} one "
             f"their reference holds), {rs['repeat_a_change']} repeat a change a correction made "
             f"(`repair.generality.reach_sentences` in report.json lists them all)."]
    listed = sorted(rs["changed_sentences"], key=lambda x: (-len(x["right"]), -len(x["changes"]), x["source"]))
    if listed:
        lines += ["", "| held-out sentence | before → after | words gained (in the reference) | changes repeated | "
                      "taught words it holds |", "| --- | --- | --- | --- | --- |"]
        for x in listed[:shown]:
            lines.append(f"| {cell(x['source'])} | {cell(x['before'])} → {cell(x['after'])} | "
                         f"{cell(', '.join(x['gained']) or '–')} ({cell(', '.join(x['right']) or '–')}) | "
                         f"{cell('; '.join(f'{a or chr(8709)} → {b or chr(8709)}' for a, b in x['changes']) or '–')} | "
                         f"{cell(', '.join(x['taught_words']) or '–')} |")
    return lines


def heldout_markdown(r: dict) -> list[str]:
    h = r.get("heldout")
    if not h:
        return []
    span = "the first base model and the last fine-tuned one" if len(r.get("cycles", [])) > 1 else \
        "the base and the fine-tuned model"
    return [
        "", "## Held-out sentences", "",
        f"{h['sentences']} input sentences set aside (`purity.holdout`): never reviewed, never fine-tuned on. "
        f"Purity on them with {span}, {h['pairs']} pairs, threshold d = {r['threshold']}:",
        "",
        "| | before | after |",
        "| --- | --- | --- |",
        f"| Purity issues | {h['issues_before']} | {h['issues_after']} |",
        f"| erroneous translations (by reference) | {dash(h['erroneous_before'])} | {dash(h['erroneous_after'])} |",
        "",
        f"- Pairs no longer an issue: {h['resolved']}, newly an issue: {h['new']}; McNemar's exact test "
        f"p = {h['p_value']:.3g}",
    ]


def changes_markdown(r: dict) -> list[str]:
    c = r.get("changes")
    if not c:
        return []
    lines = [
        "", "## Changed translations", "",
        f"Every translation that differs between the models, classed by {c['metric']} against its reference.", "",
        "| set | translations | changed | improved | unchanged | degraded | no reference |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, g in [*c["by_set"].items(), ("all", c)]:
        lines.append(f"| {name} | {g['translations']} | {g['changed']} | {g['improved']} | {g['unchanged']} | "
                     f"{g['degraded']} | {g['no_reference']} |")
    if c["worst"]:
        lines += ["", f"### The {len(c['worst'])} worst degradations", "",
                  "| set | source | reference | before | after | chrF |", "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {w['set']} | {cell(w['source'])} | {cell(w['reference'])} | {cell(w['before'])} | "
                  f"{cell(w['after'])} | {w['chrf_before']:.1f} → {w['chrf_after']:.1f} |" for w in c["worst"]]
    return lines


def cycles_markdown(r: dict) -> list[str]:
    lines = [
        "", "## Cycles", "",
        "Each cycle tests sentences no earlier cycle tested (lines of the input, held-out lines left out).", "",
        "| cycle | sentences tested (lines) | issues found | corrections | fixed | fixed within d | held-out issues "
        "| BLEU after | degraded |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in r.get("cycles", []):
        tested = c.get("tested") or {}
        lines.append(
            f"| {c['cycle']} | {tested.get('sentences', '–')} ({tested.get('lines') or '–'}) | "
            f"{c['purity']['before']['issues']} | {c['corrections']} | {dash(c.get('fixed'))} | "
            f"{dash(c.get('fixed_within_d'))} | {dash((c.get('heldout') or {}).get('issues_after'))} | "
            f"{dash(c.get('bleu', {}).get('after'))} | {dash((c.get('changes') or {}).get('degraded'))} |"
        )
    e = r.get("input_exhausted")
    if e:
        lines += ["", f"The input was used up after cycle {e['after_cycle']}: all {e['sentences']} sentences that are "
                      "not held out were tested, and the loop stopped."]
    return lines


def dash(x) -> str:
    return "–" if x is None else str(x)


def cell(text) -> str:
    return dash(text).replace("|", "\\|")


def fmt(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def run_warnings(summaries: list[dict]) -> list[str]:
    """What a reader must not miss, per cycle: a fine-tune that did not learn, issues nobody judged, a cycle that
    made no correction."""
    out = []
    for c in summaries:
        k = c["cycle"]
        out += [f"cycle {k}: {w}" for w in (c.get("finetune") or {}).get("warnings") or []]
        review = c.get("review") or {}
        if review.get("not_judged"):
            out.append(f"cycle {k}: {review['not_judged']} of {review.get('total')} issues were not judged (a side "
                       f"without a reference and no wrong side with one); precision counts the judged ones only")
        if not c.get("corrections"):
            out.append(f"cycle {k}: the review made no correction: nothing was fine-tuned")
        elif c.get("fixed") == 0:
            out.append(f"cycle {k}: the fine-tuned model translates none of the {c['corrections']} corrections as "
                       f"corrected")
    return out


def write_report(run_dir: Path, cycles: list[dict], seconds: dict, *, thresholds: list, setup: dict,
                 overall: dict | None = None, exhausted: dict | None = None, resumed: list | None = None) -> Path:
    """setup: what reproduces the run ({"model", "data", "parser", "seed", "command"}), written as it is;
    overall: held-out figures and changes of the first base model against the last fine-tuned one
    (several cycles); exhausted: where the input ran out, when it did; resumed: the stages already
    done when the run was restarted after a stop (empty for a run that went through at once)."""
    threshold = min(thresholds)
    summaries = [cycle_summary(c, threshold) for c in cycles]
    last = summaries[-1]
    report = {
        **{k: v for k, v in last.items() if k not in ("cycle", "review_notes")},
        # each cycle tests other sentences: before and after are the last cycle's, on the same sentences
        "purity": last["purity"],
        "review": {**last["review"]},
        "review_notes": last["review_notes"],
        "threshold": threshold,
        "thresholds": list(thresholds),
        "seconds": seconds,
        "resumed": list(resumed or []),
        "model": setup["model"],
        "data": setup["data"],
        "parser": setup["parser"],
        "seed": setup["seed"],
        "versions": versions(),
        "command": setup["command"],
        "cycles": summaries,
        "input_exhausted": exhausted,
    }
    verified = [c for c in summaries if "fixed" in c]
    if verified:  # a last cycle without corrections verified nothing: the figures of the last one that did
        report.update({k: verified[-1].get(k) for k in ("heldout", "changes", "fixed_within_d", "repair")})
    if overall:
        report.update(overall)
    report["warnings"] = run_warnings(summaries)
    report["plots"] = plot(run_dir, summaries, list(thresholds))
    write_json_atomic(run_dir / "report.json", report)
    path = run_dir / "report.md"
    write_text_atomic(path, markdown(report))
    return run_dir / "report.json"
