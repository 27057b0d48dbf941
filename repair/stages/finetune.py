"""The fine-tune stage: what the model is fine-tuned on, written down (sources.jsonl), and the fine-tune itself."""

from __future__ import annotations

import logging
import math
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from repair.fileio import read_json, write_json_atomic, write_jsonl_atomic
from repair.stages.sources import SOURCES, read_sources  # noqa: F401  (the loop reads them here)

if TYPE_CHECKING:
    from repair.face import ModelFamily
    from repair.nmt.preprocessing import ModelFiles

log = logging.getLogger("repair.loop")


@dataclass
class FinetuneSettings:
    """The `finetune` config group's keys, the run's seed and where torch runs."""

    lr: float
    patience: int
    max_epoch: int
    repeat: int  # each correction appears this many times
    replay: int  # original training pairs mixed in
    keep: int  # texts Purity found consistent, with the model's own translation
    seed: int
    device: str = "auto"
    threads: int | None = None
    replay_target: str = "reference"  # reference | base: replayed sources with the base model's own translation
    exclude: tuple[str, ...] = ()  # sources never fine-tuned on (the held-out sentences)
    l2: float = 0.0  # pull toward the base model's weights (where the family's fine-tune offers it)
    trainable: tuple[str, ...] = ()  # parameter name prefixes trained; empty: all
    augment: int = 0  # pool sentences per correction that contain its source, translated to carry the correction
    augment_repeat: int = 5  # times each augmented pair appears
    pool: str | None = None  # English sentences to augment from; None: the data's cleaned training English
    select: str = "loss"  # loss | corrections: which epoch's checkpoint the fine-tune keeps
    select_fix_rate: float = 0.95  # select=corrections: the first epoch that fixes this share of the corrections
    loss_rise: float = 0.0  # select=corrections: stop where the validation loss is this share above its lowest (0: never)
    scope: str = "all"  # all | source | words | terms: the inputs the fine-tuned model translates (repair.edit.scoped)
    scope_share: float = 1.0  # scope=words: the least share of a corrected source's content words an input holds
    stop_tokens: tuple[str, ...] = ()  # scope=terms: Chinese tokens that are not terms (Purity's stop tokens)
    scope_rare: int = 100  # scope=terms: words seen fewer times in the training English may be taught (0: any word)
    scope_words_epoch: str = "selected"  # scope=terms: selected | loss: the epoch that translates the taught words
    scope_words: str = "taught"  # scope=terms: taught | rare: which seldom-seen words of the corrected sources widen it
    scope_defer: bool = False  # scope=terms: the base model's translation kept where it holds each taught word's term
    scope_enforce: bool = False  # scope=terms: a taught word's term enforced where a translation in scope lacks it
    adapter: str = "lora"  # a family that fine-tunes adapters: lora (a LoRA adapter) | none (every weight)
    lora_rank: int = 4
    lora_alpha: int = 8
    lora_lr: float | None = None  # adapter=lora: the adapter's learning rate (None: lr, as every weight's; a run folder
    #                               from before the key); conf/finetune/default.yaml sets 1e-2
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2")
    encoding_check: float = 1.5  # the base model's validation loss on the fine-tune's encoding may be at most this
    #                              times the one its checkpoint recorded (0: not checked)
    lr_from_model: float | None = None  # the lr is at least this share of the one the base model was trained with,
    #                                     where its checkpoint records it (where its family knows it); None: lr as given


SELECT = ("loss", "corrections")
WORDS_EPOCHS = ("selected", "loss")
SCOPE_WORDS = ("taught", "rare")


REPLAY_TARGETS = ("reference", "base")


