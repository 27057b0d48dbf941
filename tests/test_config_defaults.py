"""The composed configs and the defaults of the functions they feed agree: a key left out of a
config, or a function called without it, gives the same run."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parent.parent
CONF = REPO / "conf"


def composed(name: str, *overrides: str) -> dict:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return OmegaConf.to_container(compose(name, overrides=list(overrides)), resolve=True)


def defaults(fn) -> dict:
    return {k: p.default for k, p in inspect.signature(fn).parameters.items() if p.default is not inspect.Parameter.empty}


def mismatches(config: dict, fn, rename: dict | None = None) -> list[str]:
    """Keys present both in `config` (renamed as `rename` says) and among fn's defaults whose values differ."""
    own = defaults(fn)
    out = []
    for key, value in config.items():
        param = (rename or {}).get(key, key)
        if param in own:
            default = own[param]
            if isinstance(default, (tuple, list)) and isinstance(value, (tuple, list)):
                default, value = list(default), list(value)
            if default is None and value in ({}, []):  # an empty collection given as None
                continue
            if default != value:
                out.append(f"{fn.__qualname__}({param}={default!r}) but the config has {key}: {value!r}")
    return out


# sized to each data set, so no default fits them all
PER_DATA = {"vocab_size", "src_vocab_size", "tgt_vocab_size", "workers"}


def feeds():
    from repair.data.demo import build_demo
    from repair.data.prepare import prepare_data
    from repair.nmt.fairseq.ct2 import CTranslate2Translator
    from repair.nmt.fairseq.finetune import finetune_model
    from repair.nmt.fairseq.train import train_model
    from repair.nmt.fairseq.translator import FairseqTranslator
    from repair.purity.parsers.spacy import SpacyParser
    from repair.purity.parsers.stanza import StanzaParser
    from repair.purity.relations import ReplaceRelation, RTIRelation
    from repair.purity.rti import extract
    from repair.purity.run import run_purity
    from repair.purity.suggest import add_suggestions
    from repair.review.web import serve_review
    from repair.stages.review import WebReview
    from repair.stats import bleu_significance, classify_changes

    loop = composed("loop")
    app = composed("purity_app")
    shared = {k: v for k, v in app.items() if k not in ("parser", "translator", "input", "out", "hydra")}
    # suggest: the test stage's step (run_purity without it suggests nothing, as verify's Purity runs do);
    # its keys are add_suggestions' defaults
    without = lambda group: {k: v for k, v in group.items() if k != "suggest"}  # noqa: E731
    # review.memory: the review stage's (test_review_memory_defaults_equal_the_configs)
    web_review = {k: v for k, v in composed("loop", "review=web")["review"].items() if k != "memory"}
    return [
        ("purity group (loop)", without(loop["purity"]), run_purity, None),
        ("purity group (repair.purity)", without(shared), run_purity, None),
        ("purity.suggest", loop["purity"]["suggest"], add_suggestions, None),
        ("purity group: RTI rule", loop["purity"]["rti"], extract, None),
        ("purity group: RTI relation", loop["purity"]["rti"], RTIRelation.__init__, None),
        ("purity group: replacement relation", loop["purity"]["replace"], ReplaceRelation.__init__, None),
        ("finetune", loop["finetune"], finetune_model, None),
        ("seed", {"seed": loop["seed"]}, finetune_model, None),
        ("seed", {"seed": loop["seed"]}, train_model, None),
        ("device", {"device": loop["device"]}, train_model, None),
        # the demo's conf builds a field into its Purity sentences; build_demo's own default builds none
        ("data=demo build", {k: v for k, v in loop["data"]["build"].items() if k != "domain"}, build_demo, None),
        *((f"data={name} prepare", {k: v for k, v in composed("loop", f"data={name}")["data"]["prepare"].items()
                                     if k not in PER_DATA}, prepare_data, None) for name in ("demo", "wmt18", "parallel")),
        ("verify", loop["verify"], bleu_significance, {"bootstrap_samples": "n_samples"}),
        ("verify", loop["verify"], classify_changes, None),
        ("translator=fairseq", composed("loop", "translator=fairseq")["translator"], FairseqTranslator.__init__, None),
        ("translator=ctranslate2", composed("loop", "translator=ctranslate2")["translator"],
         CTranslate2Translator.__init__, None),
        ("parser=spacy", composed("loop", "parser=spacy")["parser"], SpacyParser.__init__, None),
        ("parser=stanza", composed("loop", "parser=stanza")["parser"], StanzaParser.__init__, None),
        ("review=web", web_review, serve_review, None),
        ("review=web (the loop)", web_review, WebReview.__init__, None),
    ]


