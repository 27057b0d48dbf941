"""The model check before Purity tests a model, as Purity's command line and the loop's test stage run it.

A translator that has a model to check answers `check_model(sentences, valid_pairs, data_dir)` (repair.face; the
fairseq, CTranslate2 and transformers translators: repair.nmt.fairseq.modelcheck); a table of translations answers None. What the check
finds far off is a warning (`model_check=warn`, Purity's command line) or stops the run before any sentence is
tested (`stop`, the loop's `purity.model_check`); `off` skips it.
"""

from __future__ import annotations

import logging
from typing import Sequence

from repair.errors import UserError

log = logging.getLogger(__name__)

MODES = ("warn", "stop", "off")


def run_model_check(translator, sentences: Sequence[str], mode: str = "warn", *, key: str = "model_check",
                    valid_pairs: Sequence[tuple[str, str]] = (), data_dir=None) -> dict:
    """The translator's model checked on a sample of `sentences` (and `valid_pairs`); a problem is logged as a
    warning, or with mode "stop" raised as one UserError naming the sides and the keys to set. `key`: the setting's
    name where the caller reads it (model_check, purity.model_check). Returns what was measured."""
    if mode not in MODES:
        raise UserError(f"{key}={mode!r}: give one of {', '.join(MODES)}")
    if mode == "off":
        return {"checked": False, "why": f"{key}=off"}
    record = translator.check_model(list(sentences), list(valid_pairs), data_dir)
    if record is None:
        return {"checked": False, "why": f"translator={translator.name} has no model to check"}
    if not record.get("problems"):
        log.info("model check: %s", summary_line(record))
        return record
    if mode == "stop" and record.get("stop", True):
        raise UserError(f"{record['message']}. Nothing was tested ({key}=stop; {key}=warn tests it anyway).")
    log.warning("model check: %s (%s=%s%s)", record["message"], key, mode,
                "; what Purity tests is unchanged by it" if mode == "stop" else f"; {key}=stop makes it fatal")
    return record


def summary_line(record: dict) -> str:
    """What a check that found nothing far off measured, in one line."""
    parts = []
    for name in ("src", "tgt"):
        unknown = (record.get(name) or {}).get("unknown")
        if unknown is not None:
            parts.append(f"{name} tokens unknown {unknown:.1%}")
    loss = record.get("loss")
    if loss:
        parts.append(f"validation loss {loss['sample_valid_loss']} on {loss['pairs']} pairs (recorded "
                     f"{loss['recorded_valid_loss']})")
    t = record.get("translations")
    if t:
        parts.append(f"{t['marked']:.0%} of {t['translations']} translations with subword markers, {t['repeated']:.0%} "
                     f"repeating a phrase")
    return ", ".join(parts) or "nothing measured"
