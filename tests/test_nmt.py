"""fairseq in-process: train a tiny model on fixture data, translate, reload, resume, fine-tune, refuse bad input."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import sys
from pathlib import Path

import pytest
import torch

from repair.data.prepare import prepare_data
from repair.errors import UserError
from repair.nmt.fairseq.checkpoint import load_checkpoint
from repair.nmt.fairseq.finetune import finetune_model
from repair.nmt.fairseq.train import patience_state, read_curve, train_model
from repair.nmt.fairseq.translator import FairseqTranslator

FIXTURES = Path(__file__).parent / "fixtures" / "nmt"
_spec = importlib.util.spec_from_file_location("nmt_corpus", FIXTURES / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)

TINY = {
    "name": "test_tiny", "arch": "transformer",
    "encoder_layers": 1, "decoder_layers": 1, "encoder_embed_dim": 64, "decoder_embed_dim": 64,
    "encoder_ffn_embed_dim": 128, "decoder_ffn_embed_dim": 128,
    "encoder_attention_heads": 4, "decoder_attention_heads": 4,
    "share_decoder_input_output_embed": True, "dropout": 0.1,
    "optimizer": "adam", "adam_betas": [0.9, 0.98], "lr": 5e-3, "lr_scheduler": "inverse_sqrt", "warmup_updates": 40,
    "criterion": "label_smoothed_cross_entropy", "label_smoothing": 0.1, "max_tokens": 1000,
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    d = corpus.write_corpus(tmp_path_factory.mktemp("nmt") / "data")
    prepare_data(d, vocab_size=200)
    return d


@pytest.fixture(scope="module")
def trained(data_dir, tmp_path_factory) -> Path:
    # One thread: on a shared 2-core machine a second thread mostly waits (10x slower under load).
    torch.set_num_threads(1)
    return train_model(data_dir, tmp_path_factory.mktemp("ckpt") / "test_tiny", TINY, max_epoch=20)


def model_files(checkpoint, data_dir):
    from repair.nmt.fairseq.translator import load_model_files

    return load_model_files(checkpoint, data_dir)


def valid_pairs(data_dir):
    from repair.data.prepare import read_clean_pairs

    return read_clean_pairs(data_dir, "valid")


@pytest.fixture(scope="module")
def translator(trained, data_dir) -> FairseqTranslator:
    return FairseqTranslator(trained, data_dir, beam=4, max_tokens=300)


def test_training_learns_and_logs_a_curve(trained):
    curve = read_curve(trained.parent)
    assert [r["epoch"] for r in curve] == list(range(1, 21))
    assert curve[-1]["valid_loss"] < curve[0]["valid_loss"] - 3
    assert (trained.parent / "checkpoint_last.pt").is_file()


def test_translates_held_out_sentences(translator):
    test = corpus.pairs(30, seed=7)
    out = translator.translate([en for en, _ in test])
    assert len(out) == len(test)
    assert all(o.endswith("。") and " " not in o for o in out)
    exact = sum(o == zh for o, (_, zh) in zip(out, test))
    assert exact >= 8, list(zip(out, test))


def test_reloaded_from_disk_gives_the_same_translations(trained, data_dir, translator):
    texts = [en for en, _ in corpus.pairs(12, seed=8)]
    again = FairseqTranslator(trained, src_sentencepiece_model=data_dir / "spm/en.model",
                              tgt_sentencepiece_model=data_dir / "spm/zh.model",
                              src_dict=data_dir / "bin/dict.en.txt", tgt_dict=data_dir / "bin/dict.zh.txt",
                              beam=4, max_tokens=300)
    assert again.translate(texts) == translator.translate(texts)


def test_translation_does_not_depend_on_the_batch(translator):
    texts = [en for en, _ in corpus.pairs(40, seed=9)] + ["The cat sees the dog .", "The big red clever old happy tall cat sees the dog ."]
    batched = translator.translate(texts)
    alone = [translator.translate([t])[0] for t in texts]
    shuffled_order = list(reversed(range(len(texts))))
    shuffled = translator.translate([texts[i] for i in shuffled_order])
    assert batched == alone
    assert [shuffled[shuffled_order.index(i)] for i in range(len(texts))] == batched
    assert len(translator._batches([len(ids) for ids in translator.encode_all(texts)])) > 1


def test_batches_decoded_side_by_side_give_the_same_translations(trained, data_dir, translator):
    texts = [en for en, _ in corpus.pairs(60, seed=10)] + ["The big red clever old happy tall cat sees the dog ."]
    assert translator.workers == 1
    two = FairseqTranslator(trained, data_dir, beam=4, max_tokens=300, threads=2, workers=2)
    assert (two.workers, two.threads) == (2, 1)
    assert len(two._batches([len(ids) for ids in two.encode_all(texts)])) > 2
    assert two.translate(texts) == translator.translate(texts)
    assert two.translate(texts[:1]) == translator.translate(texts[:1])
    with pytest.raises(UserError, match="workers"):
        FairseqTranslator(trained, data_dir, workers=0)


def test_empty_long_and_unknown_input_never_crash(translator, caplog):
    long = "the cat sees the dog " * 400
    with caplog.at_level(logging.WARNING, logger="repair.nmt.fairseq.translator"):
        out = translator.translate(["", "   ", "The 😀 cat ☃ sees Ω .", long, "\ufeffThe\x07 dog sees the cat ."])
    assert out[0] == "" and out[1] == ""
    assert all(isinstance(o, str) and o for o in out[2:])
    assert "truncated" in caplog.text
    assert translator.translate([]) == []


def test_translator_from_config(trained, data_dir):
    from repair.purity.translators import make_translator

    t = make_translator({"name": "fairseq", "checkpoint": str(trained), "data_dir": str(data_dir), "beam": 2})
    assert t.generator.beam_size == 2 and t.translate(["The cat sees the dog ."])[0]
    with pytest.raises(UserError, match="no option 'bean'.*bpe_codes"):
        make_translator({"name": "fairseq", "checkpoint": str(trained), "data_dir": str(data_dir), "bean": 2})
    with pytest.raises(UserError, match="translator.checkpoint"):
        make_translator({"name": "fairseq", "checkpoint": None})


def test_interrupted_training_resumes_where_it_stopped(data_dir, tmp_path, caplog):
    save = tmp_path / "resume"
    cfg = {**TINY, "save_interval_updates": 4}
    train_model(data_dir, save, cfg, max_epoch=1, max_update=8)  # stops in the middle of epoch 1, as a kill would
    first = load_checkpoint(save / "checkpoint_last.pt")
    assert first["optimizer_history"][-1]["num_updates"] == 8
    assert first["extra_state"]["train_iterator"]["iterations_in_epoch"] == 8
    with caplog.at_level(logging.INFO):
        train_model(data_dir, save, cfg, max_epoch=1)
    assert "checkpoint_last.pt (epoch 1 @ 8 updates)" in caplog.text
    # fairseq's progress stays in the log, its dumps of the whole config and model do not.
    assert "num. shared model params" in caplog.text
    assert "TransformerModel(" not in caplog.text and "'no_progress_bar'" not in caplog.text
    last = load_checkpoint(save / "checkpoint_last.pt")
    per_epoch = load_checkpoint(save / "checkpoint_best.pt")["optimizer_history"][-1]["num_updates"]
    assert last["optimizer_history"][-1]["num_updates"] == per_epoch > 8
    assert [r["epoch"] for r in read_curve(save) if "train_loss" in r] == [1]


def test_why_a_training_stopped_is_what_fairseq_said(data_dir, tmp_path, monkeypatch):
    """Read from real fairseq runs: its stop messages (updates, time limit), the last epoch, and `unknown` where
    fairseq ended without a message we know (as a fairseq that words them otherwise would)."""
    from repair.nmt.fairseq import train
    from repair.nmt.fairseq.config import training_config

    def stopped(name: str, **options) -> dict:
        args = train.train_args(data_dir / "bin", tmp_path / name, {**{k: v for k, v in TINY.items() if k != "name"},
                                                                     **options}, seed=1, cuda=False, fp16=False)
        stop: dict = {}
        train.run_training(training_config(args), stop=stop)
        return stop

    updates = stopped("updates", max_epoch=3, max_update=6)
    assert updates["reason"] == "max_update" and updates["message"].startswith("Stopping training due to num_updates")
    timed = stopped("time", max_epoch=3, stop_time_hours=1e-7)
    assert timed["reason"] == "stop_time_hours" and "cumulative_training_time" in timed["message"]
    epochs = stopped("epochs", max_epoch=1)
    assert epochs == {"reason": "max_epoch", "epoch": 1}
    assert stopped("epochs", max_epoch=1) == {"reason": "max_epoch", "epoch": None}  # resumed where it had ended
    monkeypatch.setattr(train, "STOP_MESSAGES", ())
    unheard = stopped("unheard", max_epoch=3, max_update=6)
    assert unheard == {"reason": "unknown", "epoch": 1}


def test_a_checkpoint_half_written_by_a_kill_is_set_aside_and_training_resumes(data_dir, tmp_path, caplog):
    save = tmp_path / "halfway"
    cfg = {**TINY, "save_interval_updates": 4}
    train_model(data_dir, save, cfg, max_epoch=1, max_update=8)
    last = save / "checkpoint_last.pt"
    whole = last.read_bytes()
    last.write_bytes(whole[: len(whole) // 2])  # killed while fairseq copied it
    with caplog.at_level(logging.INFO):
        train_model(data_dir, save, cfg, max_epoch=1)
    assert "checkpoint_last.pt was half-written" in caplog.text
    assert "checkpoint_last.pt (epoch 1 @ 8 updates)" in caplog.text  # resumed from the copy's source
    assert (save / "checkpoint_last.pt.partial").read_bytes() == whole[: len(whole) // 2]  # kept, not deleted
    assert load_checkpoint(last)["optimizer_history"][-1]["num_updates"] > 8


def test_training_works_inside_a_running_hydra_app(data_dir, tmp_path, monkeypatch):
    import hydra
    from hydra.core.hydra_config import HydraConfig

    seen = {}
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "app.yaml").write_text("epochs: 1\n")

    @hydra.main(version_base=None, config_path=str(tmp_path / "conf"), config_name="app")
    def app(cfg):
        seen["before"] = HydraConfig.get().job.name
        seen["best"] = train_model(data_dir, tmp_path / "in_hydra", TINY, max_epoch=cfg.epochs)
        seen["after"] = HydraConfig.get().job.name  # Hydra's own state survives fairseq's config composition

    monkeypatch.setattr(sys, "argv", ["app", f"hydra.run.dir={tmp_path / 'run'}", "hydra.job.chdir=false", "hydra.output_subdir=null"])
    app()
    assert seen["best"].is_file()
    assert seen["before"] == seen["after"]


def test_finetune_keeps_the_base_and_records_the_curve(trained, data_dir, tmp_path, caplog):
    base_sha = hashlib.sha1(trained.read_bytes()).hexdigest()
    corrections = [("The teacher likes the clever dog .", "老师喜欢聪明的狗。"), ("The old child calls the student .", "老孩子叫学生。")]
    pairs = corrections * 10 + corpus.pairs(150, seed=0)
    save = tmp_path / "ft"
    result = finetune_model(model_files(trained, data_dir), pairs, valid_pairs(data_dir), save,
                            lr=3e-4, lr_from_model=None, patience=1, max_epoch=4)
    assert hashlib.sha1(trained.read_bytes()).hexdigest() == base_sha
    assert Path(result["best_checkpoint"]).is_file()
    assert 1 <= result["epochs"] <= 4 and len(result["curve"]) == result["epochs"]
    assert result["best_valid_loss"] == min(r["valid_loss"] for r in result["curve"])
    assert all(r["train_loss"] is not None for r in result["curve"])
    assert finetune_model(model_files(trained, data_dir), pairs, valid_pairs(data_dir), save,
                          lr=3e-4, lr_from_model=None, patience=1, max_epoch=4) == result
    # A kill before the result was written: the rerun continues from the fine-tune's own checkpoint_last.
    (save / "finetune.json").unlink()
    with caplog.at_level(logging.INFO):
        again = finetune_model(model_files(trained, data_dir), pairs, valid_pairs(data_dir), save,
                               lr=3e-4, lr_from_model=None, patience=1, max_epoch=4)
    assert f"{save / 'checkpoint_last.pt'}" in caplog.text
    assert again["curve"] == result["curve"]
    with pytest.raises(UserError, match="other settings"):
        finetune_model(model_files(trained, data_dir), pairs, valid_pairs(data_dir), save,
                       lr=1e-3, lr_from_model=None, patience=1, max_epoch=4)


def test_anchored_finetune_trains_only_what_it_names_and_stays_near_the_base(trained, data_dir, tmp_path):
    """finetune.trainable freezes the other parameters; finetune.l2 pulls the trained ones toward the base."""
    import torch

    from repair.nmt.fairseq.checkpoint import load_checkpoint

    pairs = [("The teacher likes the clever dog .", "老师喜欢聪明的狗。")] * 20 + corpus.pairs(60, seed=1)

    def drift(save, **kw):
        result = finetune_model(model_files(trained, data_dir), pairs, valid_pairs(data_dir), tmp_path / save,
                                lr=1e-3, lr_from_model=None, patience=5, max_epoch=2, **kw)
        base, new = load_checkpoint(trained)["model"], load_checkpoint(result["best_checkpoint"])["model"]
        return {n: float((new[n].float() - w.float()).norm()) for n, w in base.items() if w.is_floating_point()}

    free = drift("free")
    frozen = drift("frozen", trainable=("decoder.layers",))
    assert all(d == 0.0 for n, d in frozen.items() if not n.startswith("decoder.layers"))
    assert any(d > 0 for n, d in frozen.items() if n.startswith("decoder.layers"))
    assert any(d > 0 for n, d in free.items() if n.startswith("encoder."))
    pulled = drift("pulled", l2=10.0)
    total = lambda d: sum(x * x for x in d.values()) ** 0.5  # noqa: E731
    assert 0 < total(pulled) < 0.5 * total(free)
    assert torch.load(tmp_path / "pulled" / "checkpoint_best.pt", weights_only=False)["cfg"]["criterion"]["anchor_l2"] == 10.0


def test_a_finetune_that_stopped_early_does_not_train_on_when_rerun(trained, data_dir, tmp_path, caplog):
    # lr 0: every epoch's valid loss equals the first, so patience 1 stops after epoch 2.
    pairs = corpus.pairs(60, seed=3)
    save = tmp_path / "ft0"
    result = finetune_model(model_files(trained, data_dir), pairs, valid_pairs(data_dir), save,
                            lr=0.0, lr_from_model=None, patience=1, max_epoch=5)
    assert result["epochs"] == 2
    assert result["stop"]["reason"] == "patience" and result["stop"]["message"].startswith("early stop since valid")
    # Killed after fairseq stopped but before finetune.json was written: fairseq alone would
    # resume from checkpoint_last with its patience count reset and train epoch 3; the rerun
    # starts the fine-tune again from the base model and stops where it stopped.
    (save / "finetune.json").unlink()
    with caplog.at_level(logging.INFO):
        again = finetune_model(model_files(trained, data_dir), pairs, valid_pairs(data_dir), save,
                               lr=0.0, lr_from_model=None, patience=1, max_epoch=5)
    assert "starting it again from the base model" in caplog.text
    assert again["curve"] == result["curve"] and again["epochs"] == 2


def test_stop_when_ends_the_finetune_after_the_epoch_it_names(trained, data_dir, tmp_path):
    """finetune.select=corrections stops the fine-tune at the first epoch that fixes the corrections: stop_when is
    asked once each epoch's checkpoint is saved, and True ends the training there, whatever the patience."""
    save, asked = tmp_path / "ft", []

    def stop(epoch: int) -> bool:
        asked.append(epoch)
        assert (save / f"checkpoint{epoch}.pt").is_file()  # the epoch it is asked about is saved
        return epoch == 2

    result = finetune_model(model_files(trained, data_dir), corpus.pairs(60, seed=4), valid_pairs(data_dir), save,
                            lr=3e-4, lr_from_model=None, patience=10, max_epoch=5, epoch_checkpoints=True, stop_when=stop)
    assert asked == [1, 2] and result["epochs"] == 2 and [r["epoch"] for r in result["curve"]] == [1, 2]
    assert not (save / "checkpoint3.pt").exists() and Path(result["best_checkpoint"]).is_file()


