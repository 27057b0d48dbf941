"""Hugging Face transformers models through the project: translation as the model's own generate(), the target
language's forced token, the LoRA fine-tune and its scoped edit (adapter on inside the scope, off outside), and the
loop end to end on a tiny Marian model trained here on Tatoeba (tests/hf_model.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hf_model import VERSION, build_m2m100, build_marian, build_nllb, loop_inputs, short_pairs

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def hf(request) -> dict:
    """The tiny Marian folder and its Tatoeba corpus, and a tiny M2M100 folder, built once and kept in pytest's
    cache (rebuilt when tests/hf_model.py's VERSION changes)."""
    from conftest import SHARED_DATA, need_shared

    cmn = SHARED_DATA / "tatoeba-cmn-eng" / "cmn.txt"
    need_shared(cmn)
    root = Path(request.config.cache.mkdir(f"hf-models-{VERSION}"))
    if not (root / "model" / "config.json").is_file():
        build_marian(cmn, root)
    if not (root / "m2m" / "config.json").is_file():
        build_m2m100(root / "m2m", root / "corpus")
    if not (root / "nllb" / "config.json").is_file():
        build_nllb(root / "nllb", root / "m2m")
    return {"corpus": root / "corpus", "model": root / "model", "m2m": root / "m2m", "nllb": root / "nllb"}


def generate(translator, texts: list[str], **kw) -> list[str]:
    """Each text through the model's own generate(), alone, decoded by its tokenizer."""
    import torch

    tok, model, out = translator.tokenizer, translator.model, []
    with torch.inference_mode():
        for text in texts:
            ids = model.generate(**tok([text], return_tensors="pt"), **kw)[0].tolist()[1:]
            if kw.get("forced_bos_token_id") is not None:
                assert ids[0] == kw["forced_bos_token_id"]  # the target language's token comes first
                ids = ids[1:]
            out.append(tok.decode(ids, skip_special_tokens=True).strip())
    return out


@pytest.mark.slow
def test_translations_are_the_model_s_own_generate_on_200_sentences(hf):
    from repair.nmt.hf.translator import TransformersTranslator

    sources = [s for s, _ in short_pairs(hf["corpus"], "test")][:200]
    assert len(sources) == 200
    t = TransformersTranslator(hf["model"], beam=4, max_len=30, max_tokens=600, device="cpu", threads=2)
    assert t.translate(sources) == generate(t, sources, num_beams=4, max_new_tokens=30)


def test_translations_are_the_model_s_own_generate(hf):
    from repair.nmt.hf.translator import TransformersTranslator

    sources = [s for s, _ in short_pairs(hf["corpus"], "valid")][:30]
    t = TransformersTranslator(hf["model"], beam=3, max_len=20, max_tokens=300, device="cpu", threads=2)
    assert t.translate(sources) == generate(t, sources, num_beams=3, max_new_tokens=20)
    assert t.translate(["", "  "]) == ["", ""]


def test_an_nllb_style_model_gets_its_target_language_token_first(hf):
    from repair.nmt.hf.translator import TransformersTranslator

    sources = ["I have a cat.", "Where is the station?", "Tom is reading a book.", "Hello."]
    t = TransformersTranslator(hf["m2m"], beam=3, max_len=8, device="cpu")
    assert t.forced_bos == t.tokenizer.get_lang_id("zh")  # M2M100's default: Chinese
    ours = t.translate(sources)
    assert ours == generate(t, sources, num_beams=3, max_new_tokens=8, forced_bos_token_id=t.forced_bos)
    english = TransformersTranslator(hf["m2m"], beam=3, max_len=8, device="cpu", tgt_lang="en")
    assert english.forced_bos == t.tokenizer.get_lang_id("en") and english.translate(sources) != ours


def test_an_nllb_folder_translates_from_eng_latn_into_zho_hans_by_default(hf, tmp_path):
    from repair.nmt.hf.translator import TransformersTranslator
    from repair.purity.translators import make_translator

    sources = ["I have a cat.", "Where is the station?", "Tom is reading a book.", "Hello."]
    t = TransformersTranslator(hf["nllb"], beam=3, max_len=8, device="cpu")
    tok = t.tokenizer
    assert type(tok).__name__ == "NllbTokenizer" and t.forced_bos == tok.convert_tokens_to_ids("zho_Hans")
    assert t.encode(sources[:1])[0][0] == tok.convert_tokens_to_ids("eng_Latn")  # the source language's token first
    ours = t.translate(sources)
    assert ours == generate(t, sources, num_beams=3, max_new_tokens=8, forced_bos_token_id=t.forced_bos)
    assert len(set(ours)) > 1  # the input matters (a large init_std)
    ct2 = make_translator({"name": "ctranslate2", "checkpoint": str(hf["nllb"]), "beam": 3, "max_len": 8,
                           "device": "cpu", "compute_type": "float32", "cache_dir": str(tmp_path)})
    assert ct2._prefix == ["zho_Hans"] and ct2.translate(sources) == ours  # the language token as target prefix


def test_a_name_that_is_not_a_folder_stops_with_one_message(tmp_path):
    from repair.errors import UserError
    from repair.purity.translators import make_translator

    with pytest.raises(UserError, match="names on the Hugging Face hub are not fetched"):
        make_translator({"name": "transformers", "checkpoint": "Helsinki-NLP/opus-mt-en-zh"})
    with pytest.raises(UserError, match="neither a transformers model folder"):
        make_translator({"name": "transformers", "checkpoint": str(tmp_path)})


def test_translator_fairseq_given_a_transformers_folder_serves_it_with_transformers(hf):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from repair.purity.translators import make_translator

    with initialize_config_dir(str(REPO / "conf"), version_base=None):
        cfg = OmegaConf.to_container(compose("loop", overrides=["translator.beam=2"]).translator, resolve=True)
        ct2 = OmegaConf.to_container(compose("loop", overrides=["translator=ctranslate2"]).translator, resolve=True)
    t = make_translator(cfg, checkpoint=str(hf["model"]), runtime="transformers")
    assert t.name == "transformers" and t.beam == 2
    auto = make_translator(cfg, checkpoint=str(hf["model"]))  # the family's default runtime: auto
    assert type(auto).__name__ == "TransformersCT2Translator" and auto.runtime == "auto" and auto.beam == 2
    assert type(make_translator(ct2, checkpoint=str(hf["model"]), device="cpu")).__name__ == "TransformersCT2Translator"


def finetuned(hf, tmp_path: Path, adapter: str = "lora") -> tuple[dict, list[tuple[str, str]]]:
    from repair.nmt.hf.finetune import finetune_model
    from repair.nmt.hf.folder import model_files, resolve

    corrections = short_pairs(hf["corpus"], "valid")[:8]
    valid = short_pairs(hf["corpus"], "valid")[50:90]
    result = finetune_model(model_files(resolve(hf["model"])), corrections * 20, valid, tmp_path / "ft", lr=3e-3,
                            patience=2, max_epoch=3, probe_pairs=corrections, adapter=adapter, threads=2)
    return result, corrections


def test_a_lora_fine_tune_is_a_small_adapter_and_its_scoped_edit_is_the_base_model_outside(hf, tmp_path):
    from repair.edit.scoped import SCOPE_FILE, ScopedTranslator, extended, served
    from repair.purity.translators import make_translator

    result, corrections = finetuned(hf, tmp_path)
    best = Path(result["best_checkpoint"])
    assert (best / "adapter_config.json").is_file() and json.loads((best / "base.json").read_text())["base"]
    size = lambda p: sum(f.stat().st_size for f in Path(p).rglob("*") if f.is_file())  # noqa: E731
    assert size(best) < 0.05 * size(hf["model"])
    assert result["probe_loss_after"] < result["probe_loss_before"]
    sources = [s for s, _ in corrections]
    scope = extended(None, "source", 1.0, str(hf["model"].resolve()), sources[:4])
    (best.parent / SCOPE_FILE).write_text(json.dumps(scope.as_json()), encoding="utf-8")
    cfg = {"name": "transformers", "checkpoint": str(tmp_path / "ft"), "beam": 3, "max_len": 30, "device": "cpu",
           "runtime": "transformers"}
    edit = served(cfg, make_translator(cfg))
    assert isinstance(edit, ScopedTranslator) and edit.fallback.owner is edit.edited  # one model in memory
    base = make_translator({**cfg, "checkpoint": str(hf["model"])})
    outside = [s for s, _ in short_pairs(hf["corpus"], "test")][:60]
    assert edit.translate(outside + sources[4:]) == base.translate(outside + sources[4:])  # byte for byte
    assert edit.split(sources[:4]) == [True] * 4 and not any(edit.split(outside + sources[4:]))
    assert edit.translate(sources[:4]) == edit.edited.translate(sources[:4])
    assert edit.edited.translate(outside) != base.translate(outside)  # the adapter does change translations
    merged = make_translator({**cfg, "name": "ctranslate2", "runtime": None, "checkpoint": str(best),
                              "compute_type": "float32",
                              "cache_dir": str(tmp_path / "ct2")})  # CTranslate2: the adapter merged into its model
    assert json.loads((merged.model_path / "converted.json").read_text())["from"]["adapter"]
    # CTranslate2's beam search is generate()'s with early_stopping=True and no end token forced at the cap (the
    # translator's generate() goes on past `beam` ended hypotheses): the merged model gives those translations
    same_search = generate(edit.edited, outside, num_beams=3, max_new_tokens=30, early_stopping=True,
                           forced_eos_token_id=None)
    assert merged.translate(outside) == same_search


def test_finetune_adapter_none_trains_every_weight_into_a_model_folder(hf, tmp_path):
    from repair.nmt.hf.finetune import NO_CHECK
    from repair.nmt.hf.translator import TransformersTranslator

    result, corrections = finetuned(hf, tmp_path, adapter="none")
    best = Path(result["best_checkpoint"])
    assert (best / "config.json").is_file() and not (best / "adapter_config.json").exists()
    assert result["encoding"] == {"checked": False, "why": NO_CHECK}  # said, in the report too
    t = TransformersTranslator(best, device="cpu", max_len=30)
    assert t.folder.adapter is None and result["trained_parameters"] > 10 * 36864


def test_fairseq_only_fine_tune_options_are_refused_for_a_transformers_model(hf, tmp_path):
    """finetune.l2 and finetune.trainable (finetune=anchored, finetune=decoder) have no meaning for a transformers
    model's fine-tune: one message naming both, before anything is written."""
    from repair.errors import UserError
    from repair.nmt.hf.finetune import finetune_model
    from repair.nmt.hf.folder import model_files, resolve

    pairs = short_pairs(hf["corpus"], "valid")[:8]
    with pytest.raises(UserError, match=r"finetune.l2=0.1, finetune.trainable=\['decoder.layers'\]: fairseq models "
                                        r"only.*Set finetune.l2=0 and finetune.trainable=\[\]"):
        finetune_model(model_files(resolve(hf["model"])), pairs, pairs, tmp_path / "ft", l2=0.1,
                       trainable=["decoder.layers"])
    with pytest.raises(UserError, match=r"^finetune.trainable=\['encoder'\]: fairseq models only"):
        finetune_model(model_files(resolve(hf["model"])), pairs, pairs, tmp_path / "ft", trainable=("encoder",))
    assert not (tmp_path / "ft").exists()


@pytest.mark.slow
def test_the_loop_on_a_marian_folder_with_the_oracle_on_sentence_references(hf, tmp_path):
    sentences, corpus = loop_inputs(hf["corpus"], tmp_path, 70, (3000, 60, 100))
    run_dir = tmp_path / "run"
    args = [f"model.checkpoint={hf['model']}", "data=parallel", f"data.dir={corpus}", f"run_dir={run_dir}",
            f"purity.input={sentences}", "purity.holdout=15", "model.threads=2", "translator.max_len=40",
            "finetune.max_epoch=8", "finetune.replay=100", "finetune.keep=50", "finetune.lr=1e-2"]
    done = subprocess.run([sys.executable, "-m", "repair.loop", *args], cwd=REPO, capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)}, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((run_dir / "report.json").read_text())
    assert report["corrections"] > 0 and report["fix_rate"] is not None
    # named as brought, not as the config group whose training options it was not made with
    assert report["model"] == {"name": Path(hf["model"]).name, "checkpoint": str(hf["model"]), "trained_here": False,
                               "base_checkpoint": report["model"]["base_checkpoint"]}
    assert f"Model `{Path(hf['model']).name}` (brought along: `{hf['model']}`)" in (run_dir / "report.md").read_text()
    assert report["bleu"]["before"] is not None and report["bleu"]["after"] is not None
    assert report["heldout"] is not None and {"efficacy", "generality", "locality"} <= set(report["repair"])
    locality = report["repair"]["locality"]  # unrelated texts, split where the edit taught words
    outside = locality.get("outside", locality)  # outside the scope: the adapter was off for them
    assert outside["texts"] > 50 and outside["changed"] == 0
    best = Path(json.loads((run_dir / "cycle1" / "finetune" / "result.json").read_text())["best_checkpoint"])
    assert (best / "adapter_config.json").is_file() and (best.parent / "scope.json").is_file()


