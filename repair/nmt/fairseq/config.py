"""Build fairseq's training configuration in Python, safely from inside a running Hydra app.

fairseq turns command-line arguments into its structured config with
`convert_namespace_to_omegaconf`, which composes fairseq's own config tree through the
deprecated `hydra.experimental` API and clears Hydra's global state. Inside a Hydra app with
version_base >= 1.2 that API raises ImportError, and clearing the global state would break
the app. `hydra_isolated` saves Hydra's singletons, lets fairseq compose with 1.1 semantics,
and puts everything back.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from typing import Iterator, Sequence

from repair.errors import UserError

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def hydra_isolated() -> Iterator[None]:
    from hydra import version
    from hydra.core.singleton import Singleton
    from packaging.version import Version

    saved = Singleton.get_state()
    try:
        version.VersionBase.instance().setbase(Version("1.1"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        Singleton.set_state(saved)


def fairseq_option_args(options: dict) -> list[str]:
    """{"encoder_layers": 2, "share_all_embeddings": True} -> ["--encoder-layers", "2", "--share-all-embeddings"]."""
    out: list[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + str(key).replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            out += [flag, ",".join(str(v) for v in value)] if key != "adam_betas" else [flag, f"({value[0]}, {value[1]})"]
        else:
            out += [flag, str(value)]
    return out


def training_config(args: Sequence[str]):
    """fairseq-train's command-line arguments -> fairseq's FairseqConfig (DictConfig), in-process."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    complaint = io.StringIO()
    try:
        with contextlib.redirect_stderr(complaint):
            namespace = options.parse_args_and_arch(parser, input_args=list(args))
    except SystemExit:
        reason = complaint.getvalue().strip().splitlines()[-1:] or ["invalid options"]
        raise UserError(
            f"fairseq-train rejected the model config ({reason[0].split('error: ')[-1]}); every key of a model "
            f"config other than name/checkpoint/fp16/threads is a fairseq-train option, underscores for dashes"
        ) from None
    with hydra_isolated():
        return convert_namespace_to_omegaconf(namespace)