def test_a_resumed_run_keeps_counting_epochs_without_improvement(tmp_path):
    from omegaconf import OmegaConf

    from repair.fileio import append_jsonl

    rows = [{"epoch": 1, "train_loss": 2.0, "valid_loss": 1.0}, {"epoch": 2, "train_loss": 1.9, "valid_loss": 0.9},
            {"epoch": 3, "train_loss": 1.8, "valid_loss": 0.9},  # a tie is no improvement, as in fairseq
            {"epoch": 4, "valid_loss": 0.95}]  # validated, killed before its checkpoint was written: not counted
    for row in rows:
        append_jsonl(tmp_path / "curve.jsonl", row)

    def state(patience):
        return patience_state(OmegaConf.create({"checkpoint": {
            "save_dir": str(tmp_path), "patience": patience, "best_checkpoint_metric": "loss",
            "maximize_best_checkpoint_metric": False}}))

    assert state(3) == (None, 0, False)  # no checkpoint_last: a fresh start
    (tmp_path / "checkpoint_last.pt").write_bytes(b"")
    assert state(3) == (0.9, 1, False)
    assert state(1) == (0.9, 1, True)
    assert state(0) == (None, 0, False)  # no early stopping


# ----------------------------------------------------------------------------- clear errors


def test_missing_binarized_data_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="binarized data missing") as e:
        train_model(tmp_path, tmp_path / "ckpt", TINY, max_epoch=1)
    assert "dict.en.txt" in str(e.value) and "train.en-zh.zh.bin" in str(e.value)