def settings_from_config(ft: dict, *, seed: int, device: str = "auto", threads: int | None = None,
                         exclude=(), stop_tokens=()) -> FinetuneSettings:
    """The `finetune` config group's keys as FinetuneSettings (exclude: sources never fine-tuned on)."""
    from repair.errors import UserError

    target = ft.get("replay_target") or "reference"
    if target not in REPLAY_TARGETS:
        raise UserError(f"finetune.replay_target={target!r}: choose one of {', '.join(REPLAY_TARGETS)}")
    select = ft.get("select") or "loss"
    if select not in SELECT:
        raise UserError(f"finetune.select={select!r}: choose one of {', '.join(SELECT)}")
    from repair.edit.scoped import KINDS

    scope = ft.get("scope") or "all"
    if scope not in KINDS:
        raise UserError(f"finetune.scope={scope!r}: choose one of {', '.join(KINDS)}")
    rare = ft.get("scope_rare", 100)
    if isinstance(rare, bool) or not isinstance(rare, int) or rare < 0:
        raise UserError(f"finetune.scope_rare={rare!r}: give a whole number of occurrences, 0 or more (0: any word)")
    words_epoch = ft.get("scope_words_epoch") or "selected"
    if words_epoch not in WORDS_EPOCHS:
        raise UserError(f"finetune.scope_words_epoch={words_epoch!r}: choose one of {', '.join(WORDS_EPOCHS)}")
    scope_words = ft.get("scope_words") or "taught"
    if scope_words not in SCOPE_WORDS:
        raise UserError(f"finetune.scope_words={scope_words!r}: choose one of {', '.join(SCOPE_WORDS)}")
    share = float(ft.get("scope_share") or 1.0)
    if not 0 < share <= 1:
        raise UserError(f"finetune.scope_share={share}: give a number above 0 and at most 1")
    rise = ft.get("loss_rise", 0.0) or 0.0
    if isinstance(rise, bool) or not isinstance(rise, (int, float)) or rise < 0:
        raise UserError(f"finetune.loss_rise={rise!r}: give the share of its lowest by which the validation loss may "
                        f"rise before the fine-tune stops (0.5: half as much again), or 0 (no bound)")
    return FinetuneSettings(**{k: ft[k] for k in ("lr", "patience", "max_epoch", "repeat", "replay")},
                            select=select, select_fix_rate=float(ft.get("select_fix_rate") or 0.95),
                            loss_rise=float(rise),
                            scope=scope, scope_share=share, stop_tokens=tuple(stop_tokens),
                            scope_rare=rare or 0, scope_words_epoch=words_epoch, scope_words=scope_words,
                            scope_defer=bool(ft.get("scope_defer", False)),
                            scope_enforce=bool(ft.get("scope_enforce", False)),
                            augment=int(ft.get("augment") or 0), augment_repeat=int(ft.get("augment_repeat") or 1),
                            pool=ft.get("pool"),
                            keep=ft.get("keep") or 0, seed=seed, device=device, threads=threads,
                            replay_target=target, exclude=tuple(" ".join(s.split()) for s in exclude),
                            l2=float(ft.get("l2") or 0.0), trainable=tuple(ft.get("trainable") or ()),
                            encoding_check=encoding_ratio(ft.get("encoding_check", 1.5)),
                            lr_from_model=lr_share(ft.get("lr_from_model")), **adapter_settings(ft))


def lr_share(value) -> float | None:
    """finetune.lr_from_model, checked: a share above 0, or None (off)."""
    from repair.errors import UserError

    if value is None or value == 0:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise UserError(f"finetune.lr_from_model={value!r}: give the share of the base model's training learning rate "
                        f"the fine-tune's may not go below (0.5: half of it), or null (finetune.lr as given)")
    return float(value)


def adapter_settings(ft: dict) -> dict:
    """The adapter keys (read by a family that fine-tunes adapters): adapter, lora_rank, lora_alpha, lora_lr,
    lora_targets, checked."""
    from repair.errors import UserError

    adapter = ft.get("adapter") or "lora"
    if adapter not in ("lora", "none"):
        raise UserError(f"finetune.adapter={adapter!r}: choose lora (a LoRA adapter) or none (every weight)")
    out = {"adapter": adapter}
    for key in ("lora_rank", "lora_alpha"):
        value = ft.get(key, getattr(FinetuneSettings, key))
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(f"finetune.{key}={value!r}: give a whole number, 1 or more")
        out[key] = value
    lora_lr = ft.get("lora_lr")
    if lora_lr is not None and (isinstance(lora_lr, bool) or not isinstance(lora_lr, (int, float)) or lora_lr <= 0):
        raise UserError(f"finetune.lora_lr={lora_lr!r}: give the adapter's learning rate, above 0, or null (finetune.lr)")
    out["lora_lr"] = None if lora_lr is None else float(lora_lr)
    targets = ft.get("lora_targets") or FinetuneSettings.lora_targets
    if isinstance(targets, str):
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    out["lora_targets"] = tuple(targets)
    return out


def encoding_ratio(value) -> float:
    from repair.errors import UserError

    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or 0 < value <= 1:
        raise UserError(f"finetune.encoding_check={value!r}: give the ratio above 1 that the base model's validation "
                        f"loss on the fine-tune's encoding may reach of the one its checkpoint recorded, or 0 (no check)")
    return float(value)


def finetune_pairs(settings: FinetuneSettings, corrections: list[dict], data_dir: Path | None,
                   test_dir: Path | None = None, issues: list[dict] = ()) -> list[tuple[str, str]]:
    """The corrections (`repeat` times each), `keep` texts of the test stage's translation table that
    Purity found consistent, and `replay` training pairs from data_dir, shuffled; no pair whose source is
    one of settings.exclude (the held-out sentences). Replayed pairs carry their reference here; see
    finetune_parts for the base model's own translations."""
    parts = finetune_parts(settings, corrections, data_dir, test_dir, issues)
    pairs = [p for part in parts.values() for p in part]
    random.Random(settings.seed).shuffle(pairs)
    return pairs


