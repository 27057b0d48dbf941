"""Train a fairseq EN->ZH transformer in-process, resuming from checkpoint_last.pt when rerun.

The model config (conf/model/*.yaml) names the backend options: `name`, `checkpoint` (null =
train here), `fp16` (auto | true | false), `threads`, and every other key is a fairseq-train
option written with underscores (`arch`, `encoder_layers`, `lr`, `max_tokens`, `max_epoch`,
...). Unknown keys are rejected by fairseq's own parser with a clear message.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Mapping

from repair.data.prepare import LANGS, SRC, TGT
from repair.errors import UserError
from repair.fileio import append_jsonl, read_jsonl
from repair.nmt.fairseq.checkpoint import force_weights_only, heal_checkpoints
from repair.nmt.device import set_threads, use_cuda, use_fp16
from repair.nmt.fairseq.config import fairseq_option_args, training_config

logger = logging.getLogger(__name__)

# Keys of a model config that are ours, not fairseq-train options.
OWN_KEYS = {"name", "checkpoint", "fp16", "threads", "description"}


def check_binarized(bin_dir: Path, splits=("train", "valid")) -> None:
    missing = [bin_dir / f"dict.{l}.txt" for l in LANGS if not (bin_dir / f"dict.{l}.txt").is_file()]
    missing += [bin_dir / f"{s}.{SRC}-{TGT}.{l}.bin" for s in splits for l in LANGS
                if not (bin_dir / f"{s}.{SRC}-{TGT}.{l}.bin").is_file()]
    if missing:
        raise UserError("binarized data missing (run data preparation first):\n" + "\n".join(f"  {p}" for p in missing))


class StopTraining(Exception):
    """A run_training `stop_when` said the epoch just saved is the last."""

    def __init__(self, epoch: int):
        super().__init__(f"stopped after epoch {epoch}")
        self.epoch = epoch


class EpochLog(logging.Handler):
    """Collects fairseq's end-of-epoch summaries (JSON progress format) as they are logged; `stop_when(epoch)`
    is asked after each epoch's train summary, which fairseq logs once the epoch's checkpoints are saved."""

    def __init__(self, on_record=None, stop_when=None):
        super().__init__(logging.INFO)
        self.records: list[dict] = []
        self.on_record = on_record
        self.stop_when = stop_when

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if not msg.startswith("{"):
            return
        try:
            stats = json.loads(msg)
        except ValueError:
            return
        keys = set(stats)
        if "epoch" in keys and ("train_loss" in keys or "valid_loss" in keys):
            row = {"epoch": int(stats["epoch"])}
            for k in ("train_loss", "train_nll_loss", "valid_loss", "valid_nll_loss", "train_num_updates", "train_wall"):
                if k in stats:
                    row[k] = float(stats[k])
            self.records.append(row)
            if self.on_record:
                self.on_record(row)
            if self.stop_when is not None and "train_loss" in row and self.stop_when(row["epoch"]):
                raise StopTraining(row["epoch"])  # out of fairseq's training loop, to run_training


# fairseq_cli.train's messages when it ends a training before max_epoch, and what each means
STOP_MESSAGES = (("early stop since valid performance", "patience"), ("Stopping training due to num_updates", "max_update"),
                 ("Stopping training due to cumulative_training_time", "stop_time_hours"),
                 ("stopping training because current learning rate", "stop_min_lr"))


LOADED = re.compile(r"Loaded checkpoint .* \(epoch (\d+) @ \d+ updates\)")  # fairseq.trainer, at a resume


class StopLog(logging.Handler):
    """Why fairseq's training loop ended early: the first of its stop messages logged (`reason`, `message`), and the
    epoch of the checkpoint it resumed from (`loaded_epoch`), heard on fairseq.trainer."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.reason: str | None = None
        self.message: str | None = None
        self.loaded_epoch: int | None = None

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage() if isinstance(record.msg, str) else ""
        loaded = LOADED.match(msg)
        if loaded:
            self.loaded_epoch = int(loaded.group(1))
        for start, reason in STOP_MESSAGES:
            if msg.startswith(start) and self.reason is None:
                self.reason, self.message = reason, msg

    def reason_at(self, last_epoch: int | None, max_epoch: int | None) -> str:
        """What ended the training: the stop message heard; else max_epoch where the last epoch trained (or the one
        resumed from) is max_epoch; else `unknown` (the loop ended and nothing said why)."""
        if self.reason:
            return self.reason
        last = last_epoch if last_epoch is not None else self.loaded_epoch
        return "max_epoch" if max_epoch and last is not None and last >= max_epoch else "unknown"


