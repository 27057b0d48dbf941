"""Raw parallel text -> cleaned text -> SentencePiece -> fairseq binarized data, all in-process.

Layout (see the contracts): <data_dir>/raw/{train,valid,test}.{en,zh} is read;
<data_dir>/clean/ (cleaned text), <data_dir>/spm/{en,zh}.model and <data_dir>/bin/ (fairseq
binarized splits with dict.en.txt, dict.zh.txt) are written, plus <data_dir>/prepare.json with
the counts and a fingerprint of the inputs so that a rerun with unchanged inputs does nothing.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
import tempfile
import unicodedata
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from tqdm import tqdm

from repair.errors import UserError
from repair.fileio import iter_text_lines, write_json_atomic

logger = logging.getLogger(__name__)

SRC, TGT = "en", "zh"
LANGS = (SRC, TGT)
SPLITS = ("train", "valid", "test")
PREPARE_VERSION = 1


# ----------------------------------------------------------------------------- cleaning

# Control characters (Cc) except tab/newline handling below, plus BOMs and zero-width marks
# that fairseq's whitespace tokenizer would otherwise keep inside tokens.
_INVISIBLE = {"\ufeff", "\u200b", "\u200c", "\u200d", "\u2060", "\u00ad"}


def clean_text(text: str) -> str:
    """One line with control characters and BOMs removed and whitespace collapsed."""
    out = []
    for ch in text:
        if ch in _INVISIBLE:
            continue
        if ch in "\t\u3000\u00a0" or (ch.isspace() and ch != " "):
            out.append(" ")
            continue
        if unicodedata.category(ch) == "Cc":
            continue
        out.append(ch)
    return " ".join("".join(out).split())


def _length(text: str, lang: str) -> int:
    # English in words, Chinese in non-space characters: comparable units for the ratio filter.
    return len(text.split()) if lang == SRC else len(text.replace(" ", ""))


def iter_clean_pairs(
    pairs: Iterable[tuple[str, str]],
    counts: dict,
    *,
    max_ratio: float = 9.0,
    max_length: int = 250,
    dedup: bool = True,
    filter_length: bool = True,
) -> Iterator[tuple[str, str]]:
    """Cleaned pairs that pass the filters, streamed; `counts` is filled with what was dropped."""
    for k in ("input", "empty", "too_long", "ratio", "duplicate", "kept", "changed"):
        counts.setdefault(k, 0)
    seen: set[int] = set()
    for en_raw, zh_raw in pairs:
        counts["input"] += 1
        en, zh = clean_text(en_raw), clean_text(zh_raw)
        if en != en_raw or zh != zh_raw:
            counts["changed"] += 1
        if not en or not zh:
            counts["empty"] += 1
            continue
        if filter_length:
            le, lz = _length(en, SRC), _length(zh, TGT)
            if le > max_length or lz > max_length:
                counts["too_long"] += 1
                continue
            if max(le, lz) / min(le, lz) > max_ratio:
                counts["ratio"] += 1
                continue
        if dedup:
            # 8-byte digests keep the seen-set small for corpora of tens of millions of pairs.
            key = int.from_bytes(hashlib.blake2b(f"{en}\t{zh}".encode(), digest_size=8).digest(), "little")
            if key in seen:
                counts["duplicate"] += 1
                continue
            seen.add(key)
        counts["kept"] += 1
        yield en, zh


# ----------------------------------------------------------------------------- reading raw data


def raw_paths(data_dir: str | os.PathLike) -> dict[tuple[str, str], Path]:
    raw = Path(data_dir) / "raw"
    return {(split, lang): raw / f"{split}.{lang}" for split in SPLITS for lang in LANGS}


def parallel_sources(data_dir: str | os.PathLike, given: dict[str, Any] | None = None) -> dict[tuple[str, str], Path]:
    """The raw file of each (split, lang) of a user's corpus: `given[split]` is a pair of files
    [EN, ZH] or a prefix (PREFIX.en, PREFIX.zh); a split not given is <data_dir>/{split}.{lang},
    or <data_dir>/raw/{split}.{lang} when that folder holds it."""
    data_dir = Path(data_dir)
    out: dict[tuple[str, str], Path] = {}
    for split in SPLITS:
        spec = (given or {}).get(split)
        if spec is None:
            plain = {lang: data_dir / f"{split}.{lang}" for lang in LANGS}
            raw = {lang: data_dir / "raw" / f"{split}.{lang}" for lang in LANGS}
            chosen = plain if any(p.is_file() for p in plain.values()) or not any(p.is_file() for p in raw.values()) else raw
        elif isinstance(spec, str):
            chosen = {lang: Path(f"{spec}.{lang}") for lang in LANGS}
        elif len(spec) == 2:
            chosen = dict(zip(LANGS, map(Path, spec)))
        else:
            raise UserError(f"data.{split}={spec!r}: give [EN_FILE, ZH_FILE] or a prefix (PREFIX.en, PREFIX.zh)")
        out.update({(split, lang): path for lang, path in chosen.items()})
    return out


def check_raw(data_dir: str | os.PathLike, paths: dict[tuple[str, str], Path] | None = None) -> None:
    """One UserError listing every missing raw file."""
    paths = paths or raw_paths(data_dir)
    missing = [p for p in paths.values() if not p.is_file()]
    if missing:
        lines = "\n".join(f"  {p}" for p in missing)
        where = Path(data_dir) / "raw" if paths == raw_paths(data_dir) else "the paths given"
        raise UserError(
            f"parallel data missing under {where}; put these files there "
            f"(plain UTF-8, one sentence per line, line N of .en aligned with line N of .zh):\n{lines}"
        )


def iter_parallel(en_path: Path, zh_path: Path) -> Iterator[tuple[str, str]]:
    """Aligned (English, Chinese) lines of two files, streamed; unequal lengths are a UserError."""
    n = 0
    en_it, zh_it = iter_text_lines(en_path), iter_text_lines(zh_path)
    for en, zh in itertools.zip_longest(en_it, zh_it):
        if en is None or zh is None:
            rest = 1 + sum(1 for _ in (zh_it if en is None else en_it))
            n_en, n_zh = (n, n + rest) if en is None else (n + rest, n)
            raise UserError(f"{en_path} has {n_en} lines but {zh_path} has {n_zh}: the two sides must be aligned line by line")
        n += 1
        yield en, zh


def read_parallel(en_path: Path, zh_path: Path) -> list[tuple[str, str]]:
    return list(iter_parallel(en_path, zh_path))


def _fingerprint(paths: Sequence[Path], options: dict) -> str:
    h = hashlib.sha1(json.dumps(options, sort_keys=True).encode())
    for p in paths:
        st = p.stat()
        h.update(f"{p.name}\t{st.st_size}\t{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


# ----------------------------------------------------------------------------- SentencePiece


def spm_paths(data_dir: str | os.PathLike) -> dict[str, Path]:
    return {lang: Path(data_dir) / "spm" / f"{lang}.model" for lang in LANGS}


def train_spm(text_path: Path, model_prefix: Path, *, vocab_size: int, lang: str, character_coverage: float | None = None,
              model_type: str = "unigram", input_sentence_size: int = 2_000_000, threads: int = 1) -> Path:
    import sentencepiece as spm

    model_prefix.parent.mkdir(parents=True, exist_ok=True)
    if character_coverage is None:
        character_coverage = 0.9995 if lang == TGT else 1.0
    try:
        _train_spm(spm, text_path, model_prefix, vocab_size, model_type, character_coverage, input_sentence_size,
                   threads, lang)
    except RuntimeError as e:
        needed = re.search(r"smaller than required_chars\. (\d+) vs (\d+)", str(e))
        if needed:
            raise UserError(
                f"{text_path}: a SentencePiece vocabulary of {needed.group(1)} pieces is smaller than the "
                f"{needed.group(2)} characters of the {lang} side it must keep; set data.prepare.vocab_size "
                f"(or {'src' if lang == SRC else 'tgt'}_vocab_size) to at least {int(needed.group(2)) + 100}"
            ) from None
        raise UserError(f"{text_path}: SentencePiece could not train on it ({str(e).strip()[:300]})") from None
    return model_prefix.with_suffix(".model")


def _train_spm(spm, text_path: Path, model_prefix: Path, vocab_size: int, model_type: str, character_coverage: float,
               input_sentence_size: int, threads: int, lang: str) -> None:
    spm.SentencePieceTrainer.train(
        input=str(text_path),
        model_prefix=str(model_prefix),
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        input_sentence_size=input_sentence_size,
        shuffle_input_sentence=True,
        # Small corpora cannot fill a large vocabulary: take what the data gives.
        hard_vocab_limit=False,
        # Pieces go through fairseq's dictionary; an unknown one decodes as "<unk>", not as spm's "⁇".
        unk_surface="<unk>",
        num_threads=max(1, threads),
        # NFKC would turn Chinese full-width punctuation (，：) into ASCII, which references never use.
        normalization_rule_name="identity" if lang == TGT else "nmt_nfkc",
        minloglevel=2,
    )


def load_spm(path: str | os.PathLike):
    import sentencepiece as spm

    path = Path(path)
    if not path.is_file():
        raise UserError(
            f"SentencePiece model {path} not found; run data preparation (repair.data.prepare.prepare_data) "
            f"or give the path of the model the checkpoint was trained with"
        )
    try:
        return spm.SentencePieceProcessor(model_file=str(path))
    except Exception as e:  # sentencepiece raises OSError/RuntimeError with its own text
        raise UserError(f"{path}: not a SentencePiece model ({e})") from None


def encode_pieces(sp, texts: Sequence[str], threads: int = 1) -> list[str]:
    return [" ".join(p) for p in sp.encode(list(texts), out_type=str, num_threads=max(1, threads))]


def encode_file(sp, src: Path, dst: Path, *, threads: int = 1, chunk: int = 100_000) -> None:
    """SentencePiece pieces of every line of src, space separated, into dst (streamed in chunks)."""
    with open(dst, "w", encoding="utf-8") as out:
        batch: list[str] = []
        for line in iter_text_lines(src):
            batch.append(line)
            if len(batch) >= chunk:
                out.write("".join(l + "\n" for l in encode_pieces(sp, batch, threads)))
                batch = []
        if batch:
            out.write("".join(l + "\n" for l in encode_pieces(sp, batch, threads)))


# ----------------------------------------------------------------------------- binarizing


def binarize_file(text_path: Path, dictionary, out_prefix: Path, workers: int = 1) -> None:
    """One text file of tokens, binarized with `dictionary` into out_prefix.{bin,idx} (fairseq's mmap format)."""
    from fairseq.binarizer import FileBinarizer, VocabularyDatasetBinarizer

    binarizer = VocabularyDatasetBinarizer(dictionary, append_eos=True)
    summary = FileBinarizer.multiprocess_dataset(
        str(text_path), "mmap", binarizer, str(out_prefix), vocab_size=len(dictionary), num_workers=max(1, workers)
    )
    logger.info("binarized %s: %s", out_prefix.name, summary)


def _build_dictionary(text_path: Path, workers: int = 1):
    from fairseq.data import Dictionary
    from fairseq.tokenizer import tokenize_line

    d = Dictionary()
    Dictionary.add_file_to_dictionary(str(text_path), d, tokenize_line, max(1, workers))
    d.finalize(threshold=-1, nwords=-1, padding_factor=8)
    return d


def load_dictionary(path: str | os.PathLike):
    from fairseq.data import Dictionary

    path = Path(path)
    if not path.is_file():
        raise UserError(f"fairseq dictionary {path} not found; run data preparation or give the dictionary the model was trained with")
    try:
        return Dictionary.load(str(path))
    except Exception as e:
        raise UserError(f"{path}: not a fairseq dictionary ({e})") from None


def bin_prefix(bin_dir: Path, split: str, lang: str) -> Path:
    return Path(bin_dir) / f"{split}.{SRC}-{TGT}.{lang}"


# ----------------------------------------------------------------------------- the stage


def clean_splits(paths: dict[tuple[str, str], Path], clean_dir: Path, *, max_ratio: float, max_length: int) -> dict:
    """Every split cleaned into clean_dir/{split}.{lang}; the counts per split. The raw files are checked
    as they are read (UTF-8, both sides aligned): a bad line stops the work, naming the file and line, and
    nothing is written to clean_dir (the splits are cleaned into a temporary folder beside it first)."""
    out: dict = {}
    clean_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=clean_dir.parent, prefix=".clean.") as tmp:
        tmp = Path(tmp)
        for split in SPLITS:
            counts: dict = {}
            # Valid and test stay comparable with published figures: only repair text, never filter.
            kept = iter_clean_pairs(iter_parallel(paths[(split, SRC)], paths[(split, TGT)]), counts,
                                    max_ratio=max_ratio, max_length=max_length,
                                    dedup=split == "train", filter_length=split == "train")
            with open(tmp / f"{split}.{SRC}", "w", encoding="utf-8") as fe, \
                    open(tmp / f"{split}.{TGT}", "w", encoding="utf-8") as fz:
                for en, zh in tqdm(kept, desc=f"cleaning {split}", unit=" pairs", disable=None):
                    fe.write(en + "\n")
                    fz.write(zh + "\n")
            if not counts["kept"]:
                raise UserError(f"{paths[(split, SRC)]}: no usable sentence pairs after cleaning ({counts})")
            out[split] = counts
            logger.info("%s: %d pairs in, %d kept (empty %d, too long %d, ratio %d, duplicate %d, repaired %d)",
                        split, counts["input"], counts["kept"], counts["empty"], counts["too_long"], counts["ratio"],
                        counts["duplicate"], counts["changed"])
        clean_dir.mkdir(parents=True, exist_ok=True)
        for split in SPLITS:
            for lang in (SRC, TGT):
                os.replace(tmp / f"{split}.{lang}", clean_dir / f"{split}.{lang}")
    return out