def finetune_parts(settings: FinetuneSettings, corrections: list[dict], data_dir: Path | None,
                   test_dir: Path | None = None, issues: list[dict] = ()) -> dict[str, list[tuple[str, str]]]:
    """finetune_pairs' pairs by where they come from: corrections, keep, replay (unshuffled)."""
    excluded = set(settings.exclude)
    parts = {"corrections": [(c["source"], c["correction"]) for c in corrections] * settings.repeat,
             "keep": [], "replay": []}
    pairs = parts["keep"]
    keep = settings.keep or 0
    if keep and test_dir is not None:
        from repair.issues import sources
        from repair.purity.run import TRANSLATIONS
        from repair.purity.translators import read_table

        table_path = test_dir / TRANSLATIONS
        if table_path.exists():
            # Texts Purity found consistent keep the model's own translation, so that learning
            # the corrections does not change how the rest of the phrases are translated.
            flagged = {c["source"] for c in corrections} | {s for i in issues for s in sources(i)}
            table = read_table(table_path, empty_ok=True)  # the model's own output may be empty
            consistent = [(src, tr) for src, tr in table.items() if src not in flagged and tr]
            pairs += random.Random(settings.seed).sample(consistent, min(keep, len(consistent)))
        else:
            log.warning("finetune.keep: %s is missing (a test stage from an older version); nothing kept", table_path)
    if settings.replay:
        from repair.data.prepare import read_clean_pairs

        train = read_clean_pairs(data_dir, "train")
        rng = random.Random(settings.seed)
        parts["replay"] = rng.sample(train, min(settings.replay, len(train)))
    if excluded:
        parts = {k: [p for p in v if " ".join(p[0].split()) not in excluded] for k, v in parts.items()}
    return parts


def distilled(parts: dict[str, list[tuple[str, str]]], settings: FinetuneSettings, translate, out: Path):
    """The replayed pairs with the base model's own translation (finetune.replay_target=base), cached in
    out/replay_base.txt; the parts as they are otherwise."""
    if settings.replay_target != "base" or not parts["replay"]:
        return parts
    if translate is None:
        raise ValueError("finetune.replay_target=base needs the base model's translator")
    from repair.stages.verify import translate_cached

    sources = [src for src, _ in parts["replay"]]
    out.mkdir(parents=True, exist_ok=True)
    targets = translate_cached(translate, sources, out / "replay_base.txt")
    return {**parts, "replay": [(s, t) for s, t in zip(sources, targets) if t.strip()]}




