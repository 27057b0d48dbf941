"""A tiny English stanza model folder, laid out as `stanza.download` lays out a real one.

Built with stanza's own trainers from a few hand-written sentences in a few seconds; what it
parses is junk, but every file goes through stanza's real loading code. Shapes only, no accuracy.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

# Hand-written trees; their words and tags also train the tokenizer and the tagger.
TINY_TREEBANK = """
(ROOT (S (NP (DT The) (NN president)) (VP (VBD held) (NP (NP (JJ chummy) (JJ bilateral) (NNS talks))
  (PP (IN with) (NP (DT the) (JJ prime) (NN minister))))) (. .)))
(ROOT (S (NP (DT A) (JJ small) (NN dog)) (VP (VBD saw) (NP (DT the) (NN cat))) (. .)))
(ROOT (S (NP (PRP She)) (VP (VBD left) (PP (IN for) (NP (NNP Paris)))) (. .)))
"""
UPOS = {"DT": "DET", "NN": "NOUN", "NNS": "NOUN", "NNP": "PROPN", "VBD": "VERB", "JJ": "ADJ",
        "IN": "ADP", "PRP": "PRON", ".": "PUNCT"}
PACKAGE = "tiny"


def _trees():
    from stanza.models.constituency import tree_reader

    return tree_reader.read_trees(TINY_TREEBANK)


def _tagged_sentences(trees) -> list[list[tuple[str, str]]]:
    return [[(leaf.children[0].label, leaf.label) for leaf in tree.yield_preterminals()]
            for tree in trees]


def build_pretrain(path: Path, words) -> None:
    """stanza word vectors (random, 4 dimensions) from a word2vec-format text file."""
    from stanza.models.common.pretrain import Pretrain

    rng = random.Random(7)
    vectors = path.with_suffix(".txt")
    vocabulary = sorted(set(words))
    with open(vectors, "w", encoding="utf-8") as f:
        f.write(f"{len(vocabulary)} 4\n")
        for word in vocabulary:
            f.write(word + " " + " ".join(f"{rng.uniform(-1, 1):.3f}" for _ in range(4)) + "\n")
    Pretrain(str(path), str(vectors)).load()  # reads the text file, writes path
    vectors.unlink()


def build_constituency(path: Path, pretrain: Path, trees) -> None:
    from stanza.models import constituency_parser
    from stanza.models.common.foundation_cache import FoundationCache
    from stanza.models.common.utils import set_random_seed
    from stanza.models.constituency import parser_training

    set_random_seed(7)
    args = constituency_parser.parse_args([
        "--wordvec_pretrain_file", str(pretrain), "--pattn_num_layers", "0", "--lattn_d_proj", "0",
        "--hidden_size", "8", "--delta_embedding_dim", "4", "--tag_embedding_dim", "4",
    ])
    trainer, *_ = parser_training.build_trainer(args, trees, trees[-1:], [], FoundationCache(), None)
    trainer.save(str(path))


def build_tokenizer(path: Path, sentences, work: Path) -> None:
    """stanza's character-level tokenizer, trained for a few steps on the sentences."""
    from stanza.models import tokenizer as tokenizer_module
    from stanza.models.common.utils import set_random_seed

    texts, labels = [], []
    for words in sentences:
        chars, marks = [], []
        for i, word in enumerate(words):
            last = i == len(words) - 1
            chars.append(word)
            marks.append("0" * (len(word) - 1) + ("2" if last else "1"))
            if not last:
                chars.append(" ")
                marks.append("0")
        texts.append("".join(chars))
        labels.append("".join(marks))
    for split in ("train", "dev"):
        (work / f"{split}.txt").write_text("\n\n".join(texts) + "\n\n", encoding="utf-8")
        (work / f"{split}.label").write_text("\n\n".join(labels) + "\n\n", encoding="utf-8")
    (work / "mwt.json").write_text("[]", encoding="utf-8")
    args = tokenizer_module.parse_args([
        "--txt_file", str(work / "train.txt"), "--label_file", str(work / "train.label"),
        "--mwt_json_file", str(work / "mwt.json"),
        "--dev_txt_file", str(work / "dev.txt"), "--dev_label_file", str(work / "dev.label"),
        "--lang", "en", "--shorthand", "en_tiny", "--save_dir", str(work / "tokenize"),
        "--save_name", path.name, "--steps", "60", "--eval_steps", "60", "--report_steps", "60",
        "--lr0", "0.05", "--dropout", "0", "--unit_dropout", "0", "--tok_noise", "0",
        "--hidden_dim", "8", "--emb_dim", "4", "--rnn_layers", "1", "--device", "cpu",
    ])
    # What tokenizer.main sets up before it trains.
    args["feat_funcs"] = ["space_before", "capitalized", "numeric", "end_of_para", "start_of_para"]
    args["feat_dim"] = len(args["feat_funcs"])
    args["save_name"] = tokenizer_module.model_file_name(args)
    os.makedirs(os.path.dirname(args["save_name"]), exist_ok=True)
    set_random_seed(7)
    tokenizer_module.train(args)
    os.replace(args["save_name"], path)


