"""The shape of a fairseq dictionary against the subwords a model is configured with: SentencePiece pieces (`▁`),
subword-nmt continuations (`@@`), or whole words. Used by the check before testing (repair.nmt.fairseq.modelcheck) and the
fine-tune's encoding probe (repair.nmt.fairseq.probe) alike."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from repair.nmt.preprocessing import ModelFiles, Side

PIECES_MIN = 0.1       # share of dictionary entries beginning with ▁ that makes a dictionary one of SentencePiece pieces
                       # (a joint one, Chinese pieces mostly without ▁: 28% in tests; a dictionary of words: none)
CONTINUATIONS_MIN = 0.05  # share ending with @@ that makes it one of subword-nmt (or fastBPE) units


def dictionary_symbols(path: str | Path) -> list[str]:
    """The entries of a fairseq dictionary file (`symbol count [#fairseq:overwrite]` a line)."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        parts = line.rstrip().split(" ")
        if parts and parts[-1] == "#fairseq:overwrite":
            parts = parts[:-1]
        if len(parts) >= 2:
            out.append(" ".join(parts[:-1]))
    return out


def dictionary_shape(symbols: Sequence[str]) -> dict:
    """What a dictionary's entries look like: the shares of SentencePiece pieces (beginning with ▁) and of
    subword-nmt continuations (ending with @@), and the kind of subwords that makes it."""
    n = max(1, len(symbols))
    pieces = sum(s.startswith("\u2581") for s in symbols) / n
    continuations = sum(s.endswith("@@") for s in symbols) / n
    kind = "sentencepiece" if pieces >= PIECES_MIN else "subword_nmt" if continuations >= CONTINUATIONS_MIN else "words"
    return {"entries": len(symbols), "pieces": round(pieces, 3), "continuations": round(continuations, 3), "kind": kind}


def shape_problem(side: Side, shape: dict) -> str | None:
    """Why a dictionary's shape does not fit the side's subword setting (None: it fits)."""
    if shape["kind"] == "sentencepiece" and side.bpe != "sentencepiece":
        return (f"its dictionary holds SentencePiece pieces ({shape['pieces']:.0%} of entries begin with \u2581) but "
                f"bpe is {side.bpe}")
    if shape["kind"] == "subword_nmt" and side.bpe not in ("subword_nmt", "fastbpe"):
        return (f"its dictionary holds subword-nmt units ({shape['continuations']:.0%} of entries end with @@) but "
                f"bpe is {side.bpe}")
    return None


def shape_hint(files: ModelFiles) -> str | None:
    """The subword setting the dictionaries' shape asks for where the configured one does not fit it (None: it fits)."""
    sides = {name: getattr(files, name) for name in ("src", "tgt")}
    shapes = {name: dictionary_shape(dictionary_symbols(side.dict)) for name, side in sides.items()}
    if not any(shape_problem(sides[name], shape) for name, shape in shapes.items()):
        return None
    return shape_advice(files, {name: {"dictionary": shape} for name, shape in shapes.items()})


def shape_advice(files: ModelFiles, record: dict) -> str | None:
    """Where no file found fits: the subword setting the dictionaries' shape asks for, and the key of its file."""
    kinds = {name: record[name]["dictionary"]["kind"] for name in ("src", "tgt")}
    wanted = {k for k in kinds.values() if k != "words"}
    if len(wanted) != 1:
        return None
    kind = wanted.pop()
    scope = "" if len(set(kinds.values())) == 1 else next(f"{n}_" for n, k in kinds.items() if k == kind)
    file_key = "sentencepiece_model" if kind == "sentencepiece" else "bpe_codes"
    what = "SentencePiece model (.model)" if kind == "sentencepiece" else "subword-nmt codes"
    return (f"The dictionaries hold {'SentencePiece pieces' if kind == 'sentencepiece' else 'subword-nmt units'} and "
            f"no {what} found beside the model fits them: give translator.{scope}bpe={kind} with "
            f"translator.{scope}{file_key}=FILE, the one the training data was encoded with")
