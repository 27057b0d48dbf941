"""The prepare stage: the `data` config group's data set made ready in its folder (raw, clean, and
encoded and binarized unless a model is brought along), and what Purity tests in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repair.registry import build
from repair.stages import Data


class DataSet:
    """One kind of data (`data=NAME`): `collect` writes or finds its raw splits, the rest is shared."""

    extra_options = ("prepare", "sentences", "references")  # what a kind takes through **common

    def __init__(self, dir: str, prepare: dict | None = None, sentences: str | None = None,
                 references: str | None = None):
        self.dir = Path(dir)
        self.prepare_options = dict(prepare or {})
        self.sentences = sentences
        self.references = references

    def collect(self) -> dict | None:
        """Writes the raw splits into dir/raw, or returns the files that hold them ((split, lang) -> path)."""
        return None

    def prepare(self, encode: bool = True, purity_input: str | None = None) -> Data:
        """Cleans the corpus (and encodes and binarizes it when `encode`: a model brought along has its
        own preprocessing); the sentences Purity tests: `purity_input`, the data's own, or its test English."""
        from repair.data.prepare import prepare_data

        sources = self.collect()
        prepare_data(self.dir, sources=sources, encode=encode, **self.prepare_options)
        if purity_input:
            sentences = Path(purity_input)
        elif self.sentences:
            sentences = self.dir / self.sentences
        else:
            sentences = Path(sources[("test", "en")]) if sources else self.dir / "raw" / "test.en"
        return Data(self.dir, sentences, self.dir / self.references if self.references else None)


class DemoData(DataSet):
    """The bundled demo domain, built by repair.data.demo from `build`'s settings."""

    def __init__(self, dir: str, build: dict | None = None, **common: Any):
        super().__init__(dir, **common)
        self.build = dict(build or {})

    def collect(self) -> None:
        from repair.data.demo import build_demo

        build_demo(self.dir, **self.build)


class Wmt18Data(DataSet):
    """WMT'18 EN-ZH from the releases unpacked under dir/corpora; its dev and test sets also as plain aligned
    text (in `devtest` or under dir/corpora), or fetched by sacrebleu when `fetch`."""

    def __init__(self, dir: str, test_set: str = "newstest2018", valid_set: str = "newstest2017",
                 devtest: str | None = None, fetch: bool = True, **common: Any):
        super().__init__(dir, **common)
        self.test_set, self.valid_set, self.devtest, self.fetch = test_set, valid_set, devtest, fetch

    def collect(self) -> None:
        from repair.data.wmt18 import collect

        collect(self.dir, test_set=self.test_set, valid_set=self.valid_set, devtest=self.devtest, fetch=self.fetch)


class ParallelData(DataSet):
    """A user's aligned corpus: each split a pair of files, a prefix, or dir/{split}.{en,zh}."""

    def __init__(self, dir: str, train: Any = None, valid: Any = None, test: Any = None, **common: Any):
        super().__init__(dir, **common)
        self.given = {"train": train, "valid": valid, "test": test}

    def collect(self) -> dict:
        from repair.data.prepare import parallel_sources

        return parallel_sources(self.dir, self.given)


DATA = {"demo": DemoData, "wmt18": Wmt18Data, "parallel": ParallelData}


def run(data: dict, encode: bool = True, purity_input: str | None = None) -> Data:
    """The `data` group's data set prepared in its folder (see DataSet.prepare). `holdout` is the loop's (the
    default of purity.holdout for this data), not the data set's."""
    return build("data", DATA, {k: v for k, v in data.items() if k != "holdout"}).prepare(encode, purity_input)