def test_missing_sentencepiece_model_is_a_clear_error(trained, data_dir, tmp_path):
    with pytest.raises(UserError, match="SentencePiece model .*nowhere.model not found"):
        FairseqTranslator(trained, src_sentencepiece_model=tmp_path / "nowhere.model",
                          tgt_sentencepiece_model=data_dir / "spm/zh.model",
                          src_dict=data_dir / "bin/dict.en.txt", tgt_dict=data_dir / "bin/dict.zh.txt")


def test_wrong_checkpoint_path_is_a_clear_error(trained, data_dir):
    with pytest.raises(UserError, match="checkpoint .*checkpoint_bset.pt not found.*checkpoint_best.pt"):
        FairseqTranslator(trained.parent / "checkpoint_bset.pt", data_dir)
    with pytest.raises(UserError, match="not a readable PyTorch checkpoint"):
        load_checkpoint(data_dir / "bin" / "dict.en.txt")


class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_checkpoint_with_a_foreign_pickled_object_is_refused(trained, data_dir, tmp_path):
    state = load_checkpoint(trained)
    marker = tmp_path / "code-ran"
    state["extra_state"]["note"] = _Payload(marker)
    bad = tmp_path / "untrusted.pt"
    torch.save(state, bad)
    with pytest.raises(UserError, match="refused to load"):
        load_checkpoint(bad)
    with pytest.raises(UserError, match="refused to load"):
        FairseqTranslator(bad, data_dir)  # the translator loads through the same guard
    assert not marker.exists()


