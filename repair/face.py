"""The face of a model family: everything the loop asks of a kind of model, declared in one place.

A model family (one kind of model: its files, its translator, its training and its fine-tune) is a
`ModelFamily`; what translates with one of its models is a `Translator`; what searches under constraints
and scores is a `Searcher`. The stages and the loop speak only to these three; which family serves a run
is the `translator` config group's choice, and no stage asks what kind of model it holds.

Abilities every family has are abstract methods. Optional abilities are ordinary methods whose default says
"this family cannot" in the one way the caller reads (None, or `NotSupported`, a UserError naming the
family and the ability): a caller never probes for an attribute.

Families are registered the way parsers and relations are (repair.registry): FAMILIES maps the translator
group's names to "module:Class", imported only when chosen. A family that lives outside the package names
its class in its own config file (`family: module:Class` in conf/translator/<name>.yaml or any config
directory on Hydra's search path); it is added to the registry when first chosen (docs/families.md).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from repair.errors import UserError


class Model(Protocol):
    """A model the loop holds (repair.nmt.preprocessing.ModelFiles: its checkpoint and how its text is encoded)."""

    checkpoint: str  # the file or folder it is read from

    def with_checkpoint(self, checkpoint: str | Path) -> "Model":
        """The same model's files with another checkpoint (a fine-tune of it)."""

    def to_dict(self) -> dict:
        """Plain values the run folder's model.json records (ModelFiles.from_dict reads them back)."""


class NotSupported(UserError):
    """An optional ability the chosen family does not have."""

    def __init__(self, family: str, ability: str, hint: str = ""):
        super().__init__(f"translator={family}: this model family cannot {ability}" + (f"; {hint}" if hint else ""))


@runtime_checkable
class Searcher(Protocol):
    """Lexically constrained search and scoring with one model (what suggested corrections and augmentation use)."""

    tgt_codec: Any  # encode_all(texts) -> token strings: how the target side is spelt in tokens

    def translate_constrained(self, sources: list[str], constraints: list[list[str]], **options: Any) -> list:
        """n-best hypotheses per source (each with .text, .met, .score), each meeting its constraints where it can."""

    def score(self, sources: list[str], targets: list[str]) -> list[float]:
        """The model's score of each target as its source's translation."""

    def phrase_tokens(self, phrase: str, start: bool = False) -> int:
        """Target tokens of a phrase as the search spells it (inside a sentence, or at its start)."""


class Translator(ABC):
    """Translates a batch of English texts into Chinese, one output per input, in order."""

    name: str = "translator"
    files: "Model | None" = None  # the model it translates with (None: a table of recorded translations)

    @abstractmethod
    def translate(self, texts: list[str]) -> list[str]:
        ...

    def begin(self, texts: list[str]):
        """Start translating `texts` in the background (Purity's sentences, while their pairs are built); a
        function that waits for them and returns their translations in order, or None where this translator
        does not translate in the background (then they are translated with the rest, as before)."""
        return None

    def describe(self) -> dict:
        """What a run's summary says of the translator (a translator may add its settings and checks)."""
        return {"name": self.name}

    def why_no_search(self) -> str | None:
        """Why this translator cannot run the lexically constrained search that suggestions need (None: it can).
        Cheap: nothing is loaded."""
        return f"translator={self.name} has no model to search"

    def searcher(self, beam: int) -> tuple[Searcher | None, str]:
        """(what searches, a note for a suggestion's origin), or (None, why not)."""
        return None, self.why_no_search() or ""

    def check_model(self, sentences: Sequence[str], valid_pairs: Sequence[tuple[str, str]] = (),
                    data_dir: str | Path | None = None) -> dict | None:
        """Its model and preprocessing checked on a sample before they are tested (repair.nmt.fairseq.modelcheck's record:
        what was measured, `problems`, `message`, `stop`); None where it has no model to check (a table)."""
        return None

    # optional abilities of a scoped edit (repair.edit): None where this translator has none

    def without_edit(self, fallback: str) -> "Translator | None":
        """The model at `fallback` served by this translator's own loaded weights with its edit switched off (an
        adapter's base model), so that one model is in memory; None: load the fallback as any other model."""
        return None

    def with_adapter(self, path: str) -> "Translator | None":
        """The edit at `path` (an adapter of this translator's model) added to the model already loaded; None
        where `path` is no such edit."""
        return None


