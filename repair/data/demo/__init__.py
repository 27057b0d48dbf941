"""The bundled demo domain: English sentences and their Chinese translations from a synchronous grammar.

Each generated phrase is a small tree that renders itself twice, as English tokens and as Chinese
text, so every sentence and every noun phrase inside it has a reference translation. Chinese moves
noun modifiers before the noun with 的 (桌子上的三本红色的书), measure words follow the noun
(一位老师, 两座桥), event locations and times come before the verb (老师昨天在图书馆里读了一本书。).

`build_demo(data_dir)` writes the parallel splits, the held-out sentences Purity tests and the
references the oracle judges with; `load_references(path)` reads those back keyed by the English
text normalized the way Purity writes its texts.

    python -m repair.data.demo data/demo [--coverage]

grammar.py (the phrase trees, DemoGrammar), lexicon.py (its words), build.py (generate, build_demo),
references.py (load_references), coverage.py (span_coverage and the command).
"""

from repair.data.demo.build import DEFAULT_SIZES, DEMO_VERSION, build_demo, generate
from repair.data.demo.coverage import span_coverage
from repair.data.demo.grammar import (NP, PP, Coord, DemoGrammar, Noun, ObjectRC, Pre, Sentence, SubjectRC, en_text,
                                      phrase_spans, random_span, zh_text)
from repair.data.demo.references import References, load_references, normalize_english

__all__ = ["DEFAULT_SIZES", "DEMO_VERSION", "NP", "PP", "Coord", "DemoGrammar", "Noun", "ObjectRC", "Pre", "References",
           "Sentence", "SubjectRC", "build_demo", "en_text", "generate", "load_references", "normalize_english",
           "phrase_spans", "random_span", "span_coverage", "zh_text"]
