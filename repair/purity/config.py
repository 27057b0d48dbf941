"""The `purity` config group mapped onto run_purity's keyword arguments: the one place both
`python -m repair.purity` (the group at the top level) and the loop (under `purity`) read it."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from repair.errors import UserError

# the group's keys run_purity takes as they are; each relation's settings sit in its own block
ENGINE_KEYS = ("thresholds", "unit", "skip_latin", "max_sentence_words", "stopwords", "stop_tokens")
# keys the group once had, and where they are now
RENAMED = {"max_words": "rti.max_words", "min_content_words": "rti.min_content_words"}


def run_settings(group: Mapping[str, Any]) -> dict:
    """run_purity's settings from the group's plain values (keys of the caller's own left out): the
    relations to run and each one's block of options (`purity.<relation>.*`)."""
    relations = list(group.get("relations") or ["rti"])
    return {**{k: tuple(group[k]) if isinstance(group[k], list) else group[k] for k in ENGINE_KEYS if k in group},
            "relations": relations,
            "relation_options": {name: dict(group[name]) for name in relations if group.get(name) is not None}}


def renamed(key: str, prefix: str = "") -> str | None:
    """The new name of a group key given by its old one (`prefix`: where the group sits, "purity." in the loop)."""
    if key.startswith(prefix) and key[len(prefix):] in RENAMED:
        return prefix + RENAMED[key[len(prefix):]]
    return None


def check_renamed(overrides: Iterable[str], prefix: str = "") -> None:
    """Refuse a command-line override of a key that was renamed, naming its new name."""
    for override in overrides:
        key = override.lstrip("+~").split("=", 1)[0]
        new = renamed(key, prefix)
        if new is not None:
            raise UserError(f"{key} is now {new} (the RTI relation's settings sit in their own block, like "
                            f"{prefix}replace.*): {override} -> {override.replace(key, new, 1).lstrip('+~')}")