def test_review_memory_defaults_equal_the_configs():
    from repair.stages.review import MEMORY_DEFAULTS

    for review in ("oracle", "web"):
        assert composed("loop", f"review={review}")["review"]["memory"] == MEMORY_DEFAULTS, review


def test_the_demo_builds_its_field_as_its_config_says():
    """build_demo builds no field by default; the demo's config and `python -m repair.data.demo` share one."""
    from repair.data.demo.build import DEMO_DOMAIN

    assert composed("loop")["data"]["build"]["domain"] == DEMO_DOMAIN > 0


def test_code_defaults_equal_the_configs():
    found = [f"{what}: {m}" for what, config, fn, rename in feeds() for m in mismatches(config, fn, rename)]
    assert not found, "\n".join(found)


def test_the_purity_group_is_the_same_in_the_loop_and_in_repair_purity():
    loop = composed("loop", "purity.thresholds=[0,2]")["purity"]
    app = composed("purity_app", "thresholds=[0,2]")
    group = OmegaConf.to_container(OmegaConf.load(CONF / "purity" / "default.yaml"))
    assert group["relations"] == ["rti"]
    for key in group:
        assert loop[key] == app[key], key
    assert loop["thresholds"] == [0, 2] and {"input", "holdout", "per_cycle"} <= set(loop)


def test_the_guard_sees_a_default_that_differs():
    def finetune(lr: float = 3e-4, patience: int = 2):
        pass

    assert mismatches({"lr": 3e-4, "patience": 3, "repeat": 20}, finetune) == [
        "test_the_guard_sees_a_default_that_differs.<locals>.finetune(patience=2) but the config has patience: 3"]


def test_the_loop_passes_the_purity_group_on():
    from repair.purity.config import run_settings

    purity = composed("loop", "purity.rti.max_words=7", "purity.stop_tokens=['的']", "purity.relations=[rti,replace]")
    kwargs = run_settings(purity["purity"])
    group = set(OmegaConf.load(CONF / "purity" / "default.yaml"))
    assert set(kwargs) - {"relation_options"} == group - {"rti", "replace", "suggest"}
    assert kwargs["relation_options"]["rti"] == {"max_words": 7, "min_content_words": 3}
    assert kwargs["relation_options"]["replace"]["per_word"] == 2 and list(kwargs["stop_tokens"]) == ["的"]


def test_an_old_rti_key_is_refused_with_its_new_name(tmp_path):
    import subprocess
    import sys

    from repair.errors import UserError
    from repair.purity.config import check_renamed

    with pytest.raises(UserError, match=r"purity.max_words is now purity.rti.max_words"):
        check_renamed(["cycles=2", "purity.max_words=7"], "purity.")
    with pytest.raises(UserError, match=r"min_content_words is now rti.min_content_words"):
        check_renamed(["+min_content_words=2"])
    check_renamed(["purity.rti.max_words=7", "max_words=7"], "purity.")  # new names, and a key of another group
    r = subprocess.run([sys.executable, "-m", "repair.loop", "purity.max_words=7", f"run_dir={tmp_path / 'run'}"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "purity.max_words is now purity.rti.max_words" in r.stderr and not (tmp_path / "run").exists()