def test_ctranslate2_on_a_transformers_folder_converts_it_once_and_checks_its_fidelity(hf, tmp_path):
    from repair.nmt.fairseq.ct2 import MARKER
    from repair.purity.translators import make_translator

    sources = [s for s, _ in short_pairs(hf["corpus"], "test")][:60]
    cfg = {"name": "ctranslate2", "checkpoint": str(hf["model"]), "cache_dir": str(tmp_path), "max_len": 30,
           "device": "cpu", "threads": 2}
    t = make_translator(cfg)
    out = t.translate(sources)
    assert type(t).__name__ == "TransformersCT2Translator" and t.fidelity["checked"]
    assert set(t.fidelity["candidates"]) >= {"int8", "float32"} and t.fidelity["against"] == "transformers"
    marker = json.loads((t.model_path / MARKER).read_text())
    assert marker["from"]["model"] and marker["from"]["adapter"] is None
    again = make_translator(cfg)  # the cache and its fidelity record are used: no conversion, no measuring
    assert again.compute_type == t.compute_type and again.translate(sources) == out
    plain = {k: v for k, v in cfg.items() if k != "cache_dir"} | {"name": "transformers", "runtime": "transformers"}
    base = make_translator(plain).translate(sources)
    float32 = make_translator({**cfg, "compute_type": "float32"})
    # the same search as generate() with early_stopping=True and no end token forced at the cap: the same
    # translations; the translator's generate() (early_stopping=False, the end token forced) goes on past `beam`
    # ended hypotheses, and the tiny model's repetitions end otherwise there (11 of these 60 texts)
    transformers = make_translator(plain)
    same_search = generate(transformers, sources, num_beams=float32.beam, max_new_tokens=30, early_stopping=True,
                           forced_eos_token_id=None)
    assert float32.translate(sources) == same_search
    assert t.fidelity["candidates"]["float32"]["identical"] == round(sum(
        a == b for a, b in zip(same_search, base)) / len(sources), 4) < 1  # what the fidelity check measures