def test_resuming_loads_weights_only_whatever_the_environment(tmp_path, monkeypatch):
    from fairseq import checkpoint_utils

    from repair.nmt.fairseq.checkpoint import force_weights_only

    marker = tmp_path / "code-ran"
    last = tmp_path / "checkpoint_last.pt"
    torch.save({"model": {}, "cfg": None, "extra_state": {"note": _Payload(marker)}}, last)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    force_weights_only()  # what run_training does before fairseq resumes from checkpoint_last.pt
    with pytest.raises(UserError, match="checkpoint_last.pt: refused to load"):
        checkpoint_utils.load_checkpoint_to_cpu(str(last))
    assert not marker.exists()


def test_a_failing_batch_stops_the_other_workers(trained, data_dir, monkeypatch):
    two = FairseqTranslator(trained, data_dir, beam=2, max_sentences=1, threads=2, workers=2)
    texts = [en for en, _ in corpus.pairs(40, seed=11)]
    n_batches = len(two._batches([len(ids) for ids in two.encode_all(texts)]))
    assert n_batches == 40
    calls = []
    original = two.generator.generate

    def failing(models, sample):
        calls.append(1)
        raise KeyboardInterrupt

    other, other_calls = two._generators[0], []
    other_original = other.generate

    def counting(models, sample):
        other_calls.append(1)
        return other_original(models, sample)

    monkeypatch.setattr(two.generator, "generate", failing)
    monkeypatch.setattr(other, "generate", counting)
    with pytest.raises(KeyboardInterrupt):
        two.translate(texts)
    monkeypatch.setattr(two.generator, "generate", original)
    assert calls == [1]
    # It finishes the batch it holds and takes no more (a slow calling thread may let it take a few).
    assert len(other_calls) < n_batches // 2
    assert len(two.translate(texts)) == len(texts)  # the translator still works afterwards


def test_translate_benchmark_interleaves_batched_and_single_calls(trained, data_dir, tmp_path, capsys):
    import json

    from repair.bench.translate import main as bench_translate

    texts = [en for en, _ in corpus.pairs(23, seed=11)]
    (tmp_path / "texts.en").write_text("\n".join(texts) + "\n", encoding="utf-8")
    bench_translate(["--checkpoint", str(trained), "--data-dir", str(data_dir), "--texts", str(tmp_path / "texts.en"),
                     "--beam", "2", "--threads", "1", "--rounds", "4"])
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["texts"] == 23 and figures["rounds"] == 4
    assert len(figures["batched_runs_s"]) == len(figures["single_runs_s"]) == 4
    assert figures["identical_translations"] == 23  # every text translated alone once, in its own round
    assert figures["batched_per_s"] > 0 and figures["single_per_s"] > 0
    assert figures["ratio"] == pytest.approx(figures["batched_per_s"] / figures["single_per_s"], rel=0.02)


