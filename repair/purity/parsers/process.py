"""A parser loaded and run in a process of its own, so that loading it overlaps the translator's start.

`python -m repair.purity input=FILE parser=spacy` spends about a CPU second importing and loading spaCy, in the
same interpreter that builds the translator and then, while CTranslate2 translates the sentences in its own
threads, holds the GIL for spaCy's Python code. Forked at the very start of the run (before the translator
starts any thread), a child process builds the parser itself and answers parse requests over a pipe: it loads
while the parent builds the translator and begins the sentences, and it parses in its own interpreter. The
trees are the parser's own, the same as in-process (tests/test_parsers_spacy.py); a user's mistake in the
parser's options (a missing model) is the same message, raised where the trees are asked for.

Used only where forking is safe and cheap: Linux, the `fork` start method, no other thread running yet, Python's
or native (`parser_in_its_own_process`); elsewhere the parser is built in-process as before.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
import time
import traceback
from typing import Any, Mapping

from repair.errors import UserError
from repair.purity.parsers.base import Parser

log = logging.getLogger(__name__)

# Backends worth a process of their own: a load of about a second against a fork's few milliseconds.
OWN_PROCESS = ("spacy",)


def _serve(conn, cfg: dict) -> None:
    """The child: build the parser, then answer each list of sentences with their trees until told to stop."""
    try:
        _answer(conn, *_build(cfg))
    except KeyboardInterrupt:  # Ctrl-C reaches the parent too, which says so; nothing to print here
        return


def _build(cfg: dict):
    """The parser (or why there is none) and its seconds to load."""
    from repair.purity.parsers import make_parser

    began = time.perf_counter()
    parser = failure = None
    try:
        parser = make_parser(cfg)
    except UserError as e:
        failure = ("user", str(e))
    except Exception:  # noqa: BLE001 - reported by the parent, with this traceback
        failure = ("error", traceback.format_exc())
    return parser, failure, time.perf_counter() - began


def _answer(conn, parser, failure, load: float) -> None:
    while True:
        try:
            sentences = conn.recv()
        except EOFError:
            return
        if sentences is None:
            return
        if failure is not None:
            conn.send(failure)
            continue
        began = time.perf_counter()
        try:
            trees = parser.parse(sentences)
        except UserError as e:
            conn.send(("user", str(e)))
        except Exception:  # noqa: BLE001
            conn.send(("error", traceback.format_exc()))
        else:
            conn.send(("trees", {"trees": trees, "load": round(load, 3), "parse": round(time.perf_counter() - began, 3)}))


class ParserProcess(Parser):
    """The parser of `cfg` (as make_parser takes it), built and run in a child process started at once.

    `process`: the child's seconds to load the parser and to parse (known after the first parse), for
    summary.json. `close()` ends the child (it also ends with its parent).
    """

    def __init__(self, cfg: Mapping[str, Any], method: str = "fork"):
        self.name = str(cfg.get("name", "parser"))
        context = multiprocessing.get_context(method)
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, dict(cfg)), name=f"{self.name}-parser",
                                        daemon=True)
        self._process.start()
        child.close()

    def parse(self, sentences: list[str]) -> list[str]:
        try:
            self._conn.send(list(sentences))
            kind, answer = self._conn.recv()
        except (EOFError, OSError):
            self._process.join(5)
            raise RuntimeError(f"the {self.name} parser's process ended without parsing (exit code "
                               f"{self._process.exitcode})") from None
        if kind == "user":
            raise UserError(answer)
        if kind == "error":
            raise RuntimeError(f"the {self.name} parser failed in its process:\n{answer}")
        self.process = {"load": answer["load"], "parse": answer["parse"],
                        "why": "the parser loaded and parsed in a process of its own while the translator started: "
                               "its load is not in the initialization's seconds, the wait for it is in pair "
                               "construction's"}
        log.info("%s loaded in a process of its own in %.2f s (parsed in %.2f s) while the translator started",
                 self.name, answer["load"], answer["parse"])
        return answer["trees"]

    def close(self, now: bool = False) -> None:
        """Ends the child: told to stop (it is idle once it has answered), or at once (`now`: a run that failed
        before asking, whose error need not wait for spaCy to finish loading)."""
        if not now:
            try:
                self._conn.send(None)
            except (OSError, ValueError):
                now = True
        self._conn.close()
        if not now:
            self._process.join(10)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(10)


def only_thread() -> bool:
    """Whether this process runs one thread: no Python thread besides this one, nor a native one (a translator's
    from an earlier job of a sweep, whose locks a fork would copy held)."""
    try:
        return threading.active_count() == 1 and len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def parser_in_its_own_process(cfg: Mapping[str, Any]) -> ParserProcess | None:
    """A ParserProcess for `cfg` where it pays and forking is safe (see the module doc), else None."""
    if (cfg.get("name") not in OWN_PROCESS or not sys.platform.startswith("linux")
            or "fork" not in multiprocessing.get_all_start_methods() or not only_thread()):
        return None
    try:
        return ParserProcess(cfg)
    except OSError as e:  # no process to be had (limits): in-process as before
        log.info("parser in-process (no process of its own: %s)", e)
        return None