def test_constrained_search_on_the_decoder_step_writes_the_phrases_and_scores_by_teacher_forcing(hf):
    from repair.nmt.hf.translator import TransformersTranslator

    pairs = short_pairs(hf["corpus"], "test")[:6]
    t = TransformersTranslator(hf["model"], max_len=30, device="cpu", threads=2)
    search, _ = t.searcher(4)
    assert t.why_no_search() is None
    phrases = [[z[:2]] for _, z in pairs]  # each reference's first two characters
    found = search.translate_constrained([s for s, _ in pairs], phrases, beam=4, nbest=2)
    for hyps, (p,) in zip(found, phrases):
        assert 1 <= len(hyps) <= 2 and hyps[0].met and p in hyps[0].text.replace(" ", "")
    two = search.translate_constrained([pairs[0][0]], [[pairs[1][1][:2], pairs[2][1][:2]]], beam=4, ordered=True)[0][0]
    assert two.met and two.text.index(pairs[1][1][:2]) < two.text.index(pairs[2][1][:2])
    unspellable = search.translate_constrained([pairs[0][0]], [["\u9fa5\u9fa4"]], beam=4)[0][0]
    assert not unspellable.met  # characters missing from the vocabulary: reported unmet, never dropped in silence
    scores = search.score([s for s, _ in pairs] + [""], [z for _, z in pairs] + ["x"])
    assert all(-20 < x < 0 for x in scores[:-1]) and scores[-1] == float("-inf")
    assert search.phrase_tokens(pairs[0][1], start=True) == len(search.tgt_codec.encode_all([pairs[0][1]])[0].split())