def test_translate_benchmark_builds_an_architecture_with_random_weights(tmp_path, capsys):
    import json

    from repair.bench.translate import main as bench_translate, model_config

    assert model_config("transformer_wmt18")["arch"] == "transformer_wmt_en_de_big"
    with pytest.raises(UserError, match="known: .*transformer_tiny"):
        model_config("transformer_huge")
    # A Tatoeba-format file (English<TAB>Chinese<TAB>attribution) stands in for ../shared/data.
    source = tmp_path / "cmn.txt"
    source.write_text("".join(f"{en}\t{zh}\tCC-BY\n" for en, zh in corpus.pairs(800, seed=12)), encoding="utf-8")
    bench_translate(["--source", str(source), "--workdir", str(tmp_path / "work"), "--random-weights",
                     "-n", "12", "--rounds", "2", "--beam", "2", "--threads", "1"])
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["texts"] == 12 and figures["identical_translations"] == 12
    assert figures["checkpoint"].endswith("transformer_tiny-random/checkpoint_best.pt")
    state = load_checkpoint(figures["checkpoint"])
    assert state["optimizer_history"][-1]["num_updates"] == 1  # as initialised, not trained


def test_constrained_translation_contains_its_phrases_and_reports_the_unmet(translator):
    from repair.nmt.fairseq.constrained import translate_constrained

    sources = ["The cat sees the dog .", "The teacher likes the clever student .", "The old horse helps the farmer .", ""]
    plain = translator.translate(sources)
    # Phrases the plain translations lack: the model must be forced to write them.
    wanted = [["老师"], ["帮助", "红色的马"], [], ["猫"]]
    assert "老师" not in plain[0] and "红色的马" not in plain[1]
    out = translate_constrained(translator, sources, wanted, beam=4, nbest=2)
    assert [len(o) for o in out] == [2, 2, 2, 1]
    assert "老师" in out[0][0].text and out[0][0].met
    text = out[1][0].text
    assert out[1][0].met and "帮助" in text and "红色的马" in text and text.index("帮助") < text.index("红色的马")
    # No constraints: plain beam search, its best is the translator's own output, its n-best ordered by score.
    assert out[2][0].text == plain[2] and out[2][0].met and out[2][0].score >= out[2][1].score
    assert out[3][0].text == "" and not out[3][0].met  # nothing to translate cannot contain a phrase
    # The constrained best scores lower than the free best: the price of the phrase.
    free = translate_constrained(translator, sources[:1], [[]], beam=4)[0][0]
    assert free.text == plain[0] and free.score > out[0][0].score
    # A phrase the dictionary cannot spell is reported unmet, not dropped in silence.
    unmet = translate_constrained(translator, sources[:1], [["𠀀鼹"]], beam=4)[0][0]
    assert not unmet.met and unmet.text == plain[0]
    # A phrase longer than the output cap allows ends at the cap, reported unmet.
    cut = translate_constrained(translator, sources[:2], [["老师" * 30], ["学生"]], beam=4)
    assert not cut[0][0].met and cut[1][0].met
    with pytest.raises(UserError, match="constraint lists"):
        translate_constrained(translator, sources, wanted[:2])
    # In batches of beam rows (suggestions' few dozen searches): the same phrases met, nearest caps batched together.
    rows = translate_constrained(translator, sources, wanted, beam=4, nbest=2, rows=8, max_lengths=[30, 12, 29, None])
    assert [[h.met for h in o] for o in rows][:3] == [[h.met for h in o] for o in out][:3]
    assert all(p in rows[1][0].text.replace(" ", "") for p in wanted[1])
    from repair.nmt.fairseq.constrained import _Job
    job = _Job(translator, sources, wanted, beam=4, nbest=2, ordered=True, max_lengths=[30, 12, 29, None], starts=None)
    assert job.by_caps(8) == [[1, 2], [0]]  # positions among the non-empty sources, two beams of 4 rows each
    with pytest.raises(UserError, match="rows"):
        translate_constrained(translator, sources, wanted, rows=0)
    # Each source stops at its own cap, whatever its batch holds: 2 tokens for the first, in one batch with others.
    short = translate_constrained(translator, sources, wanted, beam=4, rows=100, max_lengths=[2, None, None, None])
    assert len(translator.tgt_codec.encode_all([short[0][0].text])[0].split()) <= 2 and not short[0][0].met
    assert short[1][0].met and short[1][0].text == out[1][0].text


def test_a_phrase_that_begins_the_output_is_spelled_as_the_model_begins_one(translator):
    from repair.nmt.fairseq.constrained import encode_phrase, translate_constrained

    source = "The teacher likes the clever student ."
    own = translator.translate([source])[0]
    pieces = translator.tgt_codec.encode_all([own])[0].split()
    head = pieces[:2] if pieces[0] == "\u2581" else pieces[:1]
    first = "".join(head).lstrip("\u2581")  # the model's first word, as plain text
    start = encode_phrase(translator, first, start=True)
    # SentencePiece writes a sentence's first word with its leading "▁", inside a sentence without it
    assert start == [translator.tgt_dict.index(p) for p in head] != encode_phrase(translator, first)
    hyp = translate_constrained(translator, [source], [[first]], beam=4, starts=[True])[0][0]
    assert hyp.met and hyp.text.replace(" ", "").startswith(first.replace(" ", ""))
    with pytest.raises(UserError, match="starts"):
        translate_constrained(translator, [source], [[first]], starts=[True, False])


