"""The WMT'18 EN-ZH recipe on tiny files in the real release formats (TSV, plain pairs, SGML)."""

from __future__ import annotations

import json
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
    record = collect(root, valid_set="newsdev2017")
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
    assert collect(root, valid_set="newsdev2017") == record
    assert (raw / "train.en").stat().st_mtime_ns == stamp


def test_news_commentary_as_a_pair_of_plain_files(root):
    nc = root / "corpora" / "training-parallel-nc-v13"
    (nc / "news-commentary-v13.en-zh.tsv").unlink()
    (nc / "news-commentary-v13.zh-en.en").write_text("Trade grew.\n", encoding="utf-8")
    (nc / "news-commentary-v13.zh-en.zh").write_text("贸易增长了。\n", encoding="utf-8")
    record = collect(root, valid_set="newsdev2017")
    assert record["counts"]["train"]["news-commentary-v13"] == {"pairs": 1}


def test_every_missing_file_is_listed_with_its_origin(tmp_path):
    with pytest.raises(UserError) as e:
        collect(tmp_path / "wmt18", fetch=False)
    msg = str(e.value)
    for needed in ("news-commentary-v13", "UNv1.0.en-zh.en", "UNv1.0.en-zh.zh", *wmt18.CWMT_CORPORA,
                   "newstest2017.en + newstest2017.zh", "newstest2017-enzh-src.en.sgm", "newstest2017-enzh-ref.zh.sgm",
                   "newstest2018.en + newstest2018.zh", "newstest2018-enzh-src.en.sgm", "newstest2018-enzh-ref.zh.sgm",
                   "data.devtest=FOLDER", "sacrebleu -t wmt17 -l en-zh", "sacrebleu -t wmt18 -l en-zh",
                   "data.fetch=false"):
        assert needed in msg, needed
    assert "data.statmt.org/wmt18/translation-task/dev.tgz" in msg and str(tmp_path / "wmt18" / "corpora") in msg


def test_one_missing_file_is_named_alone(root):
    (root / "corpora" / "test" / "newstest2018-enzh-ref.zh.sgm").unlink()
    with pytest.raises(UserError) as e:
        collect(root, valid_set="newsdev2017", fetch=False)
    body = [l for l in str(e.value).splitlines() if l.startswith("  ") and not l.startswith("      ")]
    assert body == ["  newstest2018-enzh-ref.zh.sgm"]


def test_misaligned_corpus_and_unmatched_segments_are_clear_errors(root):
    (root / "corpora" / "en-zh" / "UNv1.0.en-zh.zh").write_text("只有一行。\n", encoding="utf-8")
    with pytest.raises(UserError, match="UNv1.0.en-zh.en has 2 lines but .*UNv1.0.en-zh.zh has 1: the two sides must be aligned"):
        collect(root, valid_set="newsdev2017")


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


# ----------------------------------------------------------------------------- WMT'18's own dev and test sets, plain


def training_only(root: Path) -> Path:
    """The fixture's training corpora (News Commentary, UN, CWMT in their release formats), no dev or test set."""
    shutil.rmtree(root / "corpora" / "dev")
    shutil.rmtree(root / "corpora" / "test")
    return root


def sacrebleu_text(path: Path) -> list[str]:
    """A set's lines as `sacrebleu -t ... --echo` gives them: sacrebleu's own clean-up of the release's text."""
    from sacrebleu.dataset.base import Dataset

    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [Dataset._clean(line) for line in text[:-1].split("\n")]


def test_plain_newstest_sets_through_prepare_and_sacrebleus_bleu(root, shared_data):
    """newstest2017 (valid) and newstest2018 (test) as plain aligned text, prepared beside a small training
    corpus (cleaned, as for a model brought along: encoding does not care where a set came from); BLEU on
    newstest2018 is sacrebleu's with its zh tokenizer, its signature in the report."""
    from sacrebleu.metrics import BLEU

    from repair.data.prepare import read_clean_pairs
    from repair.report import bleu_markdown
    from repair.stages import prepare
    from repair.stats import bleu_significance

    devtest = shared_data / "wmt18-en-zh"
    data = prepare.run({"name": "wmt18", "dir": str(training_only(root)), "devtest": str(devtest), "fetch": False,
                        "prepare": {"workers": 1}}, encode=False)
    record = json.loads((root / "raw" / "collect.json").read_text(encoding="utf-8"))
    assert record["counts"]["valid"] == {"newstest2017": 2001} and record["counts"]["test"] == {"newstest2018": 3981}
    assert record["sets"]["test"] == {"name": "newstest2018", "format": "plain", "en": str(devtest / "newstest2018.en"),
                                      "zh": str(devtest / "newstest2018.zh")}
    assert sum(c["pairs"] for c in record["counts"]["train"].values()) == 12
    assert data.sentences == root / "raw" / "test.en" and lines(data.sentences) == lines(devtest / "newstest2018.en")
    prepared = json.loads((root / "prepare.json").read_text(encoding="utf-8"))["splits"]
    assert prepared["valid"]["kept"] == 2001 and prepared["test"]["kept"] == 3981 and prepared["test"]["changed"] == 1
    assert lines(root / "clean" / "valid.zh") == sacrebleu_text(devtest / "newstest2017.zh")

    en, refs = map(list, zip(*read_clean_pairs(root, "test")))
    published = sacrebleu_text(devtest / "newstest2018.zh")
    assert refs == published and en == sacrebleu_text(devtest / "newstest2018.en")
    hyp = [r[:-1] if i % 2 else r for i, r in enumerate(refs)]  # every other translation loses its last character
    bleu = bleu_significance(refs, refs, hyp, n_samples=100)
    expected = BLEU(tokenize="zh").corpus_score(hyp, [published]).score
    assert bleu["before"] == 100.0 and bleu["after"] == round(expected, 2) < 99 and bleu["significant"]
    assert bleu["sentences"] == 3981
    assert "tok:zh" in bleu["signature"] and "nrefs:1" in bleu["signature"] and "version:" in bleu["signature"]
    assert f"signature `{bleu['signature']}`" in "\n".join(bleu_markdown(bleu))


