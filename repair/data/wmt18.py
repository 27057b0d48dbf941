"""The WMT'18 EN-ZH recipe: the released corpora under <root>/corpora/ -> <root>/raw/{train,valid,test}.{en,zh}.

Training data is what the WMT'18 news task offered for EN-ZH (about 20M pairs): News Commentary
v13, the UN Parallel Corpus v1.0 and the CWMT corpora. newstest2017 is the validation set (or
newsdev2017) and newstest2018 the test set (or newstest2017). Files may lie anywhere under
<root>/corpora/ (unpack the archives there); each is found by its file name. A dev or test set is
taken as plain aligned text (SET.en + SET.zh, as sacrebleu and most collections give it; in the
folder `devtest` names or under corpora/), else from its SGML release, else fetched with
sacrebleu's own downloader (its cache first) on a connected machine.
"""

from __future__ import annotations

import html
import json
import logging
import os
import re
import shutil
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from repair.errors import UserError
from repair.data.prepare import iter_parallel, read_parallel
from repair.fileio import iter_text_lines, read_text_lines, write_json_atomic, write_text_atomic

logger = logging.getLogger(__name__)

WMT18 = "http://data.statmt.org/wmt18/translation-task"
UN_URL = "https://conferences.unite.un.org/uncorpus (UNv1.0.en-zh.tar.gz.00 and .01, joined with cat)"
CWMT_URL = "the CWMT corpora, distributed to registered WMT'18 participants (see http://www.statmt.org/wmt18/translation-task.html)"

# Public training archives a connected machine can fetch; each unpacks into <root>/corpora/ (the dev and
# test sets come through sacrebleu's downloader: `download`).
DOWNLOADS = {
    "training-parallel-nc-v13.tgz": f"{WMT18}/training-parallel-nc-v13.tgz",
}

# The CWMT sub-corpora WMT'18 listed for EN-ZH; each is a folder of <name>_en.txt / <name>_ch.txt
# (or _cn.txt) files, aligned line by line.
CWMT_CORPORA = ("casia2015", "casict2011", "casict2015", "datum2015", "datum2017", "neu2017")


@dataclass(frozen=True)
class Source:
    """One corpus file (or pair of files) the recipe needs, with where it comes from."""

    names: tuple[str, ...]  # any one of these file names will do
    origin: str


NEWS_COMMENTARY = (
    Source(("news-commentary-v13.en-zh.tsv", "news-commentary-v13.zh-en.en"), f"{WMT18}/training-parallel-nc-v13.tgz"),
)
UN = (Source(("UNv1.0.en-zh.en",), UN_URL), Source(("UNv1.0.en-zh.zh",), UN_URL))


def _sgm(name: str, archive: str) -> Source:
    return Source((name,), f"{WMT18}/{archive}")


# Each dev and test set: the WMT'18 archive of its SGML release, and sacrebleu's name for it
# (`sacrebleu -t NAME -l en-zh --echo src` prints its English).
TEST_SETS = {
    "newsdev2017": ("dev.tgz", "wmt17/dev"),
    "newstest2017": ("dev.tgz", "wmt17"),
    "newstest2018": ("test.tgz", "wmt18"),
}
VALID_CHOICES = ("newstest2017", "newsdev2017")
TEST_CHOICES = ("newstest2018", "newstest2017")


def sgm_sources(set_name: str) -> tuple[Source, Source]:
    archive = TEST_SETS[set_name][0]
    return _sgm(f"{set_name}-enzh-src.en.sgm", archive), _sgm(f"{set_name}-enzh-ref.zh.sgm", archive)


# ----------------------------------------------------------------------------- finding files


