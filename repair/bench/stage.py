"""`python -m repair.bench.stage RUN_DIR STAGE [LOOP_OVERRIDES...]`: the loop in RUN_DIR up to STAGE, then stop.

The loop's own code (repair.loop.run_loop) with the configuration `python -m repair.loop` composes: the stages
before STAGE are resumed from their files (or run, in a new folder), STAGE runs, none after it (`report`: to the
end). The scale benchmark (repair.bench.scale) runs each stage in a process of its own this way, so that each
stage's time and peak memory are its process's; the stage's own seconds are in RUN_DIR/seconds.json, as ever.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import repair
from repair.errors import UserError, exit_on_user_error

STAGES = ("prepare", "train", "test", "review", "finetune", "verify", "report")
CONF = Path(repair.__file__).resolve().parents[1] / "conf"


def run_until(run_dir: Path, stage: str, overrides: list[str]) -> None:
    """The loop in run_dir with `overrides`, stopped once `stage` is done."""
    from hydra import compose, initialize_config_dir

    from repair.loop import StopAfter, run_loop

    if stage not in STAGES:
        raise UserError(f"stage {stage!r}: one of {', '.join(STAGES)}")
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose("loop", overrides=[*overrides, f"run_dir={run_dir}"])
    command = " ".join(["python -m repair.loop", *overrides, f"run_dir={run_dir}"])
    try:
        run_loop(cfg, run_dir, command, stop_after=None if stage == "report" else stage)
    except StopAfter:
        pass


@exit_on_user_error
def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print(__doc__.splitlines()[0].strip("`"), file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s",
                        stream=sys.stderr)
    run_until(Path(argv[0]), argv[1], argv[2:])


if __name__ == "__main__":
    main()
