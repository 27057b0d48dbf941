"""The WMT'18 EN-ZH recipe on tiny files in the real release formats (TSV, plain pairs, SGML)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from repair.data import wmt18
from repair.data.wmt18 import collect, read_sgm, read_sgm_pair
from repair.errors import UserError

FIXTURE = Path(__file__).parent / "fixtures" / "nmt" / "wmt18"


@pytest.fixture
def root(tmp_path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "wmt18")
    return tmp_path / "wmt18"


def lines(p: Path) -> list[str]:
    return p.read_text(encoding="utf-8").splitlines()


def test_collect_writes_the_raw_layout(root):
    record = collect(root)
    raw = root / "raw"
    en, zh = lines(raw / "train.en"), lines(raw / "train.zh")
    assert len(en) == len(zh) == 12  # 3 News Commentary + 2 UN + 7 CWMT
    assert en[0] == "The market opened higher on Monday." and zh[0] == "周一市场高开。"
    assert ("The Committee adopted the report.", "委员会通过了报告。") in zip(en, zh)
    assert ("Winter came early this year.", "今年冬天来得早。") in zip(en, zh)
    assert record["counts"]["train"]["news-commentary-v13"] == {"pairs": 3, "malformed": 1}
    assert record["counts"]["valid"] == {"newsdev2017": 3} and record["counts"]["test"] == {"newstest2018": 2}
    assert lines(raw / "valid.en")[1] == 'Tickets cost "five" dollars & more.'
    # newsdev2017's reference lists the documents in another order: matched by document and segment id.
    assert list(zip(lines(raw / "valid.en"), lines(raw / "valid.zh")))[2] == ("Farmers expect a good harvest.", "农民期待好收成。")
    assert lines(raw / "test.zh") == ["学校有了一座新图书馆。", "城里下了一整天雨。"]
    stamp = (raw / "train.en").stat().st_mtime_ns
    assert collect(root) == record
    assert (raw / "train.en").stat().st_mtime_ns == stamp


def test_news_commentary_as_a_pair_of_plain_files(root):
    nc = root / "corpora" / "training-parallel-nc-v13"
    (nc / "news-commentary-v13.en-zh.tsv").unlink()
    (nc / "news-commentary-v13.zh-en.en").write_text("Trade grew.\n", encoding="utf-8")
    (nc / "news-commentary-v13.zh-en.zh").write_text("贸易增长了。\n", encoding="utf-8")
    record = collect(root)
    assert record["counts"]["train"]["news-commentary-v13"] == {"pairs": 1}


def test_every_missing_file_is_listed_with_its_origin(tmp_path):
    with pytest.raises(UserError) as e:
        collect(tmp_path / "wmt18")
    msg = str(e.value)
    for needed in ("news-commentary-v13", "UNv1.0.en-zh.en", "UNv1.0.en-zh.zh", *wmt18.CWMT_CORPORA,
                   "newsdev2017-enzh-src.en.sgm", "newsdev2017-enzh-ref.zh.sgm",
                   "newstest2018-enzh-src.en.sgm", "newstest2018-enzh-ref.zh.sgm"):
        assert needed in msg, needed
    assert "data.statmt.org/wmt18/translation-task/dev.tgz" in msg and str(tmp_path / "wmt18" / "corpora") in msg


def test_one_missing_file_is_named_alone(root):
    (root / "corpora" / "test" / "newstest2018-enzh-ref.zh.sgm").unlink()
    with pytest.raises(UserError) as e:
        collect(root)
    body = [l for l in str(e.value).splitlines() if l.startswith("  ") and not l.startswith("      ")]
    assert body == ["  newstest2018-enzh-ref.zh.sgm"]


def test_misaligned_corpus_and_unmatched_segments_are_clear_errors(root):
    (root / "corpora" / "en-zh" / "UNv1.0.en-zh.zh").write_text("只有一行。\n", encoding="utf-8")
    with pytest.raises(UserError, match="UNv1.0.en-zh.en has 2 lines but .*UNv1.0.en-zh.zh has 1: the two sides must be aligned"):
        collect(root)


def test_sgml_reader(root, tmp_path):
    segs = read_sgm(root / "corpora" / "dev" / "newsdev2017-enzh-src.en.sgm")
    assert segs[0] == ("fixture-a", "1", "The bridge will open next year.")
    bad = tmp_path / "ref.sgm"
    bad.write_text('<refset><doc docid="fixture-c"><seg id="9">错</seg></doc></refset>\n', encoding="utf-8")
    with pytest.raises(UserError, match="no reference for document 'fixture-c' segment 1"):
        read_sgm_pair(root / "corpora" / "test" / "newstest2018-enzh-src.en.sgm", bad)
    (tmp_path / "empty.sgm").write_text("plain text\n", encoding="utf-8")
    with pytest.raises(UserError, match="no <seg> elements"):
        read_sgm(tmp_path / "empty.sgm")


def test_download_fails_clearly_without_a_network(tmp_path, monkeypatch):
    # A port nothing listens on: the same failure as a machine without a network, without touching one.
    monkeypatch.setattr(wmt18, "DOWNLOADS", {"dev.tgz": "http://127.0.0.1:9/dev.tgz"})
    with pytest.raises(UserError, match="could not download http://127.0.0.1:9/dev.tgz .*by hand"):
        wmt18.download(tmp_path / "wmt18", timeout=5)
    assert not list((tmp_path / "wmt18" / "corpora").glob("*.part"))