@pytest.mark.slow
@pytest.mark.parametrize("folder", ["model", "nllb"])
def test_ctranslate2_on_a_transformers_folder_searches_itself_and_scores_as_transformers_does(hf, folder, tmp_path,
                                                                                              monkeypatch):
    """Suggestions on a CTranslate2 conversion: its own prefix searches and teacher-forced scores, the transformers
    model loaded only for phrases in any order; scores as the transformers search gives them (the language token of a
    model that has one counted as it counts it)."""
    from repair.nmt.hf import translator as hf_translator
    from repair.nmt.hf.translator import TransformersTranslator
    from repair.purity.translators import make_translator

    pairs = short_pairs(hf["corpus"], "test")[:6]
    sources = [s for s, _ in pairs]
    t = make_translator({"name": "ctranslate2", "checkpoint": str(hf[folder]), "cache_dir": str(tmp_path),
                         "max_len": 30, "device": "cpu", "threads": 2, "compute_type": "float32"})
    own = t.translate(sources)
    reference = TransformersTranslator(hf[folder], max_len=30, device="cpu", threads=2).searcher(4)[0]
    built = []
    original = hf_translator.TransformersTranslator.__init__
    monkeypatch.setattr(hf_translator.TransformersTranslator, "__init__",
                        lambda self, *a, **k: (built.append(1), original(self, *a, **k))[1])
    search, note = t.searcher(4)
    assert "ctranslate2 with the phrases in a forced beginning" in note
    targets = own + [z for _, z in pairs]
    got, want = search.score(sources * 2, targets), reference.score(sources * 2, targets)
    assert max(abs(a - b) for a, b in zip(got, want)) < 1e-3
    phrases = [[x[:2], x[-1:]] for x in own if len(x) >= 3]
    found = search.translate_constrained(sources[:len(phrases)], phrases, beam=4, nbest=3, starts=[True] * len(phrases))
    for hyps, ps in zip(found, phrases):
        begun = t.text_of(search.prefix_tokens(ps))
        assert hyps and all(h.text.startswith(begun) for h in hyps) and any(h.met for h in hyps)
    nbest = search.translate_constrained(sources, [[] for _ in sources], beam=t.beam, nbest=t.beam)
    # CTranslate2's beam search, the translation among its list (ranked by the scores: a text cut at the cap loses
    # its place there, the end token it never wrote being scored)
    assert all(x in [h.text for h in hyps] for x, hyps in zip(own, nbest))
    assert built == [] and search.searched == {"ctranslate2": len(phrases) + len(sources), "fallback": 0}
    single = search.translate_constrained(sources[:1], [[own[0][:1]]], beam=4, ordered=False)
    assert built == [] and single[0] and single[0][0].met  # one phrase: in order whatever the order asked
    unordered = search.translate_constrained(sources[:1], [[own[0][:1], own[0][-1:]]], beam=4, ordered=False)
    assert len(built) == 1 and unordered[0]


