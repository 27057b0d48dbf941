"""The interface the nmt translators implement (repair.face.Translator)."""

from repair.face import Translator

__all__ = ["Translator"]