@pytest.fixture
def sacrebleu_cache(tmp_path, monkeypatch) -> Path:
    """sacrebleu's wmt17 and wmt18 sets kept in an empty cache of their own, downloaded from a port nothing listens
    on: what a machine without a network sees, without touching one."""
    from sacrebleu.dataset import DATASETS

    cache = tmp_path / "sacrebleu"
    for name in ("wmt17", "wmt18"):
        monkeypatch.setattr(DATASETS[name], "_outdir", str(cache / name))
        monkeypatch.setattr(DATASETS[name], "_rawdir", str(cache / name / "raw"))
        monkeypatch.setattr(DATASETS[name], "data", ["http://127.0.0.1:9/test.tgz"])
    return cache


def test_sets_found_nowhere_are_fetched_by_sacrebleu_else_named_with_the_key_to_set(root, sacrebleu_cache, shared_data):
    training_only(root)
    with pytest.raises(UserError) as e:
        collect(root)
    msg = str(e.value)
    for set_name, name in (("newstest2017", "wmt17"), ("newstest2018", "wmt18")):
        assert f"{set_name}.en + {set_name}.zh (plain aligned text) in a folder that data.devtest=FOLDER names" in msg
        assert f"sacrebleu -t {name} -l en-zh --echo src" in msg
    assert msg.count("sacrebleu could not fetch it here: URLError") == 2 and "Connection refused" in msg
    assert "UNv1.0" not in msg  # the training corpora are all there

    # Where sacrebleu's cache holds them (as its downloader leaves them), they are taken from it.
    devtest = shared_data / "wmt18-en-zh"
    for name, set_name in (("wmt17", "newstest2017"), ("wmt18", "newstest2018")):
        out = sacrebleu_cache / name  # the failed fetch above left its folders
        (out / f"{name}.en-zh.src").write_text("\n".join(sacrebleu_text(devtest / f"{set_name}.en")) + "\n", encoding="utf-8")
        (out / f"{name}.en-zh.ref").write_text("\n".join(sacrebleu_text(devtest / f"{set_name}.zh")) + "\n", encoding="utf-8")
        for field in ("docid", "genre", "origlang"):
            (out / f"{name}.en-zh.{field}").write_text("", encoding="utf-8")
    record = collect(root)
    assert record["sets"]["test"] == {"name": "newstest2018", "format": "sacrebleu",
                                      "en": str(root / "corpora" / "sacrebleu" / "newstest2018.en"),
                                      "zh": str(root / "corpora" / "sacrebleu" / "newstest2018.zh")}
    assert record["counts"]["valid"] == {"newstest2017": 2001} and record["counts"]["test"] == {"newstest2018": 3981}
    assert lines(root / "raw" / "test.zh") == sacrebleu_text(devtest / "newstest2018.zh")


def test_set_choices_and_the_devtest_folder_are_checked(root, tmp_path):
    with pytest.raises(UserError, match="data.valid_set='newstest2018': choose newstest2017 or newsdev2017"):
        collect(root, valid_set="newstest2018")
    with pytest.raises(UserError, match="data.valid_set='newstest2017': .*another set than data.test_set=newstest2017"):
        collect(root, test_set="newstest2017")
    with pytest.raises(UserError, match="data.test_set='newstest2019': choose newstest2018 or newstest2017"):
        collect(root, test_set="newstest2019")
    with pytest.raises(UserError, match=f"data.devtest={tmp_path / 'nowhere'}: no such folder"):
        collect(root, devtest=tmp_path / "nowhere")
    # test_set=newstest2017 with newsdev2017 to validate on, from the SGML releases
    (root / "corpora" / "test" / "newstest2018-enzh-src.en.sgm").rename(root / "corpora" / "test" / "newstest2017-enzh-src.en.sgm")
    (root / "corpora" / "test" / "newstest2018-enzh-ref.zh.sgm").rename(root / "corpora" / "test" / "newstest2017-enzh-ref.zh.sgm")
    record = collect(root, test_set="newstest2017", valid_set="newsdev2017", fetch=False)
    assert record["counts"]["test"] == {"newstest2017": 2} and record["sets"]["test"]["format"] == "sgml"


def test_download_fetches_the_sets_through_sacrebleu_or_says_where_to_put_them(tmp_path, sacrebleu_cache, monkeypatch):
    monkeypatch.setattr(wmt18, "DOWNLOADS", {})
    with pytest.raises(UserError, match=r"sacrebleu could not fetch newstest2017 \(URLError: .*Connection refused.*\); "
                                        r"put newstest2017.en and newstest2017.zh .* data.devtest=FOLDER"):
        wmt18.download(tmp_path / "wmt18", timeout=5)