def run(out: Path, checkpoint: "ModelFiles", corrections: list[dict], data_dir: Path, settings: FinetuneSettings,
        test_dir: Path | None = None, issues: list[dict] = (), translator=None, translator_for=None,
        family: "ModelFamily | None" = None) -> dict:
    """Fine-tunes `checkpoint` on the corrections (see finetune_parts) into `out` with its family's fine-tune
    (repair.face; default: the registered family whose model it is); the result (best checkpoint, curve) is read
    back on a resumed run. The training pairs are written to out/sources.jsonl. translator: the base model's (its
    `translate(texts)`), for finetune.replay_target=base and augment; translator_for: the loop's Translators
    (translator_for(model), translator_for.plain(model)), for finetune.select=corrections and scope=terms."""
    from repair.data.prepare import read_clean_pairs
    from repair.face import owner_of

    family = family or owner_of(checkpoint.checkpoint)
    result_path = out / "result.json"
    if result_path.exists() and (out / SOURCES).exists():
        return read_json(result_path)
    parts = distilled(finetune_parts(settings, corrections, data_dir, test_dir, issues), settings, translator, out)
    if settings.augment:
        parts["augment"] = augmented(corrections, settings, data_dir, translator, checkpoint, out, family)
    pairs = [p for part in parts.values() for p in part]
    random.Random(settings.seed).shuffle(pairs)
    if not result_path.exists():
        unwritable = family.unwritable(checkpoint, [c["correction"] for c in corrections]) if corrections else []
        if unwritable:
            log.warning("fine-tune: %s of the %s corrections hold characters the model's vocabulary lacks (they become "
                        "unknown tokens; no fine-tune fixes them, and the fix rate's target counts the others): %s",
                        len(unwritable), len(corrections), " | ".join(unwritable[:10]))
        fixed = EpochFixes(out, checkpoint, corrections, translator_for)  # finetune.select=corrections
        rule = (StopRule(out, corrections, settings, fixed, fixed.missing, len(unwritable))
                if settings.select == "corrections" and corrections and translator_for is not None else None)
        result = family.finetune(
            checkpoint,
            pairs,
            read_clean_pairs(data_dir, "valid"),
            out,
            settings,
            translator,
            lr=settings.lr,
            patience=0 if rule else settings.patience,  # the stop rule counts patience (StopRule)
            max_epoch=settings.max_epoch,
            seed=settings.seed,
            device=settings.device,
            threads=settings.threads,
            l2=settings.l2,
            trainable=settings.trainable,
            epoch_checkpoints=settings.select == "corrections",
            stop_when=rule,
            probe_pairs=[(c["source"], c["correction"]) for c in corrections],
            encoding_check=settings.encoding_check,
            lr_from_model=settings.lr_from_model,
        )
        if rule is not None:
            result = rule.explained(result)
        if settings.select == "corrections":
            result = select_by_corrections(result, out, checkpoint, corrections, settings, translator_for, fixed,
                                           len(unwritable))
        result = with_warnings(result, out, checkpoint, settings, len(corrections), family, unwritable)
        result = {k: (str(v) if isinstance(v, Path) else v) for k, v in result.items()}
    # after the fine-tune, which starts its folder afresh when it finds one a kill left unfinished
    write_jsonl_atomic(out / SOURCES, ({"source": s, "target": t} for s, t in dict.fromkeys(pairs)))
    if not result_path.exists():
        if settings.scope != "all":
            taught, words_at = {}, words_checkpoint(result, out, settings)
            if settings.scope == "terms":
                # the fine-tuned weights alone (`plain`: a translator built here must not be taken for the scoped edit)
                edited = translator_for.plain(
                    checkpoint.with_checkpoint(words_at or Path(result["best_checkpoint"])))
                taught = taught_words(corrections, settings.stop_tokens, edited,
                                      word_counts(data_dir) if settings.scope_rare else None, settings.scope_rare,
                                      test=settings.scope_words == "taught")
            result["scope"] = write_scope(Path(result["best_checkpoint"]).parent, checkpoint, corrections, settings,
                                          taught, words_at if taught else None)
        write_json_atomic(result_path, result)
    return read_json(result_path)


STOPS = {"stop_when": "fix rate reached", "fix_rate": "fix rate reached", "patience": "patience",
         "loss_rise": "validation loss rise", "max_epoch": "max epoch", "max_update": "max update",
         "stop_time_hours": "time limit", "stop_min_lr": "minimum learning rate",
         "already_stopped": "patience (before a resume)", "unknown": "unknown (the training's log said no reason)"}


def with_warnings(result: dict, out: Path, base: "ModelFiles", settings: FinetuneSettings, corrections: int,
                  family: "ModelFamily | None" = None, unwritable: Sequence[str] = ()) -> dict:
    """The fine-tune's result with why it stopped in words (`stop.why`) and `warnings`: a fine-tune that stopped
    before its first validation, corrections the model cannot write (`unwritable`), or a kept checkpoint that does
    not give the corrections a lower loss than the base model (each also in the log; the loss under the kept
    checkpoint as its family measures it)."""
    from repair.face import owner_of

    stop = dict(result.get("stop") or {})
    reason = stop.get("reason")
    stop["why"] = STOPS.get(reason, reason or "unknown")
    rule = stop.get("rule") or {}  # the stage's stop rule (StopRule): the epoch it stopped at
    if reason in ("stop_when", "fix_rate"):
        stop["reason"] = "fix_rate"
        stop["why"] = (f"fix rate reached: epoch {stop.get('epoch')} fixes at least {settings.select_fix_rate:.0%} of "
                       f"the {corrections - len(unwritable)} corrections the model can write (finetune.select_fix_rate)"
                       if unwritable else
                       f"fix rate reached: epoch {stop.get('epoch')} fixes at least {settings.select_fix_rate:.0%} of "
                       f"the {corrections} corrections (finetune.select_fix_rate)")
    elif reason == "patience" and rule:
        stop["why"] = (f"patience: no lower validation loss, no more corrections fixed and no fewer of their "
                       f"characters missing for {settings.patience} epochs (finetune.patience); {rule['fixed']} of the "
                       f"{corrections} corrections fixed at epoch {rule['epoch']}")
    elif reason == "patience":
        stop["why"] = f"patience: no lower validation loss for {settings.patience} epochs (finetune.patience)"
    elif reason == "loss_rise":
        stop["why"] = (f"validation loss rise: epoch {rule['epoch']}'s {rule['valid_loss']:.3f} is more than "
                       f"{settings.loss_rise:.0%} above the fine-tune's lowest (finetune.loss_rise); {rule['fixed']} of "
                       f"the {corrections} corrections fixed")
    elif reason == "max_epoch":
        stop["why"] = f"max epoch: {settings.max_epoch} epochs (finetune.max_epoch)"
    warnings = []
    if unwritable:
        warnings.append(f"{len(unwritable)} of the {corrections} corrections hold characters the model's vocabulary "
                        f"lacks, which no fine-tune can fix: {' | '.join(list(unwritable)[:10])}")
    if not result.get("curve"):
        warnings.append(f"the fine-tune stopped before its first validation ({stop['why']}): nothing says it learnt")
    before = result.get("probe_loss_before")
    after = None if before is None else (family or owner_of(base.checkpoint)).probe_loss_after(result, base, out)
    if after is not None and after >= before:
        warnings.append(f"the corrections' loss did not fall: {before:.3f} under the base model, {after:.3f} under the "
                        f"kept checkpoint ({Path(result['best_checkpoint']).name})")
    for w in warnings[1 if unwritable else 0:]:  # the first was logged before the fine-tune
        log.warning("fine-tune: %s", w)
    log.info("fine-tune stopped: %s", stop["why"])
    return {**result, "stop": stop, "warnings": warnings, "unwritable": list(unwritable),
            **({"probe_loss_after": after} if after is not None else {})}