def test_a_run_folder_from_before_the_adapter_keys_resumes(tmp_path):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from repair.errors import UserError
    from repair.loop import check_run_config

    with initialize_config_dir(str(REPO / "conf"), version_base=None):
        cfg = compose("loop")
    saved = OmegaConf.to_container(cfg, resolve=True)
    for key in ("adapter", "lora_rank", "lora_alpha", "lora_targets"):
        del saved["finetune"][key]
    (tmp_path / "config.json").write_text(json.dumps(saved), encoding="utf-8")
    assert check_run_config(tmp_path, cfg) == []
    saved["finetune"]["lr"] = 1.0
    (tmp_path / "config.json").write_text(json.dumps(saved), encoding="utf-8")
    with pytest.raises(UserError, match="finetune.lr"):
        check_run_config(tmp_path, cfg)


@pytest.mark.slow
def test_the_translate_benchmark_on_a_marian_folder_prints_its_figures(hf, tmp_path):
    texts = tmp_path / "texts.en"
    texts.write_text("".join(s + "\n" for s, _ in short_pairs(hf["corpus"], "test")[:24]), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "repair.bench", "translate", "--checkpoint", str(hf["model"]),
                           "--texts", str(texts), "--max-len", "20", "--rounds", "1", "--ft-pairs", "40",
                           "--ft-epochs", "1"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    backends = figures["translation"]["backends"]
    for f in backends.values():  # texts per second, as said (both figures rounded)
        assert f["per_s"] * f["seconds"] == pytest.approx(24, abs=0.01 * f["seconds"] + 0.01 * f["per_s"])
    # float32's share identical to the transformers translator's: what it is here (the same search as generate()
    # with early_stopping=True and no end token forced at the cap; see the fidelity test)
    from repair.nmt.hf.translator import TransformersTranslator

    sources = [s for s, _ in short_pairs(hf["corpus"], "test")[:24]]
    translator = TransformersTranslator(hf["model"], beam=5, max_len=20, device="cpu", threads=2)
    same_search = generate(translator, sources, num_beams=5, max_new_tokens=20, early_stopping=True,
                           forced_eos_token_id=None)
    own = translator.translate(sources)
    assert backends["ctranslate2:float32"]["identical"] == round(sum(a == b for a, b in zip(same_search, own)) / 24, 4)
    lora, full = figures["finetune"]["lora"], figures["finetune"]["none"]
    assert lora["trained_parameters"] < full["trained_parameters"] and lora["written_mb"] < 0.05 * full["written_mb"]
    assert lora["rss_growth_mb"] > 0 and full["rss_growth_mb"] > 0  # the memory watch saw each fine-tune's


def test_an_adapter_of_a_loaded_base_model_shares_its_weights(hf, tmp_path):
    """The loop's translators: a LoRA fine-tune of the base model already loaded is added to that model (its
    weights in memory once); each translates as if loaded alone, the base with every adapter off."""
    from repair.nmt.hf.translator import TransformersTranslator
    from repair.stages import Translators

    result, corrections = finetuned(hf, tmp_path)
    best = Path(result["best_checkpoint"])
    cfg = {"name": "transformers", "beam": 3, "max_len": 30, "device": "cpu", "runtime": "transformers"}
    outside = [s for s, _ in short_pairs(hf["corpus"], "test")][:40] + [s for s, _ in corrections]
    alone_base = TransformersTranslator(hf["model"], beam=3, max_len=30, device="cpu").translate(outside)
    alone_adapter = TransformersTranslator(best, beam=3, max_len=30, device="cpu").translate(outside)
    assert alone_adapter != alone_base
    translators = Translators(cfg)
    base_files = translators.load(hf["model"], None)
    base = translators(base_files)
    adapted = translators(base_files.with_checkpoint(str(best)))
    assert adapted.model.get_base_model() is base.model  # one copy of the base weights
    assert adapted.translate(outside) == alone_adapter
    assert base.translate(outside) == alone_base  # the base with the adapter off, after the adapter ran
    again = base.with_adapter(best)  # a second adapter (the same weights under another name) beside the first
    assert again.translate(outside) == alone_adapter and adapted.translate(outside) == alone_adapter
    assert base.translate(outside) == alone_base
    assert base.with_adapter(hf["model"]) is None and adapted.with_adapter(best) is None  # no adapter / not a base


def test_the_model_check_reads_a_transformers_folder_with_its_own_tokenizer(hf):
    """The check before testing serves a transformers folder too: its tokenizer's unknown tokens and its
    translations; a healthy folder passes, text its tokenizer cannot spell is far off."""
    from repair.nmt.hf.translator import TransformersTranslator
    from repair.purity.model_check import run_model_check

    t = TransformersTranslator(hf["model"], beam=2, device="cpu")
    sentences = (hf["corpus"] / "test.en").read_text(encoding="utf-8").splitlines()[:60]
    healthy = run_model_check(t, sentences, "stop")
    assert healthy["checked"] and not healthy["problems"] and healthy["src"]["unknown"] < 0.05, healthy
    assert healthy["translations"]["translations"] == 60
    unreadable = t.check_model(["Ωραίο σπίτι ζωγραφισμένο ξανά από τον ίδιο τον ιδιοκτήτη του σήμερα."] * 5)
    assert unreadable["stop"] and unreadable["src"]["unknown"] > 0.25 and "unknown to its tokenizer" in \
        unreadable["message"]


def marian_reach(hf, tmp_path: Path, **changed) -> tuple[dict, dict]:
    """The fine-tune stage on 8 corrections of the Marian model's (sentences of its validation split it translates
    otherwise, corrected by their reference; none holding a character its tokenizer cannot write), 100 pairs of
    replay, patience 3."""
    from reach import data_folder, reach
    from repair.nmt.hf.finetune import unspellable
    from repair.nmt.hf.folder import load_tokenizer, resolve

    tok, _ = load_tokenizer(resolve(hf["model"]))
    pairs = short_pairs(hf["corpus"], "valid")[100:200]
    cannot = set(unspellable(tok, pairs))
    candidates = [(s, z) for s, z in pairs if z not in cannot and len(s.split()) >= 5]
    data = data_folder(hf["corpus"], tmp_path / "data", 100, 40)
    cfg = {"name": "transformers", "beam": 3, "max_len": 30, "device": "cpu"}
    return reach(cfg, hf["model"], data, candidates, 8, tmp_path / "ft", replay=100, keep=0, patience=3, **changed)


@pytest.mark.parametrize("adapter", ["lora", "none"])
def test_a_fine_tune_of_a_marian_folder_reaches_its_fixes_and_says_why_it_stopped(hf, tmp_path, adapter):
    """The validation loss rises from the first epochs while the corrections are learnt: the fine-tune goes on while
    epochs fix more of them, to the fix rate (a LoRA adapter at finetune.lora_lr), and says why it stopped."""
    result, fixes = marian_reach(hf, tmp_path, adapter=adapter)
    assert fixes["fix_rate"] >= 0.9, (fixes["fixed"], result["stop"], result["selected"]["epochs"])
    stop = result["stop"]
    assert stop["reason"] in ("fix_rate", "patience", "max_epoch") and stop["why"]
    if stop["reason"] == "fix_rate":
        assert stop["why"].startswith(f"fix rate reached: epoch {stop['epoch']} fixes at least 95% of the 8")
    assert result["adapter"] == adapter
