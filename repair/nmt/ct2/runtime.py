"""The CTranslate2 library, imported with one clear message where it is missing (every family that converts for it)."""

from __future__ import annotations

from repair.errors import UserError


def import_ctranslate2():
    try:
        import ctranslate2
    except ImportError as e:  # pragma: no cover - a dependency of the project
        raise UserError(f"translator=ctranslate2 needs the ctranslate2 package (pip install ctranslate2): {e}") from None
    return ctranslate2