def taught_words(corrections: list[dict], stop_tokens, edited, seen: Mapping[str, int] | None = None,
                 rare: int = 0, test: bool = True) -> dict[str, list[str]]:
    """finetune.scope=terms: the English words of the corrected sources (content words, once each) that the
    model seldom saw and whose own translation the fine-tune taught.

    seldom seen: fewer than `rare` times in `seen` (word counts of the training English, a final s aside;
    None: every word is a candidate). Taught: the edited model's translation of the word alone is mostly
    terms of the corrections of sources with that word (words a correction put in that the model's
    translation lacked, as generality's term recall counts them; more than half of its characters, stop
    tokens aside). Whether the base model can say the word alone is not asked: a word it says alone it may
    still miss in a sentence (as the demo's model says 药剂师 for "pharmacist" and 医生 in sentences). The
    edited model translates the candidates in one batch. Each taught word comes with the terms its translation
    holds (what finetune.scope_defer looks for in the base model's translation). `test=False`
    (finetune.scope_words=rare): every candidate, untested and with no terms (so never deferred): the scope is
    then the field the corrections come from, every text holding a word of theirs the model seldom saw."""
    from repair.measures import correction_terms
    from repair.purity.rti import english_stopwords
    from repair.text import content_words, singular
    from repair.stats import squeeze

    stop = english_stopwords()
    terms_of: dict[str, set[str]] = {}
    for c in corrections:
        terms = set(correction_terms([c], stop_tokens))
        for w in content_words(c["source"], stop) if terms else ():
            if seen is None or seen.get(singular(w), 0) < rare:
                terms_of.setdefault(w, set()).update(terms)
    candidates = sorted(terms_of)
    if not candidates:
        log.info("fine-tune: no corrected word is a candidate (seen fewer than finetune.scope_rare=%s times in the "
                 "training English, in a correction that put words in): the scope is the corrected sources", rare)
        return {}
    if not test:
        log.info("fine-tune: %s seldom-seen corrected words widen the scope (finetune.scope_words=rare): %s",
                 len(candidates), " ".join(candidates[:20]) + (" ..." if len(candidates) > 20 else ""))
        return {w: [] for w in candidates}
    after = edited.translate(candidates)

    def mostly_terms(w: str, a: str) -> list[str]:
        """The terms the answer holds, where they make more than half of it."""
        a = "".join(ch for ch in squeeze(a) if ch not in stop_tokens)
        covered, held = [False] * len(a), []
        for t in sorted(terms_of[w]):
            at = a.find(t)
            held += [t] if at >= 0 else []
            while at >= 0:
                covered[at:at + len(t)] = [True] * len(t)
                at = a.find(t, at + 1)
        return held if 2 * sum(covered) > len(a) else []

    taught = {w: held for w, a in zip(candidates, after) if (held := mostly_terms(w, a))}
    log.info("fine-tune: %s of %s seldom-seen corrected words taught (finetune.scope=terms): %s", len(taught),
             len(candidates), " ".join(list(taught)[:20]) + (" ..." if len(taught) > 20 else ""))
    return taught


