"""Purity: testing machine translation by referential transparency, beside other test relations.

    from repair.purity import rti_pairs, bow_distance
    rti_pairs("(ROOT (S ...))", sentence)      # [(container, rti), ...]
    bow_distance(rti_translation, container_translation, unit="char")
    run_purity(sentences, parser, translator, out, relations=["rti", "replace"])
"""

from repair.purity.check import bow_distance, missing_tokens
from repair.purity.relations import RELATIONS, Relation, make_relations
from repair.purity.rti import english_stopwords, extract, parse_tree, rti_pairs
from repair.purity.run import run_purity
from repair.purity.translators import MissingTranslations, TableTranslator, Translator


__all__ = [
    "rti_pairs", "extract", "parse_tree", "english_stopwords",
    "bow_distance", "missing_tokens",
    "Relation", "RELATIONS", "make_relations",
    "Translator", "TableTranslator", "MissingTranslations",
    "run_purity",
]
