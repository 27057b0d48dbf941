"""The `purity` config group mapped onto run_purity's keyword arguments: the one place both
`python -m repair.purity` (the group at the top level) and the loop (under `purity`) read it."""

from __future__ import annotations

from typing import Any, Mapping

# the group's keys run_purity takes as they are
ENGINE_KEYS = ("thresholds", "unit", "skip_latin", "max_words", "min_content_words", "max_sentence_words",
               "stopwords", "stop_tokens")


def run_settings(group: Mapping[str, Any]) -> dict:
    """run_purity's settings from the group's plain values (keys of the caller's own left out): the
    relations to run and each one's block of options (`purity.<relation>.*`)."""
    relations = list(group.get("relations") or ["rti"])
    return {**{k: tuple(group[k]) if isinstance(group[k], list) else group[k] for k in ENGINE_KEYS if k in group},
            "relations": relations,
            "relation_options": {name: dict(group[name]) for name in relations if group.get(name) is not None}}