def encode_splits(data_dir: Path, *, vocab: dict[str, int], model_type: str, spm_input_sentence_size: int,
                  workers: int) -> dict:
    """A SentencePiece model per language trained on the cleaned training split, every split encoded with
    it and binarized with a dictionary built from the training split, into data_dir/{spm,bin}; the sizes."""
    clean_dir, bin_dir = data_dir / "clean", data_dir / "bin"
    sizes: dict = {}
    bin_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=data_dir, prefix=".prepare.") as tmp:
        tmp = Path(tmp)
        for lang in LANGS:
            sp_path = train_spm(clean_dir / f"train.{lang}", tmp / lang, vocab_size=vocab[lang], lang=lang,
                                model_type=model_type, input_sentence_size=spm_input_sentence_size, threads=workers)
            sp = load_spm(sp_path)
            for split in SPLITS:
                encode_file(sp, clean_dir / f"{split}.{lang}", tmp / f"{split}.{lang}", threads=workers)
            d = _build_dictionary(tmp / f"train.{lang}", workers)
            d.save(str(tmp / f"dict.{lang}.txt"))
            for split in SPLITS:
                binarize_file(tmp / f"{split}.{lang}", d, tmp / f"{split}.{SRC}-{TGT}.{lang}", workers)
            sizes[lang] = {"spm": sp.get_piece_size(), "dict": len(d)}
        (data_dir / "spm").mkdir(parents=True, exist_ok=True)
        for lang in LANGS:
            for ext in (".model", ".vocab"):
                os.replace(tmp / f"{lang}{ext}", data_dir / "spm" / f"{lang}{ext}")
            os.replace(tmp / f"dict.{lang}.txt", bin_dir / f"dict.{lang}.txt")
            for split in SPLITS:
                for ext in (".bin", ".idx"):
                    name = f"{split}.{SRC}-{TGT}.{lang}{ext}"
                    os.replace(tmp / name, bin_dir / name)
    return sizes


