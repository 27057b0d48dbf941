"""Imports that a run pays for at start-up without using what they load.

- `import spacy` imports all of spaCy's command line (`spacy.cli`: typer, the download and training commands,
  0.3-0.4 s on 2 cores) for one name, `spacy.info`, which parsing never calls.
- `import sacremoses` imports joblib (about 0.2 s) for `Parallel` and `delayed`, which only its multi-process
  helper calls; fairseq's Moses encoder, and ours, tokenize in-process.

- `import fairseq` imports every task and criterion it registers, among them audio classification's and sentence
  prediction's metrics: scikit-learn and SciPy's statistics (half of fairseq's import, 12 of 25 s on a loaded
  2-core machine, `python -X importtime`), which translating and searching never call.

`stand_ins` puts small modules in their place in `sys.modules` for the length of that one import and removes
them after it, so any later import of the real module (`import spacy.cli`, `import joblib`) loads it as usual.
The names the importing module keeps from a stand-in load the real module when first called. Where the
library needs more of the module than the stand-in has (another version of it), the import is done again
without stand-ins: slower, never broken.
"""

from __future__ import annotations

import importlib
import logging
import sys
import types
from contextlib import contextmanager
from typing import Callable, Iterator

log = logging.getLogger(__name__)


def _forward(module: str, name: str) -> Callable:
    """A function that imports the real `module` and calls its `name`."""
    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"{module}.{name}, imported when first called."
    return call


def _module(name: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name, f"A stand-in for {name} while another module is imported (repair.startup).")
    module.__dict__.update(attributes)
    return module


def spacy_cli() -> dict[str, types.ModuleType]:
    """spacy/__init__.py's `from .cli.info import info`."""
    return {"spacy.cli": _module("spacy.cli"),
            "spacy.cli.info": _module("spacy.cli.info", info=_forward("spacy.cli.info", "info"))}


def joblib() -> dict[str, types.ModuleType]:
    """sacremoses/util.py's `from joblib import Parallel, delayed`."""
    return {"joblib": _module("joblib", Parallel=_forward("joblib", "Parallel"),
                              delayed=_forward("joblib", "delayed"))}


def _lazy_module(name: str) -> types.ModuleType:
    """A stand-in for `name` whose every public name is a function that imports the real module when called."""
    def getattr_(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _forward(name, attr)

    return _module(name, __getattr__=getattr_)


def fairseq_metrics() -> dict[str, types.ModuleType]:
    """fairseq's `from sklearn import metrics`, `from sklearn.metrics import f1_score, ...` and
    `from scipy.stats import pearsonr, spearmanr` (its audio classification task, its sentence prediction
    criterion)."""
    metrics = _lazy_module("sklearn.metrics")
    return {"sklearn": _module("sklearn", metrics=metrics), "sklearn.metrics": metrics,
            "scipy.stats": _lazy_module("scipy.stats")}


@contextmanager
def stand_ins(modules: dict[str, types.ModuleType]) -> Iterator[None]:
    """`modules` in sys.modules (those not imported already) until the block ends, then taken out again."""
    placed = {name: module for name, module in modules.items() if name not in sys.modules}
    sys.modules.update(placed)
    try:
        yield
    finally:
        for name, module in placed.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]


def import_with(name: str, modules: dict[str, types.ModuleType]) -> types.ModuleType:
    """`import name` with `modules` standing in; where the stand-ins do not suffice, the plain import."""
    if name in sys.modules:
        return sys.modules[name]
    try:
        with stand_ins(modules):
            return importlib.import_module(name)
    except (ImportError, AttributeError) as e:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]  # a partial import that read a stand-in: done again below
        log.debug("importing %s without stand-ins (%s)", name, e)
        return importlib.import_module(name)
