"""The interface the nmt translators implement: Purity's (repair.purity.translators.Translator)."""

from repair.purity.translators import Translator

__all__ = ["Translator"]