def test_the_tensor_step_finds_what_the_per_sentence_step_finds(translator, monkeypatch):
    import repair.nmt.fairseq.constrained as constrained

    sources = ["The cat sees the dog .", "The teacher likes the clever student .", "The old horse helps the farmer .",
               "The doctor visits the old friend .", "The red farmer sees the clever teacher ."]
    # several constraints and none, phrases that begin the output, a cap that cuts one short, one batch and buckets
    wanted = [["老师", "狗"], ["帮助", "红色的马"], [], ["医生"], ["学生", "马", "猫"]]
    options = [dict(beam=4, nbest=3, starts=[True, False, False, True, False]),
               dict(beam=3, nbest=3, rows=64, max_lengths=[4, 20, None, 12, 30]),
               dict(beam=5, nbest=2, rows=10)]
    met = set()
    for kw in options:
        found = {}
        for tensor in (True, False):
            monkeypatch.setattr(constrained, "TENSOR_STEPS", tensor)
            out = constrained.translate_constrained(translator, sources, wanted, **kw)
            found[tensor] = [[(h.text, round(h.score, 5), h.met) for h in hyps] for hyps in out]
        assert found[True] == found[False], kw
        met |= {h[2] for hyps in found[True] for h in hyps}
    assert met == {True, False}  # phrases met, and phrases a cap left unmet


def test_suggestions_make_each_pair_consistent_with_the_models_own_translations(translator):
    from repair.purity.relations.base import Case
    from repair.purity.relations.replace import ReplaceRelation
    from repair.purity.relations.rti import RTIRelation
    from repair.purity.suggest import add_suggestions, best_suggestion

    rti, replace = RTIRelation(stopwords=[]), ReplaceRelation(stopwords=[], candidates="context")
    container, np_ = "The old horse helps the red farmer .", "the red farmer"
    pairs = [("The teacher likes the clever student .", "The teacher likes the clever child .", "student", "child"),
             ("The doctor visits the old friend .", "The doctor visits the old bird .", "friend", "bird")]
    texts = [container, np_] + [t for p in pairs for t in p[:2]]
    translation = dict(zip(texts, translator.translate(texts)))
    # The tiny model translates sentences only (it never saw a lone word): the words' translations from its lexicon.
    lexicon = {w: zh for _, pairs_ in corpus.lexicon().items() for w, zh in pairs_}
    translation.update(lexicon)
    # Each case an issue whatever this machine's tiny model says (its weights differ from one CPU to another): the
    # RTI as its lexicon's farmer, a container translation without it (the model's own, of another sentence), the
    # first mutant and the second original given their partner's translation, so lacking their own word.
    translation[np_] = lexicon["farmer"]
    translation[container] = translator.translate(["The old horse helps the doctor ."])[0]
    translation[pairs[0][1]], translation[pairs[1][0]] = translation[pairs[0][0]], translation[pairs[1][1]]
    cases = {"rti": Case("rti", container, (("container", container), ("rti", np_)), (container, np_))}
    for n, (o, m, w, new) in enumerate(pairs):
        cases[f"r{n}"] = Case("replace", o, (("original", o), ("mutant", m)), (o, m, w, new), {"replaced": [w, new]})
    relations = {"rti": rti, "replace": replace}
    issues = [{"id": k, "relation": c.relation} for k, c in cases.items()]
    assert all(relations[c.relation].check(c, translation).distance > 0 for c in cases.values()), translation
    figures = add_suggestions(issues, cases, relations, translation, translator, beam=4, min_score=None,
                              trim=0)  # a tiny model: no floor; each container searched once
    assert figures["searched"] >= 3 and figures["seconds"] > 0
    by_id = {i["id"]: i for i in issues}
    # The container forced to contain the RTI's translation, where the model found one the relation accepts.
    found = best_suggestion(by_id["rti"], "container")
    assert found is None or lexicon["farmer"] in found["text"]
    # Each replacement side again, with the other's translation outside the replaced word: the wrong side gets the
    # suggestions (the partner's translation has no own word to keep).
    assert best_suggestion(by_id["r0"], "original") is None and best_suggestion(by_id["r1"], "mutant") is None
    for issue in issues:
        scores = [s["score"] for s in issue["suggestions"]]
        assert scores == sorted(scores, reverse=True)
        for s in issue["suggestions"]:
            case = cases[issue["id"]]
            source = dict(case.sides)[s["role"]]
            assert relations[case.relation].check(case, {**translation, source: s["text"]}).distance == 0
            assert ("beam search" in s["origin"] or "scored" in s["origin"]) and s["text"] != translation[source]
    assert figures["offered"] == sum(len(i["suggestions"]) for i in issues) >= 1
    assert figures["below_min_score"] == 0
    # A floor above every score: the sides' own translations score below it, so no constrained search is made,
    # nor the RTI's n-best list (what its container's translation holds), and nothing is offered.
    floor = add_suggestions(issues, cases, relations, translation, translator, beam=4, min_score=0.0, trim=0)
    assert floor["below_min_score"] >= 3 and floor["searched"] == 0 and floor["offered"] == 0


