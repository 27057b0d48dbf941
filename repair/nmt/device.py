"""The one device rule: where a model runs, and whether it runs in fp16."""

from __future__ import annotations

from repair.errors import UserError


def torch_device(device: str = "auto", what: str = "device") -> str:
    """`auto` is CUDA when torch sees a device, else the CPU; asking for CUDA without one is a UserError
    (`what` names the key in it)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"{what}={device} asked for, but torch sees no CUDA device")
    return device


def use_cuda(device: str = "auto") -> bool:
    return torch_device(device).startswith("cuda")


def use_fp16(fp16: bool | str, cuda: bool) -> bool:
    """fp16 (auto | true | false) is used on CUDA only; auto means yes there."""
    return cuda and fp16 in (True, "auto", "true")


def set_threads(threads: int | None, cuda: bool) -> None:
    """torch's CPU threads, when given and the model runs on the CPU."""
    import torch

    if threads and not cuda:
        torch.set_num_threads(int(threads))
