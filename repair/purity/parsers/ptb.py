"""Trees read from a file in Penn Treebank bracket notation (CoreNLP, benepar, a treebank)."""

from __future__ import annotations

import logging
from pathlib import Path

from repair.errors import UserError
from repair.purity.parsers.base import Parser
from repair.purity.rti import TreeSyntaxError, clean_tree, parse_tree, root_text, split_trees

log = logging.getLogger(__name__)


def _alnum(text: str) -> str:
    """Letters and digits only, lowercased: a tree's words match the sentence whatever the
    tokenization (`do n't` / `don't`, `Newsom ' s` / `Newsom's`, `-LRB-` / `(`)."""
    return "".join(ch for ch in text.lower() if ch.isalnum())


class PtbParser(Parser):
    """Parses by reading: one tree per sentence, in order, from `trees` (a UTF-8 file).

    Trees may be spread over several lines and carry raw treebank detail (function tags,
    indices, `-NONE-` traces, an unlabeled outer bracket). `sentences` are the root texts,
    for runs without a sentence file.
    """

    name = "ptb"

    def __init__(self, trees: str | None = None):
        if not trees:
            raise UserError("parser=ptb reads its trees from a file: set parser.trees=TREES.txt "
                            "(one bracketed tree per sentence)")
        from repair.fileio import read_text_lines

        self.path = Path(trees)
        lines = read_text_lines(self.path)
        try:
            chunks = split_trees(lines)
        except TreeSyntaxError as e:
            raise UserError(f"{self.path}:{e.offset}: malformed tree: {e}") from None
        self.trees: list[str] = []
        self.lines: list[int] = []
        self.sentences: list[str] = []
        for start, text in chunks:
            try:
                tree = parse_tree(text)
            except TreeSyntaxError as e:
                line = start + text[: e.offset].count("\n")
                raise UserError(f"{self.path}:{line}: malformed tree: {e}") from None
            cleaned = clean_tree(tree)
            self.trees.append(" ".join(text.split()))
            self.lines.append(start)
            self.sentences.append(root_text(cleaned) if cleaned is not None else "")
        if not self.trees:
            raise UserError(f"{self.path}: no trees in the file")
        self._keys = [_alnum(s) for s in self.sentences]
        log.info("%s: %d trees", self.path, len(self.trees))

    def parse(self, sentences: list[str]) -> list[str]:
        """The file's trees for `sentences`, which are the file's sentences in order, possibly
        with some left out (a run skips blank and overlong ones)."""
        out: list[str] = []
        next_tree = 0
        for sentence in sentences:
            key = _alnum(sentence)
            at = next_tree
            while at < len(self.trees) and self._keys[at] != key:
                at += 1
            if at == len(self.trees):
                if next_tree < len(self.trees):
                    seen = (f"; the next tree, at {self.path}:{self.lines[next_tree]}, "
                            f"reads {self.sentences[next_tree][:80]!r}")
                else:
                    seen = f"; all {len(self.trees)} trees are used up"
                raise UserError(f"the sentence {sentence[:80]!r} has no tree in {self.path}{seen}. "
                                "The trees file holds one tree per sentence, in the order of the sentences")
            out.append(self.trees[at])
            next_tree = at + 1
        return out