def words_checkpoint(result: dict, out: Path, settings: FinetuneSettings) -> Path | None:
    """finetune.scope_words_epoch=loss with scope=terms and select=corrections: the checkpoint of the lowest
    validation loss (checkpoint_best), for the taught words, where it is not the epoch kept for
    the corrections; None otherwise."""
    chosen = result.get("selected")
    if settings.scope != "terms" or settings.scope_words_epoch != "loss" or not chosen:
        return None
    curve = [r for r in result.get("curve", []) if r.get("valid_loss") is not None]
    best = epoch_model(out, "_best")
    if not curve or not best.exists():
        return None
    lowest = min(curve, key=lambda r: (r["valid_loss"], -r["epoch"]))["epoch"]  # the later of ties is kept
    if lowest == chosen["epoch"]:
        return None
    log.info("fine-tune: the taught words are translated by epoch %s (lowest validation loss), the corrected sources "
             "by epoch %s (finetune.scope_words_epoch=loss)", lowest, chosen["epoch"])
    return best.resolve()


def word_counts(data_dir: Path) -> dict[str, int]:
    """How often each word (lower case, a final s aside, split from punctuation as repair.text.source_key
    splits it) occurs in the data's cleaned training English."""
    from collections import Counter

    from repair.data.prepare import read_clean_pairs
    from repair.text import english_tokens, singular

    return dict(Counter(singular(w) for src, _ in read_clean_pairs(data_dir, "train") for w in english_tokens(src)))


def write_scope(folder: Path, base: "ModelFiles", corrections: list[dict], settings: FinetuneSettings,
                taught: Mapping[str, list[str]] | None = None, words_at: Path | None = None) -> dict:
    """finetune.scope: the scope of this fine-tune (every corrected source so far, the unedited base model for
    the rest) written beside its checkpoint, where the loop's translators find it; what the report says of it."""
    from repair.edit.scoped import SCOPE_FILE, extended, scope_of

    scope = extended(scope_of(base.checkpoint), settings.scope, settings.scope_share, str(Path(base.checkpoint).resolve()),
                     [c["source"] for c in corrections], taught or {}, str(words_at or ""),
                     settings.scope == "terms" and settings.scope_defer,
                     settings.scope == "terms" and settings.scope_enforce)
    write_json_atomic(folder / SCOPE_FILE, scope.as_json())
    log.info("fine-tune: a scoped edit (finetune.scope=%s): the fine-tuned model translates inputs in the scope of "
             "%s corrected sources, %s the rest", scope.kind, len(scope.sources), scope.fallback)
    return {"kind": scope.kind, "share": scope.share, "sources": len(scope.sources), "fallback": scope.fallback,
            **({"words": list(scope.words)} if scope.kind == "terms" else {}),
            **({"words_checkpoint": scope.words_checkpoint} if scope.words_checkpoint else {}),
            **({"defer": True} if scope.defer else {}), **({"enforce": True} if scope.enforce else {})}


class EpochFixes:
    """How many corrections the checkpoint of an epoch (out/checkpoint<epoch>.pt) translates as corrected (a call),
    and the corrections' characters its translations lack in all (`missing`: the bag-of-words distance
    verify_fixes measures, which falls while corrections are learnt before any is fixed); each epoch translated once."""

    def __init__(self, out: Path, base: "ModelFiles", corrections: list[dict], translator_for):
        self.out, self.base, self.corrections, self.translator_for = out, base, corrections, translator_for
        self.counted: dict[int, tuple[int, int]] = {}

    def _count(self, epoch: int) -> tuple[int, int]:
        from repair.stats import verify_fixes

        if epoch not in self.counted:
            model = self.base.with_checkpoint(epoch_model(self.out, epoch))
            sources = [c["source"] for c in self.corrections]
            fixes = verify_fixes(self.corrections, self.translator_for(model).translate(sources))
            self.counted[epoch] = fixes["fixed"], sum(r["distance"] for r in fixes["rows"])
        return self.counted[epoch]

    def __call__(self, epoch: int) -> int:
        return self._count(epoch)[0]

    def missing(self, epoch: int) -> int:
        return self._count(epoch)[1]


def epoch_model(out: Path, epoch: int | str) -> Path:
    """An epoch's model in a fine-tune folder, whatever its family writes: the file or folder checkpoint<epoch>,
    with one suffix or none (epoch "_best": the lowest validation loss's); out/checkpoint<epoch> where there is
    none (a cache converted from one, checkpoint<epoch>.pt.<runtime>, is not it)."""
    name = f"checkpoint{epoch}"
    found = sorted(p for p in out.glob(f"{name}*") if p.name == name or (p.stem == name and p.suffix))
    return found[0] if found else out / name