def build_tagger(path: Path, pretrain: Path, tagged, work: Path) -> None:
    """stanza's POS tagger, trained for a few steps on CoNLL-U written from the tagged words."""
    from stanza.models import tagger

    blocks = []
    for words in tagged:
        rows = [f"{i}\t{w}\t{w.lower()}\t{UPOS[t]}\t{t}\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
                for i, (w, t) in enumerate(words, start=1)]
        blocks.append("\n".join(rows) + "\n")
    conllu = work / "tagged.conllu"
    conllu.write_text("\n".join(blocks) + "\n", encoding="utf-8")
    tagger.main([
        "--wordvec_pretrain_file", str(pretrain), "--train_file", str(conllu),
        "--eval_file", str(conllu), "--output_file", str(work / "pred.conllu"),
        "--shorthand", "en_tiny", "--lang", "en", "--save_dir", str(path.parent),
        "--save_name", path.name, "--max_steps", "4", "--eval_interval", "2", "--log_step", "2",
        "--augment_nopunct", "0.0", "--hidden_dim", "8", "--word_emb_dim", "4",
        "--char_hidden_dim", "8", "--char_emb_dim", "4", "--tag_emb_dim", "4",
        "--deep_biaff_hidden_dim", "8", "--composite_deep_biaff_hidden_dim", "8",
        "--transformed_dim", "8", "--batch_size", "8", "--device", "cpu",
    ])


def build_model_dir(model_dir: Path, work: Path) -> Path:
    """model_dir/resources.json and model_dir/en/{tokenize,pos,constituency,pretrain}/tiny.pt."""
    trees = _trees()
    tagged = _tagged_sentences(trees)
    words = [w for sentence in tagged for w, _ in sentence]
    lang = model_dir / "en"
    for processor in ("tokenize", "pos", "constituency", "pretrain"):
        (lang / processor).mkdir(parents=True, exist_ok=True)
    pretrain = lang / "pretrain" / f"{PACKAGE}.pt"
    build_pretrain(pretrain, words + ["<unk>"])
    build_constituency(lang / "constituency" / f"{PACKAGE}.pt", pretrain, trees)
    build_tokenizer(lang / "tokenize" / f"{PACKAGE}.pt", [[w for w, _ in s] for s in tagged], work)
    build_tagger(lang / "pos" / f"{PACKAGE}.pt", pretrain, tagged, work)
    needs_pretrain = {"dependencies": [{"model": "pretrain", "package": PACKAGE}]}
    resources = {"en": {
        "lang_name": "English",
        "packages": {"default": {"tokenize": PACKAGE, "pos": PACKAGE, "constituency": PACKAGE}},
        "default_processors": {"tokenize": PACKAGE, "pos": PACKAGE, "constituency": PACKAGE},
        "tokenize": {PACKAGE: {}}, "pos": {PACKAGE: needs_pretrain},
        "constituency": {PACKAGE: needs_pretrain}, "pretrain": {PACKAGE: {}},
    }}
    (model_dir / "resources.json").write_text(json.dumps(resources, indent=1), encoding="utf-8")
    return model_dir