class ObjectDumps(logging.Filter):
    """Drops fairseq_cli.train's dumps of whole objects (the full config, the model's repr): hundreds
    of lines at every training start. The configuration stays in each checkpoint's `cfg`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return isinstance(record.msg, str)


def run_training(cfg, on_epoch=None, stop_when=None, stop: dict | None = None) -> list[dict]:
    """fairseq's trainer on a FairseqConfig, in this process (several processes on several GPUs).
    stop_when(epoch): asked after each epoch is saved; True ends the training there (one process only).
    stop: given a dict, it gets why the training ended (`reason`: stop_when, patience, max_update, stop_time_hours,
    stop_min_lr, max_epoch, already_stopped, or unknown where
    nothing said why; `message`: fairseq's words where it said why; `epoch`)."""
    stop = {} if stop is None else stop
    from fairseq import checkpoint_utils, distributed_utils
    from fairseq_cli import train as fairseq_train

    # fairseq keeps the best validation loss and the patience count as function attributes:
    # a second training in the same process would compare against the first one's.
    for fn, attrs in ((checkpoint_utils.save_checkpoint, ("best",)), (fairseq_train.should_stop_early, ("best", "num_runs"))):
        for attr in attrs:
            if hasattr(fn, attr):
                delattr(fn, attr)
    force_weights_only()  # a checkpoint_last.pt from elsewhere never runs code, whatever the environment
    heal_checkpoints(cfg.checkpoint.save_dir)  # a run killed while fairseq copied a checkpoint
    best, runs, stopped = patience_state(cfg)
    if stopped:
        logger.info("%s: this training already stopped early (no better valid loss for %d epochs); nothing to resume",
                    Path(cfg.checkpoint.save_dir) / "checkpoint_last.pt", runs)
        stop.update(reason="already_stopped", message=f"no better validation loss for {runs} epochs")
        return []
    if best is not None:  # a resumed run counts the epochs without improvement from where it was
        fairseq_train.should_stop_early.best, fairseq_train.should_stop_early.num_runs = best, runs
    handler = EpochLog(on_epoch, stop_when)
    progress_logger = logging.getLogger("fairseq.logging.progress_bar")
    progress_logger.addHandler(handler)
    dumps, cli_logger, stops = ObjectDumps(), logging.getLogger("fairseq_cli.train"), StopLog()
    loads = logging.getLogger("fairseq.trainer")
    cli_logger.addFilter(dumps)
    cli_logger.addHandler(stops)
    loads.addHandler(stops)
    cli_level = cli_logger.level
    if cli_logger.getEffectiveLevel() > logging.INFO:  # its stop messages are INFO: heard whatever the caller's level
        cli_logger.setLevel(logging.INFO)
    # fairseq's loggers must reach the console even when the caller configured logging otherwise.
    fairseq_logger = logging.getLogger("fairseq")
    if fairseq_logger.getEffectiveLevel() > logging.INFO:
        fairseq_logger.setLevel(logging.INFO)
    try:
        distributed_utils.call_main(cfg, fairseq_train.main)
    except StopTraining as stopped:
        logger.info("training %s: %s", stopped, cfg.checkpoint.save_dir)
        stops.reason, stops.message = "stop_when", str(stopped)
    finally:
        progress_logger.removeHandler(handler)
        cli_logger.removeFilter(dumps)
        cli_logger.removeHandler(stops)
        loads.removeHandler(stops)
        cli_logger.setLevel(cli_level)
    epochs = [r["epoch"] for r in handler.records]
    last = max(epochs) if epochs else None
    stop.update(reason=stops.reason_at(last, cfg.optimization.max_epoch), epoch=last,
                **({"message": stops.message} if stops.message else {}))
    return handler.records


def patience_state(cfg) -> tuple[float | None, int, bool]:
    """(best valid loss, epochs since it, stopped) of the run being resumed in cfg's save_dir.

    fairseq keeps its early-stopping count in memory only: a run resumed from checkpoint_last
    would start counting again, and one that had already stopped early would train on. The count
    is replayed from the epochs logged in curve.jsonl whose checkpoint was written (fairseq logs an
    epoch's train summary after saving it), with fairseq's rule and its rounded losses.
    """
    c = cfg.checkpoint
    save_dir = Path(c.save_dir)
    if c.patience <= 0 or c.best_checkpoint_metric != "loss" or not (save_dir / "checkpoint_last.pt").is_file():
        return None, 0, False
    better = (lambda a, b: a > b) if c.maximize_best_checkpoint_metric else (lambda a, b: a < b)
    best, runs = None, 0
    for row in read_curve(save_dir):
        if "train_loss" not in row or row.get("valid_loss") is None:
            continue
        if best is None or better(row["valid_loss"], best):
            best, runs = row["valid_loss"], 0
        else:
            runs += 1
            if runs >= c.patience:
                return best, runs, True
    return best, runs, False


def _merge_epochs(records: list[dict]) -> list[dict]:
    by_epoch: dict[int, dict] = {}
    for r in records:
        by_epoch.setdefault(r["epoch"], {"epoch": r["epoch"]}).update(r)
    return [by_epoch[e] for e in sorted(by_epoch)]


def train_args(bin_dir: Path, save_dir: Path, options: Mapping[str, Any], *, seed: int, cuda: bool, fp16: bool) -> list[str]:
    base = {
        "task": "translation", "source_lang": SRC, "target_lang": TGT,
        "save_dir": str(save_dir), "seed": seed,
        "log_format": "json", "log_interval": 50,
        "no_epoch_checkpoints": True, "skip_invalid_size_inputs_valid_test": True,
        "best_checkpoint_metric": "loss",
        "num_workers": 0 if not cuda else 2,
        "cpu": not cuda, "fp16": fp16,
    }
    base.update({k: v for k, v in options.items()})
    return [str(bin_dir)] + fairseq_option_args(base)


def train_model(
    data_dir: str | os.PathLike,
    save_dir: str | os.PathLike,
    model_cfg: Mapping[str, Any],
    *,
    seed: int = 1,
    max_epoch: int | None = None,
    max_update: int | None = None,
    device: str = "auto",
    threads: int | None = None,
    extra_options: Mapping[str, Any] | None = None,
) -> Path:
    """Train (or continue training) the model of `model_cfg` on <data_dir>/bin; returns checkpoint_best.pt.

    Rerunning with the same save_dir resumes from its checkpoint_last.pt (mid-epoch when the
    config sets save_interval_updates); a finished training returns at once.
    """
    cfg_dict = dict(model_cfg)
    bin_dir = Path(data_dir) / "bin"
    check_binarized(bin_dir)
    save_dir = Path(save_dir)
    save_dir.mkdir(parents=True, exist_ok=True)
    cuda = use_cuda(device)
    fp16 = use_fp16(cfg_dict.get("fp16", "auto"), cuda)
    set_threads(threads or cfg_dict.get("threads"), cuda)
    options = {k: v for k, v in cfg_dict.items() if k not in OWN_KEYS}
    if max_epoch is not None:
        options["max_epoch"] = max_epoch
    if max_update is not None:
        options["max_update"] = max_update
    options.update(extra_options or {})
    if "arch" not in options:
        raise UserError("model config has no `arch` (a fairseq architecture such as transformer_wmt_en_de_big)")
    args = train_args(bin_dir, save_dir, options, seed=seed, cuda=cuda, fp16=fp16)
    logger.info("training %s in %s", cfg_dict.get("name", options["arch"]), save_dir)
    cfg = training_config(args)
    run_training(cfg, on_epoch=lambda row: append_jsonl(save_dir / "curve.jsonl", row))
    best = save_dir / "checkpoint_best.pt"
    if not best.is_file():
        raise UserError(f"training finished without writing {best}; see fairseq's log above")
    return best


def read_curve(save_dir: str | os.PathLike) -> list[dict]:
    """Per-epoch losses logged by train_model/finetune_model in save_dir (the latest record per epoch)."""
    path = Path(save_dir) / "curve.jsonl"
    return _merge_epochs(read_jsonl(path)) if path.is_file() else []


def load_model_file(path: str | os.PathLike):
    """A conf/model/*.yaml file's options (an OmegaConf config)."""
    from omegaconf import OmegaConf

    loaded = OmegaConf.load(path)
    # A model file written as a global package (`model:` under a `defaults:` list) carries it one level down.
    if "arch" not in loaded and "model" in loaded:
        loaded = loaded.model
    return loaded


def main(argv: list[str] | None = None) -> None:
    """`python -m repair.nmt.fairseq.train DATA_DIR SAVE_DIR MODEL.yaml [key=value ...]`: training alone.

    The command to put behind torchrun for several nodes; on one machine every GPU is used
    without it. key=value pairs override the model config (e.g. max_update=1000 lr=7e-4).
    """
    import sys

    from omegaconf import OmegaConf

    from repair.errors import exit_on_user_error

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3:
        print("usage: python -m repair.nmt.fairseq.train DATA_DIR SAVE_DIR MODEL.yaml [key=value ...]", file=sys.stderr)
        sys.exit(2)

    @exit_on_user_error
    def run() -> None:
        path = Path(argv[2])
        if not path.is_file():
            raise UserError(f"model config {path} not found (see conf/model/)")
        try:
            cfg = OmegaConf.merge(load_model_file(path), OmegaConf.from_dotlist(argv[3:]))
        except Exception as e:
            raise UserError(f"{path} or overrides {argv[3:]}: {e}") from None
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
        print(train_model(argv[0], argv[1], OmegaConf.to_container(cfg, resolve=True)))

    run()


if __name__ == "__main__":
    main()