def prepare_data(
    data_dir: str | os.PathLike,
    *,
    vocab_size: int = 8000,
    src_vocab_size: int | None = None,
    tgt_vocab_size: int | None = None,
    model_type: str = "unigram",
    max_ratio: float = 9.0,
    max_length: int = 250,
    spm_input_sentence_size: int = 2_000_000,
    workers: int = 1,
    force: bool = False,
    sources: dict[tuple[str, str], str | os.PathLike] | None = None,
    encode: bool = True,
) -> dict:
    """Clean, train SentencePiece per language, binarize; returns (and writes) the counts.

    sources: the raw file of each (split, lang), default <data_dir>/raw/{split}.{lang}.
    encode=False only cleans (a model brought along has its own preprocessing): the clean/
    splits are what the loop reads then.
    Idempotent: when <data_dir>/prepare.json records the same inputs and options and every
    output exists, nothing is redone.
    """
    data_dir = Path(data_dir)
    paths = {**raw_paths(data_dir), **{k: Path(v) for k, v in (sources or {}).items()}}
    check_raw(data_dir, paths)
    clean_options = {"version": PREPARE_VERSION, "max_ratio": max_ratio, "max_length": max_length}
    options = {
        **clean_options,
        "vocab": {SRC: src_vocab_size or vocab_size, TGT: tgt_vocab_size or vocab_size},
        "model_type": model_type,
    }
    raw_files = [paths[k] for k in sorted(paths)]
    fingerprint, clean_fingerprint = _fingerprint(raw_files, options), _fingerprint(raw_files, clean_options)
    record_path = data_dir / "prepare.json"
    bin_dir, clean_dir = data_dir / "bin", data_dir / "clean"
    cleaned = [clean_dir / f"{s}.{l}" for s in SPLITS for l in LANGS]
    outputs = cleaned + [bin_dir / f"dict.{l}.txt" for l in LANGS] + list(spm_paths(data_dir).values()) + [
        Path(str(bin_prefix(bin_dir, s, l)) + ext) for s in SPLITS for l in LANGS for ext in (".bin", ".idx")
    ]
    if not force and record_path.is_file() and all(p.exists() for p in (outputs if encode else cleaned)):
        record = json.loads(record_path.read_text(encoding="utf-8"))
        if record.get("fingerprint") == fingerprint or (not encode and record.get("clean_fingerprint") == clean_fingerprint):
            logger.info("data in %s already prepared (inputs unchanged): skipping", data_dir)
            return record

    stats: dict = {"splits": clean_splits(paths, clean_dir, max_ratio=max_ratio, max_length=max_length)}
    if not encode:
        record = {"clean_fingerprint": clean_fingerprint, "options": clean_options, **stats}
        write_json_atomic(record_path, record)
        return record

    stats["vocab"] = encode_splits(data_dir, vocab=options["vocab"], model_type=model_type,
                                   spm_input_sentence_size=spm_input_sentence_size, workers=workers)
    record = {"fingerprint": fingerprint, "clean_fingerprint": clean_fingerprint, "options": options, **stats,
              "spm": {l: str(p) for l, p in spm_paths(data_dir).items()}, "bin": str(bin_dir)}
    write_json_atomic(record_path, record)
    return record


def read_clean_pairs(data_dir: str | os.PathLike, split: str = "train") -> list[tuple[str, str]]:
    """The cleaned pairs of a prepared split (for a replay sample)."""
    clean = Path(data_dir) / "clean"
    return read_parallel(clean / f"{split}.{SRC}", clean / f"{split}.{TGT}")