def test_a_translation_scores_as_the_search_scored_it(trained, data_dir, translator):
    from repair.nmt.fairseq.constrained import score_translations, translate_constrained

    sources = ["The cat sees the dog .", "The teacher likes the clever student .", ""]
    best = [h[0] for h in translate_constrained(translator, sources, [[], [], []], beam=4)]
    scores = score_translations(translator, sources, [h.text for h in best])
    assert scores[0] == pytest.approx(best[0].score, abs=1e-4) and scores[1] == pytest.approx(best[1].score, abs=1e-4)
    assert scores[2] == float("-inf")
    other = score_translations(translator, sources[:1], ["老师帮助聪明的学生。"])[0]
    assert other < scores[0]  # another sentence's translation is less likely
    # the pass runs on every core the translator's workers share (as seen by the model's forward pass), and
    # gives the thread count back
    import torch

    two = FairseqTranslator(trained, data_dir, beam=4, max_tokens=300, threads=2)  # 2 workers of 1 thread
    before, seen = torch.get_num_threads(), []
    hook = two.model.register_forward_pre_hook(lambda module, args: seen.append(torch.get_num_threads()))
    torch.set_num_threads(1)
    try:
        assert score_translations(two, sources[:1], [best[0].text]) == pytest.approx(scores[:1], abs=1e-4)
        assert seen and set(seen) == {2}
        assert torch.get_num_threads() == 1
    finally:
        hook.remove()
        torch.set_num_threads(before)
    with pytest.raises(UserError, match="targets"):
        score_translations(translator, sources, ["猫"])


def test_augmented_pairs_carry_their_correction(trained, data_dir, translator, tmp_path):
    """finetune.augment: training sentences containing a corrected source, translated by the base model
    under the correction as a constraint; never a held-out sentence nor a line of the BLEU test split."""
    from repair.data.prepare import read_clean_pairs
    from repair.measures import source_key
    from repair.stages.finetune import augmented, settings_from_config

    train_en = [en for en, _ in read_clean_pairs(data_dir, "train")]
    test_en = {" ".join(en.split()) for en, _ in read_clean_pairs(data_dir, "test")}
    with_source = [en for en in train_en if " the old horse " in f" {source_key(en)} "]
    assert len(with_source) >= 3
    # a correction the model would never write by itself: only the constraint can put it there
    corrections = [{"source": "the old horse", "translation": "老马", "correction": "红色的马"}]
    ft = {"lr": 1e-4, "patience": 1, "max_epoch": 1, "repeat": 1, "replay": 0, "keep": 0, "augment": 50,
          "augment_repeat": 2}
    held = with_source[:1]
    settings = settings_from_config(ft, seed=1, exclude=held)
    pairs = augmented(corrections, settings, data_dir, translator, model_files(trained, data_dir), tmp_path)
    record = __import__("json").loads((tmp_path / "augment.json").read_text())
    assert record["sentences"] == len({" ".join(s.split()) for s in with_source} - set(held) - test_en)
    assert record["met"] + record["unmet"] == record["sentences"] and record["met"] >= 1
    assert len(pairs) == 2 * record["met"]
    assert all("红色的马" in "".join(t.split()) for _, t in pairs)
    assert not {s for s, _ in pairs} & (set(held) | test_en)


def test_review_memory_carries_a_correction_to_a_later_side_in_the_review_and_on_the_page(translator, tmp_path):
    """A corrected word's term is offered, by constrained search, on a later side that holds the word: in the
    oracle review's figures and on the review page once the correction is saved."""
    from starlette.testclient import TestClient

    from helpers import make_issue
    from repair.review.memory import MemorySuggester, ReviewMemory
    from repair.review.oracle import suggestion_figures
    from repair.review.web import create_app
    from repair.stats import edit_distance

    first, later = "The old horse helps the farmer .", "The farmer sees the cat ."
    plain = dict(zip([first, later], translator.translate([first, later])))
    assert "老师" not in plain[first] + plain[later]
    corrected = plain[first] + "老师"  # a correction that puts 老师 in: the memory learns it for first's words

    def suggester(slack=2):
        return MemorySuggester(translator, ReviewMemory(["的", "。"], rare=0), beam=4, slack=slack)

    wide = suggester(slack=1000)
    wide.memory.learn(first, plain[first], corrected)
    assert wide.memory.terms(later, plain[later]) == {"farmer": ["老师"]}
    [got] = wide.suggest([(later, plain[later])])
    assert got is not None and "老师" in got["text"] and got["terms"] == ["老师"] and "farmer" in got["origin"]
    assert wide.suggest([("The cat sees the dog .", "猫看见狗。")]) == [None]  # nothing learnt for its words
    near = suggester()
    near.memory.learn(first, plain[first], corrected)
    [close] = near.suggest([(later, plain[later])])
    assert close is None or ("老师" in close["text"] and edit_distance(close["text"], plain[later]) <= len("老师") + 2)

    # the oracle's figures: the later side's reference is what the memory offers, so it is accepted as it is
    issues = [make_issue(first, plain[first], "the farmer", "农民", ["老师"]),
              make_issue(later, plain[later], "the cat", "猫", ["老师"])]
    references = {first: corrected, "the farmer": "农民", later: got["text"], "the cat": "猫"}
    figures = suggestion_figures(issues, references, wide.fresh())
    assert figures["from_memory"] == 1 and figures["memory_accepted"] == 1 and figures["accepted"] >= 1
    assert figures["wrong_sides"] == 2 and figures["memory_searched"] >= 1
    without = suggestion_figures(issues, references)
    assert without["chars_to_edit_with"] - figures["chars_to_edit_with"] == edit_distance(plain[later], got["text"])

    # the page: after the first issue's correction is saved, the later issue's side gets the memory's suggestion
    app = create_app(issues, tmp_path / "review", memory=wide.fresh())
    client = TestClient(app, base_url="http://127.0.0.1")
    headers = {"X-Review-Token": app.state.token}
    assert client.get("/api/state", headers=headers).json()["memory"] == {}
    r = client.post("/api/judge", headers=headers, json={
        "issue": issues[0]["id"], "wrong": ["container"], "kind": "under-translation",
        "corrections": {"container": corrected}})
    assert r.status_code == 200, r.text
    offered = r.json()["memory"]
    assert list(offered) == [issues[1]["id"]] and offered[issues[1]["id"]]["container"]["text"] == got["text"]
    assert client.get("/api/state", headers=headers).json()["memory"] == offered