def epoch_of(path: Path) -> int | None:
    """The epoch of checkpoint<epoch>, with one suffix or none (whatever its family writes); None for another name
    (a cache converted from one, checkpoint<epoch>.pt.<runtime>, included)."""
    digits = path.name.split(".")[0][len("checkpoint"):] if path.name.count(".") <= 1 else ""
    return int(digits) if path.name.startswith("checkpoint") and digits.isdigit() else None


class StopRule:
    """finetune.select=corrections: the fine-tune's stop_when, asked after each epoch is saved. It stops at the first
    epoch that fixes select_fix_rate of the corrections (`fix_rate`: the epoch select_by_corrections keeps); at
    `patience` epochs in a row that brought neither a lower validation loss nor more corrections fixed than any epoch
    before, nor fewer of the corrections' characters missing from their translations (`patience`); or at an epoch
    whose validation loss is more than `loss_rise` above the lowest so far
    (`loss_rise`). A fine-tune whose validation loss rises from its first epoch while its corrections are still being
    learnt goes on: patience on the loss alone would end it short of the fix rate. The family's own patience is off
    (it is counted here); `max_epoch` still bounds it. The validation losses are read from out/curve.jsonl, which
    every family's fine-tune writes before it asks."""

    def __init__(self, out: Path, corrections: list[dict], settings: FinetuneSettings, fixed: Callable[[int], int],
                 missing: Callable[[int], int] | None = None, unwritable: int = 0):
        self.out, self.n, self.settings, self.fixed, self.missing = out, len(corrections), settings, fixed, missing
        self.target = fix_target(len(corrections), unwritable, settings.select_fix_rate)

    def __call__(self, epoch: int) -> bool:
        return epoch_model(self.out, epoch).exists() and self.reason(self.rows(epoch)) is not None

    def rows(self, last: int, curve: list[dict] | None = None) -> list[dict]:
        """Each epoch up to `last` with its validation loss (curve, or out/curve.jsonl) and corrections fixed."""
        from repair.fileio import read_jsonl

        valid: dict[int, float] = {}
        path = self.out / "curve.jsonl"
        for r in curve if curve is not None else (read_jsonl(path) if path.is_file() else []):
            if r.get("valid_loss") is not None:
                valid[int(r["epoch"])] = float(r["valid_loss"])
        return [{"epoch": e, "valid_loss": v, "fixed": self.fixed(e),
                 **({"missing": self.missing(e)} if self.missing else {})} for e, v in sorted(valid.items())
                if e <= last and epoch_model(self.out, e).exists()]

    def reason(self, rows: list[dict]) -> str | None:
        """Why the fine-tune stops after the last of `rows` (fix_rate, loss_rise, patience), or None: it goes on."""
        s = self.settings
        if not rows:
            return None
        if rows[-1]["fixed"] >= self.target:
            return "fix_rate"
        lowest = min(r["valid_loss"] for r in rows)
        if s.loss_rise and rows[-1]["valid_loss"] > (1 + s.loss_rise) * lowest:
            return "loss_rise"
        best = {"valid_loss": math.inf, "fixed": -math.inf, "missing": math.inf}
        since = 0
        for r in rows:
            better = r["valid_loss"] < best["valid_loss"] or r["fixed"] > best["fixed"] or \
                r.get("missing", math.inf) < best["missing"]
            since = 0 if better else since + 1
            best = {"valid_loss": min(best["valid_loss"], r["valid_loss"]), "fixed": max(best["fixed"], r["fixed"]),
                    "missing": min(best["missing"], r.get("missing", math.inf))}
        return "patience" if s.patience and since >= s.patience else None

    def explained(self, result: dict) -> dict:
        """The family's result with the rule's reason where the rule stopped it (`stop_when`), counted again from the
        curve and the epochs' fixes (a fine-tune that finished before a kill is explained as one that did not)."""
        stop = dict(result.get("stop") or {})
        if stop.get("reason") != "stop_when" or stop.get("epoch") is None:
            return result
        rows = self.rows(int(stop["epoch"]), result.get("curve") or None)
        stop["reason"] = self.reason(rows) or "fix_rate"
        stop["rule"] = rows[-1] if rows else None
        return {**result, "stop": stop}


def fix_target(corrections: int, unwritable: int, share: float) -> float:
    """The corrections an epoch must fix to stop at the fix rate: `share` of those the model can write (a
    correction holding a character its vocabulary lacks is fixed by no fine-tune), at least one."""
    return share * max(1, corrections - unwritable)


