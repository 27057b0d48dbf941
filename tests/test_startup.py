"""Start-up imports (repair.startup): spaCy without its command line, sacremoses without joblib, and both still
whole for whoever uses those parts later in the same process."""

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from repair import startup

REPO = Path(__file__).resolve().parents[1]


def run_python(code: str) -> dict:
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_parser_and_a_moses_model_start_without_spacys_command_line_or_joblib():
    pytest.importorskip("spacy")
    pytest.importorskip("sacremoses")
    seen = run_python(
        "import json, sys\n"
        "from repair.purity.parsers.spacy import import_spacy\n"
        "from repair.nmt.preprocessing import _Moses\n"
        "spacy = import_spacy()\n"
        "moses = _Moses('en')\n"
        "before = {m: m in sys.modules for m in ('spacy.cli', 'spacy.cli.download', 'typer', 'joblib')}\n"
        "tokens = moses.encode(\"Don't split e-mail, please.\")\n"
        # the parts left out load when they are used
        "version = spacy.info()['spacy_version']\n"
        "import spacy.cli\n"
        "import sacremoses.util\n"
        "upper = list(sacremoses.util.parallelize_preprocess(str.upper, ['a', 'b'], processes=2))\n"
        "print(json.dumps({'before': before, 'tokens': tokens, 'version': version, 'download': callable(spacy.cli.download),\n"
        "                  'joblib': 'joblib' in sys.modules, 'upper': upper, 'real': spacy.__version__}))\n")
    assert seen["before"] == {"spacy.cli": False, "spacy.cli.download": False, "typer": False, "joblib": False}
    assert seen["tokens"] == "Don &apos;t split e @-@ mail , please ."  # fairseq's Moses settings, unchanged
    assert seen["version"] == seen["real"] and seen["download"]
    assert seen["joblib"] and seen["upper"] == ["A", "B"]


def test_fairseq_imports_without_scikit_learn_or_scipys_statistics_and_they_load_when_called():
    pytest.importorskip("fairseq")
    seen = run_python(
        "import json, sys\n"
        "from repair import startup\n"
        "startup.import_with('fairseq', startup.fairseq_metrics())\n"
        "import fairseq.checkpoint_utils, fairseq.tasks.translation, fairseq.sequence_generator\n"
        "before = {m: m in sys.modules for m in ('sklearn', 'sklearn.metrics', 'scipy.stats')}\n"
        # what fairseq kept from the stand-ins: the real functions, imported when called
        "from fairseq.tasks.audio_classification import sklearn_metrics\n"
        "from fairseq.criterions.sentence_prediction import f1_score, pearsonr\n"
        "f1 = f1_score([0, 1, 1], [0, 1, 0])\n"
        "r = pearsonr([1, 2, 3], [2, 4, 7])[0]\n"
        "fpr = sklearn_metrics.roc_curve([0, 1], [0.2, 0.8])[0].tolist()\n"
        "print(json.dumps({'before': before, 'f1': f1, 'r': r, 'fpr': fpr,\n"
        "                  'after': {m: m in sys.modules for m in ('sklearn.metrics', 'scipy.stats')}}))\n")
    assert seen["before"] == {"sklearn": False, "sklearn.metrics": False, "scipy.stats": False}
    assert seen["f1"] == pytest.approx(2 / 3) and 0.9 < seen["r"] < 1 and seen["fpr"] == [0.0, 0.0, 1.0]
    assert seen["after"] == {"sklearn.metrics": True, "scipy.stats": True}


def test_a_stand_in_that_does_not_suffice_falls_back_to_the_plain_import(tmp_path, monkeypatch):
    """A library version that needs more of the module than the stand-in has: imported again without it."""
    (tmp_path / "needs_more.py").write_text("from helper_mod import present, missing\nvalue = present() + missing()\n")
    (tmp_path / "helper_mod.py").write_text("def present():\n    return 1\n\ndef missing():\n    return 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    stand_in = types.ModuleType("helper_mod")
    stand_in.present = lambda: 1
    module = startup.import_with("needs_more", {"helper_mod": stand_in})
    assert module.value == 3 and sys.modules["helper_mod"] is not stand_in
    for name in ("needs_more", "helper_mod"):
        sys.modules.pop(name, None)


def test_stand_ins_leave_modules_already_imported_alone():
    real = sys.modules["json"]
    with startup.stand_ins({"json": types.ModuleType("json"), "not_a_module_here": types.ModuleType("x")}):
        assert sys.modules["json"] is real and "not_a_module_here" in sys.modules
    assert sys.modules["json"] is real and "not_a_module_here" not in sys.modules


def test_torchs_threads_wait_asleep_unless_the_environment_says_otherwise():
    """`import repair` sets OMP_WAIT_POLICY=PASSIVE before torch reads it (a spinning thread on shared cores made
    the demo's test stage 10x slower); a value the environment gives is kept."""
    import os

    code = "import json, os, repair, torch; print(json.dumps(os.environ.get('OMP_WAIT_POLICY')))"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    for given, expected in ((None, "PASSIVE"), ("ACTIVE", "ACTIVE")):
        run_env = env if given is None else {**env, "OMP_WAIT_POLICY": given}
        result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=run_env, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        assert json.loads(result.stdout.strip().splitlines()[-1]) == expected