class Corpora:
    """Finds corpus files by name anywhere under one folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._index: dict[str, Path] = {}
        if folder.is_dir():
            for p in sorted(folder.rglob("*")):
                if p.is_file():
                    self._index.setdefault(p.name, p)

    def find(self, source: Source) -> Path | None:
        for n in source.names:
            if n in self._index:
                return self._index[n]
        return None

    def cwmt(self, corpus: str) -> list[tuple[Path, Path]]:
        """(English, Chinese) file pairs of one CWMT sub-corpus folder."""
        folders = [p for p in self.folder.rglob(corpus) if p.is_dir()] if self.folder.is_dir() else []
        pairs = []
        for folder in folders:
            for en in sorted(folder.rglob("*_en.txt")):
                stem = en.name[: -len("_en.txt")]
                for zh_name in (f"{stem}_ch.txt", f"{stem}_cn.txt", f"{stem}_zh.txt"):
                    if (en.parent / zh_name).is_file():
                        pairs.append((en, en.parent / zh_name))
                        break
        return pairs


def _missing_message(root: Path, missing: list[tuple[str, str]]) -> str:
    corpora = root / "corpora"
    lines = [f"WMT'18 EN-ZH data incomplete: put these under {corpora}/ (any sub-folder; unpack the archives there):"]
    for what, origin in missing:
        lines.append(f"  {what}\n      from {origin}")
    lines.append(f"Public parts (News Commentary, the dev and test sets) can be fetched with: "
                 f"python -m repair.data.wmt18 download {root}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- readers


_SEG = re.compile(r"<seg\b([^>]*)>(.*?)</seg>", re.S | re.I)
_DOC = re.compile(r"<doc\b([^>]*)>", re.I)
_ATTR = re.compile(r"(\w+)\s*=\s*\"([^\"]*)\"")


def read_sgm(path: Path) -> list[tuple[str, str, str]]:
    """(docid, segid, text) of every <seg> in a WMT SGML file, in order, entities unescaped."""
    text = "\n".join(read_text_lines(path))
    out: list[tuple[str, str, str]] = []
    docid = ""
    events = sorted([(m.start(), "doc", m) for m in _DOC.finditer(text)] + [(m.start(), "seg", m) for m in _SEG.finditer(text)],
                    key=lambda e: e[0])
    for _, kind, m in events:
        attrs = dict(_ATTR.findall(m.group(1)))
        if kind == "doc":
            docid = attrs.get("docid", "")
        else:
            out.append((docid, attrs.get("id", str(len(out) + 1)), html.unescape(m.group(2)).strip()))
    if not out:
        raise UserError(f"{path}: no <seg> elements; is it a WMT .sgm file?")
    return out


def read_sgm_pair(src: Path, ref: Path) -> list[tuple[str, str]]:
    """Aligned (English, Chinese) segments of a source and reference SGML pair, matched by document and segment id."""
    s, r = read_sgm(src), read_sgm(ref)
    refs = {(d, i): t for d, i, t in r}
    missing = [(d, i) for d, i, _ in s if (d, i) not in refs]
    if missing:
        d, i = missing[0]
        raise UserError(f"{ref}: no reference for document {d!r} segment {i} of {src} ({len(missing)} segments unmatched)")
    return [(t, refs[(d, i)]) for d, i, t in s]


def iter_tsv(path: Path, stats: dict) -> Iterator[tuple[str, str]]:
    for line in iter_text_lines(path):
        fields = line.split("\t")
        if len(fields) < 2:
            stats["malformed"] = stats.get("malformed", 0) + 1
            continue
        yield fields[0], fields[1]


# ----------------------------------------------------------------------------- dev and test sets


class FetchFailed(Exception):
    """sacrebleu could not give a set here (no network, a bad download); the reason in words."""


def find_set(corpora: Corpora, devtest: Path | None, set_name: str) -> tuple[str, Path, Path] | list[str]:
    """A dev or test set's files: ("plain", SET.en, SET.zh) from the `devtest` folder or anywhere under
    corpora/, else ("sgml", source, reference) of its SGML release under corpora/; else the SGML files missing."""
    if devtest is not None and all((devtest / f"{set_name}.{lang}").is_file() for lang in ("en", "zh")):
        return "plain", devtest / f"{set_name}.en", devtest / f"{set_name}.zh"
    en, zh = (corpora.find(Source((f"{set_name}.{lang}",), "")) for lang in ("en", "zh"))
    if en and zh:
        return "plain", en, zh
    srcs = sgm_sources(set_name)
    paths = [corpora.find(s) for s in srcs]
    if all(paths):
        return "sgml", paths[0], paths[1]
    return [s.names[0] for s, p in zip(srcs, paths) if p is None]


def fetch_set(set_name: str, corpora: Path, *, timeout: float = 30.0) -> tuple[str, Path, Path]:
    """SET's English and Chinese through sacrebleu's downloader (its cache, $SACREBLEU or ~/.sacrebleu, first;
    else WMT's release, fetched and turned into plain text), copied to corpora/sacrebleu/SET.{en,zh} (where a
    later run finds them as plain text). FetchFailed with the reason when it cannot."""
    import socket

    from sacrebleu.dataset import DATASETS

    dataset = DATASETS[TEST_SETS[set_name][1]]
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout)  # sacrebleu's download sets no timeout: a silent network would hang it
    try:
        files = dataset.get_source_file("en-zh"), dataset.get_reference_files("en-zh")[0]
    except SystemExit:  # sacrebleu exits on a bad checksum or an SSL error, after logging why
        raise FetchFailed("sacrebleu stopped; its log above says why") from None
    except Exception as e:  # no network, a refused connection, a broken archive: any of them is the same answer
        raise FetchFailed(f"{type(e).__name__}: {e}") from None
    finally:
        socket.setdefaulttimeout(previous)
    out = corpora / "sacrebleu"
    for path, lang in zip(files, ("en", "zh")):
        write_text_atomic(out / f"{set_name}.{lang}", Path(path).read_text(encoding="utf-8"))
    return "sacrebleu", out / f"{set_name}.en", out / f"{set_name}.zh"


def locate_set(corpora: Corpora, devtest: Path | None, set_name: str, fetch: bool, timeout: float,
               missing: list[tuple[str, str]]) -> tuple | None:
    """(set name, format, English file, Chinese file) of a dev or test set, found (find_set) or fetched
    (fetch_set, when `fetch`); else None, with what to put where added to `missing`."""
    got = find_set(corpora, devtest, set_name)
    if isinstance(got, tuple):
        return (set_name, *got)
    archive, name = TEST_SETS[set_name]
    failed = "data.fetch=false: not fetched"
    if fetch:
        try:
            return (set_name, *fetch_set(set_name, corpora.folder, timeout=timeout))
        except FetchFailed as e:
            failed = f"sacrebleu could not fetch it here: {e}"
    if len(got) == 1:  # half an SGML release: the file that is missing
        missing.append((got[0], f"{WMT18}/{archive}"))
    else:
        missing.append((f"{set_name}.en + {set_name}.zh (plain aligned text) in a folder that data.devtest=FOLDER names "
                        f"(or anywhere under corpora/), or {got[0]} + {got[1]} (SGML)",
                        f"`sacrebleu -t {name} -l en-zh --echo src` (and `ref`) on a connected machine, which the "
                        f"recipe runs itself, or {WMT18}/{archive}; {failed}"))
    return None


def check_sets(valid_set: str, test_set: str, devtest: str | os.PathLike | None) -> Path | None:
    """The dev and test set chosen (a UserError naming the key when one is not WMT'18's), and the devtest folder."""
    if test_set not in TEST_CHOICES:
        raise UserError(f"data.test_set={test_set!r}: choose {' or '.join(TEST_CHOICES)}")
    if valid_set not in VALID_CHOICES or valid_set == test_set:
        raise UserError(f"data.valid_set={valid_set!r}: choose {' or '.join(VALID_CHOICES)}, "
                        f"another set than data.test_set={test_set}")
    if devtest is None:
        return None
    if not Path(devtest).is_dir():
        raise UserError(f"data.devtest={devtest}: no such folder (give the folder that holds "
                        f"{valid_set}.{{en,zh}} and {test_set}.{{en,zh}})")
    return Path(devtest)


# ----------------------------------------------------------------------------- the recipe


def training_files(corpora: Corpora, missing: list[tuple[str, str]]) -> list[tuple]:
    """(name, "tsv" or "pair", file or files) of every training corpus found; what is not is added to `missing`."""
    train: list[tuple] = []
    nc = corpora.find(NEWS_COMMENTARY[0])
    if nc is None:
        missing.append(("news-commentary-v13.en-zh.tsv (or news-commentary-v13.zh-en.en + .zh)", NEWS_COMMENTARY[0].origin))
    elif nc.suffix == ".tsv":
        train.append(("news-commentary-v13", "tsv", nc))
    else:
        zh = nc.with_suffix(".zh")
        if not zh.is_file():
            missing.append((zh.name, NEWS_COMMENTARY[0].origin))
        else:
            train.append(("news-commentary-v13", "pair", (nc, zh)))

    un = [corpora.find(s) for s in UN]
    for s, p in zip(UN, un):
        if p is None:
            missing.append((s.names[0], s.origin))
    if all(un):
        train.append(("un-v1.0", "pair", (un[0], un[1])))

    for name in CWMT_CORPORA:
        pairs = corpora.cwmt(name)
        if not pairs:
            missing.append((f"cwmt: a folder {name}/ with *_en.txt and *_ch.txt (or *_cn.txt) files", CWMT_URL))
        for en, zh in pairs:
            train.append((f"cwmt-{name}-{en.name[:-len('_en.txt')]}", "pair", (en, zh)))
    return train


def plan(root: str | os.PathLike = "data/wmt18", test_set: str = "newstest2018", *, valid_set: str = "newstest2017",
         devtest: str | os.PathLike | None = None, fetch: bool = True, timeout: float = 30.0) -> dict:
    """Every input file of the recipe, found under <root>/corpora (a dev or test set also in `devtest`, or
    fetched by sacrebleu when `fetch`); one UserError lists all that are missing."""
    root = Path(root)
    devtest_dir = check_sets(valid_set, test_set, devtest)
    corpora = Corpora(root / "corpora")
    missing: list[tuple[str, str]] = []
    found: dict = {"train": training_files(corpora, missing)}
    for split, set_name in (("valid", valid_set), ("test", test_set)):
        found[split] = locate_set(corpora, devtest_dir, set_name, fetch, timeout, missing)
    if missing:
        raise UserError(_missing_message(root, missing))
    return found


def write_train(raw: Path, train: list[tuple]) -> dict:
    """raw/train.{en,zh}: every training corpus, one pair a line; the pairs (and malformed lines) per corpus."""
    counts: dict = {}
    tmp_en, tmp_zh = raw / ".train.en.tmp", raw / ".train.zh.tmp"
    with open(tmp_en, "w", encoding="utf-8") as fe, open(tmp_zh, "w", encoding="utf-8") as fz:
        for name, kind, p in train:
            stats: dict = {}
            rows = iter_tsv(p, stats) if kind == "tsv" else iter_parallel(*p)
            n = 0
            for en, zh in rows:
                # One pair per line: a tab or newline inside a field would break the alignment.
                fe.write(en.replace("\n", " ") + "\n")
                fz.write(zh.replace("\n", " ") + "\n")
                n += 1
            counts[name] = {"pairs": n, **stats}
            logger.info("%s: %d pairs", name, n)
    os.replace(tmp_en, raw / "train.en")
    os.replace(tmp_zh, raw / "train.zh")
    return counts


def collect(root: str | os.PathLike = "data/wmt18", *, test_set: str = "newstest2018", valid_set: str = "newstest2017",
            devtest: str | os.PathLike | None = None, fetch: bool = True, force: bool = False) -> dict:
    """Write <root>/raw/{train,valid,test}.{en,zh} from the corpora and sets (see `plan`); returns counts per
    corpus and set, and where each set was read (`sets`: its format, plain, sgml or sacrebleu, and its files).

    Skips the work when <root>/raw/collect.json records the same input files (sizes, times).
    """
    root = Path(root)
    found = plan(root, test_set, valid_set=valid_set, devtest=devtest, fetch=fetch)
    inputs = []
    for _, kind, p in found["train"]:
        inputs += [p] if kind == "tsv" else list(p)
    inputs += list(found["valid"][2:]) + list(found["test"][2:])
    stamp = {str(p): [p.stat().st_size, p.stat().st_mtime_ns] for p in inputs}
    raw = root / "raw"
    record_path = raw / "collect.json"
    outputs = [raw / f"{s}.{l}" for s in ("train", "valid", "test") for l in ("en", "zh")]
    if not force and record_path.is_file() and all(p.is_file() for p in outputs):
        record = json.loads(record_path.read_text(encoding="utf-8"))
        if record.get("inputs") == stamp:
            logger.info("%s already collected: skipping", raw)
            return record

    raw.mkdir(parents=True, exist_ok=True)
    counts: dict = {"train": write_train(raw, found["train"])}
    sets = {}
    for split in ("valid", "test"):
        set_name, kind, en, zh = found[split]
        pairs = read_sgm_pair(en, zh) if kind == "sgml" else read_parallel(en, zh)
        for i, lang in enumerate(("en", "zh")):
            write_text_atomic(raw / f"{split}.{lang}", "".join(p[i].replace("\n", " ") + "\n" for p in pairs))
        counts[split] = {set_name: len(pairs)}
        sets[split] = {"name": set_name, "format": kind, "en": str(en), "zh": str(zh)}
        logger.info("%s: %s, %d pairs (%s: %s)", split, set_name, len(pairs), kind, en.parent)
    record = {"inputs": stamp, "counts": counts, "sets": sets}
    write_json_atomic(record_path, record)
    return record


def download(root: str | os.PathLike = "data/wmt18", *, timeout: float = 30.0,
             sets: tuple[str, ...] = ("newstest2017", "newstest2018")) -> list[Path]:
    """Fetch and unpack the public training archive (News Commentary v13) into <root>/corpora/, and the dev
    and test sets through sacrebleu's downloader into <root>/corpora/sacrebleu/ as plain aligned text.

    The UN corpus and CWMT have to be fetched by hand (registration); `collect` says where.
    Without a network this fails with a clear message.
    """
    corpora = Path(root) / "corpora"
    corpora.mkdir(parents=True, exist_ok=True)
    fetched = []
    for name, url in DOWNLOADS.items():
        target = corpora / name
        if not target.is_file():
            part = target.with_suffix(target.suffix + ".part")
            try:
                with urllib.request.urlopen(url, timeout=timeout) as r, open(part, "wb") as f:
                    shutil.copyfileobj(r, f)
            except OSError as e:
                part.unlink(missing_ok=True)
                raise UserError(f"could not download {url} ({e}); fetch it by hand into {corpora}/ and unpack it there") from None
            os.replace(part, target)
        with tarfile.open(target) as tar:
            tar.extractall(corpora, filter="data")
        fetched.append(target)
    for set_name in sets:
        try:
            fetched += list(fetch_set(set_name, corpora, timeout=timeout)[1:])
        except FetchFailed as e:
            raise UserError(f"sacrebleu could not fetch {set_name} ({e}); put {set_name}.en and {set_name}.zh (plain "
                            f"aligned text) under {corpora}/, or in a folder that data.devtest=FOLDER names") from None
    return fetched


def main(argv: list[str] | None = None) -> None:
    """`python -m repair.data.wmt18 [download|collect] [ROOT]`."""
    import sys

    from repair.errors import exit_on_user_error

    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("download", "collect"):
        print("usage: python -m repair.data.wmt18 {download,collect} [ROOT=data/wmt18]", file=sys.stderr)
        sys.exit(2)
    root = argv[1] if len(argv) > 1 else "data/wmt18"
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    @exit_on_user_error
    def run() -> None:
        if argv[0] == "download":
            for p in download(root):
                print(f"fetched {p}")
        else:
            record = collect(root)
            print(json.dumps(record["counts"], indent=2))

    run()


if __name__ == "__main__":
    main()