def select_by_corrections(result: dict, out: Path, base: "ModelFiles", corrections: list[dict],
                          settings: FinetuneSettings, translator_for, fixed: Callable[[int], int] | None = None,
                          unwritable: int = 0) -> dict:
    """finetune.select=corrections: the checkpoint of the first epoch whose model translates at least
    select_fix_rate of the corrections as corrected, else of the epoch that fixes the most (the lower
    validation loss among ties). Looks only at the fine-tuning data's corrections and the validation
    split; the other epochs' checkpoints are removed. fixed: an EpochFixes, with what it counted already."""
    fixed = fixed or EpochFixes(out, base, corrections, translator_for)
    valid = {r["epoch"]: r["valid_loss"] for r in result.get("curve", [])}
    epochs = sorted(e for e in map(epoch_of, out.glob("checkpoint[0-9]*")) if e is not None)
    if not epochs or not corrections:
        return result
    rows = []
    for e in epochs:
        rows.append({"epoch": e, "fixed": fixed(e), "valid_loss": valid.get(e)})
        log.info("fine-tune epoch %s: %s of %s corrections fixed, valid loss %s", e, fixed(e), len(corrections),
                 valid.get(e))
        if fixed(e) >= fix_target(len(corrections), unwritable, settings.select_fix_rate):
            break
    enough = [r for r in rows if r["fixed"] >= fix_target(len(corrections), unwritable, settings.select_fix_rate)]
    chosen = enough[0] if enough else max(rows, key=lambda r: (r["fixed"], -(r["valid_loss"] or 0.0)))
    path = epoch_model(out, chosen["epoch"])
    selected = out / ("checkpoint_selected" + path.suffix)
    path.replace(selected)
    for p in out.glob("checkpoint[0-9]*"):
        if epoch_of(p) is not None:  # an epoch's model (a cache converted from one is left as before)
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    log.info("fine-tune: epoch %s kept (finetune.select=corrections)", chosen["epoch"])
    return {**result, "best_checkpoint": str(selected), "selected": {"by": "corrections", "epoch": chosen["epoch"],
                                                                     "fix_rate": settings.select_fix_rate,
                                                                     "epochs": rows}}


def pool_matches(corrections: list[dict], pool: list[str], per_correction: int, seed: int,
                 never: set[str]) -> list[tuple[str, dict]]:
    """Up to `per_correction` pool sentences for each correction whose English contains the corrected source
    as whole tokens (case and spacing aside), none of them in `never` nor a corrected source itself."""
    from repair.measures import source_key

    rng = random.Random(seed)
    keyed = [(" ".join(p.split()), f" {source_key(p)} ") for p in dict.fromkeys(pool)]
    corrected = {source_key(c["source"]) for c in corrections}
    out = []
    for c in corrections:
        needle = f" {source_key(c['source'])} "
        found = [p for p, k in keyed if needle in k and p not in never and source_key(p) not in corrected]
        out += [(p, c) for p in rng.sample(found, min(per_correction, len(found)))]
    return out


def augmented(corrections: list[dict], settings: FinetuneSettings, data_dir: Path, translator,
              base: "ModelFiles", out: Path, family: "ModelFamily | None" = None) -> list[tuple[str, str]]:
    """finetune.augment: each correction taught in other contexts. Pool sentences (finetune.pool, or the
    training English) that contain a corrected source, never a held-out sentence nor a line of the BLEU
    test split, translated by the base model with lexically constrained beam search so that they carry
    the correction; pairs whose constraint could not be met are counted (out/augment.json) and left out.
    Each pair appears augment_repeat times."""
    from repair.data.prepare import read_clean_pairs
    from repair.fileio import read_text_lines

    path = out / "augment.json"
    if path.exists():
        record = read_json(path)
    else:
        from repair.face import owner_of

        pool = (read_text_lines(settings.pool) if settings.pool
                else [en for en, _ in read_clean_pairs(data_dir, "train")])
        never = set(settings.exclude) | {" ".join(en.split()) for en, _ in read_clean_pairs(data_dir, "test")}
        matches = pool_matches(corrections, pool, settings.augment, settings.seed, never)
        search = (family or owner_of(base.checkpoint)).constrained_search(translator, base)
        hyps = search([p for p, _ in matches], [[c["correction"]] for _, c in matches]) if matches else []
        rows = [{"source": p, "translation": h[0].text, "met": h[0].met, "correction": c["source"]}
                for (p, c), h in zip(matches, hyps)]
        record = {"corrections": len(corrections),
                  "with_pool_sentences": len({r["correction"] for r in rows}),
                  "sentences": len(rows), "met": sum(r["met"] for r in rows),
                  "unmet": sum(not r["met"] for r in rows), "rows": rows}
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, record)
        log.info("augmentation: %s pool sentences for %s of %s corrections, constraint met in %s (%s unmet)",
                 record["sentences"], record["with_pool_sentences"], len(corrections), record["met"],
                 record["unmet"])
    return [(r["source"], r["translation"]) for r in record["rows"] if r["met"]] * settings.augment_repeat