def test_review_memory_swaps_a_learnt_word_for_words_used_like_it(translator, data_dir, caplog, tmp_path):
    """A learnt word swapped for training words used like it (word vectors, the same tag where it stands): each
    variant translated by the model, the swapped word's own translation replaced by the term, the candidate the
    model scores best offered; in the oracle's figures too. A second review of the same texts reads the vectors
    back from their cache and offers the same."""
    from helpers import make_issue
    from repair.data.prepare import read_clean_pairs
    from repair.review.memory import MemorySuggester, ReviewMemory, Substitutes
    from repair.review.oracle import suggestion_figures
    from repair.stages.finetune import word_counts

    seen = word_counts(data_dir)
    first, later = "The old horse helps the farmer .", "The farmer sees the cat ."
    plain = dict(zip([first, later], translator.translate([first, later])))
    corrected = plain[first] + "老师"
    def substitutes():
        return Substitutes(lambda: [en for en, _ in read_clean_pairs(data_dir, "train")], seen, rare=5, k=4,
                           cache_dir=tmp_path / "vectors")

    subs = substitutes()
    m = MemorySuggester(translator, ReviewMemory(["的", "。"], rare=0), beam=4, slack=2, substitutes=subs)
    m.know([first, later])
    m.memory.learn(first, plain[first], corrected)
    wanted = m.memory.terms(later, plain[later])
    assert wanted == {"farmer": ["老师"]}

    variants = subs.swaps(later, lambda w: w == "farmer")
    assert 1 <= len(variants) <= 4
    nlp = subs.nlp()
    farmer_tag = nlp(later)[1].tag_
    for [(old, new)], text in variants:
        assert old == "farmer" and new not in later.lower().split() and seen.get(new, 0) >= 5
        assert text == later.replace("farmer", new) and nlp(text)[1].tag_ == farmer_tag
    assert subs.swaps("The cat sees the dog .", lambda w: w == "farmer") == []

    # the suggestion: one variant's translation with one span (the swapped word's) made the term, the rest as the
    # model wrote it; here the model, trained on whole sentences only, writes a sentence for a word alone, so the
    # span is where the variants' translations differ
    outs = dict(zip([new for [(_, new)], _ in variants], translator.translate([text for _, text in variants])))
    [got] = m.suggest([(later, plain[later])])
    assert got is not None and got["terms"] == ["老师"] and "review memory" in got["origin"]
    new = got["origin"].split("translation with ")[1].split(" for farmer, their translation made 老师")[0]
    out, text = outs[new], got["text"]
    head = len(text.split("老师")[0])
    tail = len(text) - head - len("老师")
    assert text != plain[later] and out[:head] == text[:head] and out[len(out) - tail:] == text[len(text) - tail:]
    assert len(out) - head - tail >= 1  # a span of the variant's translation, not an insertion
    assert got["score"] == pytest.approx(translator.score([later], [text])[0], abs=1e-3)
    (cached,) = (tmp_path / "vectors").iterdir()
    written = cached.stat().st_mtime_ns
    again = MemorySuggester(translator, ReviewMemory(["的", "。"], rare=0), beam=4, slack=2, substitutes=substitutes())
    again.know([first, later])
    again.memory.learn(first, plain[first], corrected)
    assert again.suggest([(later, plain[later])]) == [got] and subs.built == "trained"
    assert again.substitutes.built == "cached" and cached.stat().st_mtime_ns == written

    issues = [make_issue(first, plain[first], "the farmer", "农民", ["老师"]),
              make_issue(later, plain[later], "the cat", "猫", ["老师"])]
    references = {first: corrected, "the farmer": "农民", later: text, "the cat": "猫"}
    fresh = MemorySuggester(translator, ReviewMemory(["的", "。"], rare=0), beam=4, slack=2, substitutes=subs)
    figures = suggestion_figures(issues, references, fresh)
    assert figures["from_memory"] == 1 and figures["memory_accepted"] == 1

    # no tagger to be had: the review goes on with the constrained search's suggestions, and says so once
    broken = Substitutes(lambda: [], seen, rare=5, tagger="no_such_spacy_model")
    quiet = MemorySuggester(translator, ReviewMemory(["的", "。"], rare=0), beam=4, slack=1000, substitutes=broken)
    quiet.memory.learn(first, plain[first], corrected)
    with caplog.at_level(logging.WARNING, logger="repair.review.memory"):
        [plain_got] = quiet.suggest([(later, plain[later])])
    assert quiet.substitutes is None and "no swapped words" in caplog.text
    assert plain_got is not None and "their translation made" not in plain_got["origin"] and "老师" in plain_got["text"]