class ModelFamily(ABC):
    """One kind of model: which models are its own, how they are loaded, trained and fine-tuned.

    name: the translator group's name that chooses it. translator_class: "module:Class" (or the class) of its
    translator; the group's other keys are that class's arguments. twins: {family whose models this group
    serves as well: the family that serves them with this group's keys} (a runtime such as CTranslate2 serves
    the models of several families). preprocessing_keys: the group's keys that set how a model's text is
    encoded (reset where the loop names the model's own files). needs_encoded_corpus: whether a model this
    family trains reads the data folder's encoded corpus (repair.data.prepare encodes it). model_help: what a
    model of this family is, for a message about a path that is none."""

    name: str = "family"
    translator_class: str | type = ""
    twins: Mapping[str, str] = {}
    preprocessing_keys: Sequence[str] = ()
    needs_encoded_corpus: bool = False
    model_help: str = "a model of this family"

    # ------------------------------------------------------------------ every family

    @abstractmethod
    def owns(self, path: str | Path) -> bool:
        """Whether `path` is one of this family's models (a fine-tune's output included)."""

    def translator(self, cfg: Mapping[str, Any], **overrides: Any) -> Translator:
        """The translator for the group's plain values, with `overrides` (checkpoint, files, device ...) in their place."""
        from repair.registry import build

        options = {k: v for k, v in cfg.items() if k != "family"}
        return build("translator", {options.get("name"): self.translator_class}, options, **overrides)

    def check_loop(self, cfg: Mapping[str, Any]) -> None:
        """Refuse (UserError) a translator group that the loop cannot test, fine-tune and verify with."""

    def digest(self, path: str | Path) -> str:
        """A model's SHA-256 (the run folder's model.json records it)."""
        from repair.fileio import file_sha256

        return file_sha256(Path(path))

    @abstractmethod
    def finetune(self, base: Model, pairs: Sequence[tuple[str, str]], valid: Sequence[tuple[str, str]],
                 out: Path, settings: Any, translator: Translator | None, **common: Any) -> dict:
        """Fine-tunes `base` on `pairs` into `out`, validating each epoch on `valid`. settings: the finetune
        group's (repair.stages.finetune.FinetuneSettings; a family reads the keys it honours). common: lr,
        patience, max_epoch, seed, device, threads, l2, trainable, epoch_checkpoints (keep checkpoint<epoch>
        of each), stop_when(epoch), probe_pairs, encoding_check, lr_from_model (None, or the lr at least that share of
        the one the base model was trained with, where the family knows it). Returns at least
        best_checkpoint, curve ([{epoch, valid_loss}]), stop ({reason, epoch}), and probe_loss_before where it
        measured it (learning_rate: the lr used and why, where it differs by model)."""

    # ------------------------------------------------------------------ optional

    def train(self, data_dir: Path, checkpoint_dir: Path, model_cfg: Mapping[str, Any], seed: int,
              device: str) -> Path:
        """A model trained on the data folder with the `model` group's settings; its checkpoint."""
        raise NotSupported(self.name, "train a model", "bring one along with model.checkpoint=PATH")

    def probe_loss_after(self, result: Mapping[str, Any], base: Model, out: Path) -> float | None:
        """The corrections' loss under the checkpoint a fine-tune kept (None: not measured)."""
        return None

    def unwritable(self, base: Model, targets: Sequence[str]) -> list[str]:
        """The targets `base` cannot write as they are (a character its vocabulary lacks becomes an unknown
        token): no fine-tune can fix a correction that holds one. [] where the family cannot tell."""
        return []

    def constrained_search(self, translator: Translator | None, base: Model) -> Callable[[list, list], list]:
        """search(sources, constraints) with the base model (finetune.augment)."""
        searcher, why = translator.searcher(5) if translator is not None else (None, "no translator")
        if searcher is None:
            raise NotSupported(self.name, "search under constraints (finetune.augment)", why)
        return searcher.translate_constrained


# The translator group's names of the families in this package; a family elsewhere names itself (`family:`).
FAMILIES: dict[str, str | type] = {
    "fairseq": "repair.nmt.fairseq.family:FairseqFamily",
    "ctranslate2": "repair.nmt.fairseq.family:CTranslate2Family",
    "transformers": "repair.nmt.hf.family:TransformersFamily",
    "ctranslate2-transformers": "repair.nmt.hf.family:TransformersCTranslate2Family",
}
_loaded: dict[str, ModelFamily] = {}


def family_named(name: str, where: str | None = None) -> ModelFamily:
    """The family registered as `name` (where: "module:Class" for one outside the package, added here)."""
    from repair.registry import choose

    if name not in _loaded:
        table = {**FAMILIES, **({name: where} if where else {})}
        if name not in table:
            raise UserError(f"translator={name}: the loop tests, fine-tunes and verifies a model of a family; "
                            f"choose one of {', '.join(n for n in FAMILIES if '-' not in n)}")
        FAMILIES.setdefault(name, table[name])
        _loaded[name] = choose("translator", table, name)()
    return _loaded[name]


def family_for(cfg: Mapping[str, Any], model: str | Path | None = None) -> ModelFamily:
    """The family the translator group chooses, or the twin that serves `model` with the group's keys where the
    model is another family's (translator=fairseq given a transformers folder)."""
    chosen = family_named(cfg.get("name"), cfg.get("family"))
    if model:
        for owner, twin in chosen.twins.items():
            if family_named(owner).owns(model):
                return family_named(twin)
    return chosen


def owner_of(model: str | Path) -> ModelFamily:
    """The registered family whose model `model` is (those chosen so far first, then the package's)."""
    for name in [*_loaded, *FAMILIES]:
        family = family_named(name)
        if family.owns(model):
            return family
    raise UserError(f"{model}: no model family knows this model ({', '.join(FAMILIES)})")
