"""A fine-tuning loss anchored to the base model: fairseq's label-smoothed cross-entropy, an L2 pull of the
trained weights toward the base model's, and only the parameters named trained.

    loss = label-smoothed CE (summed over target tokens) + l2 * target tokens * sum((w - w_base)^2)

The pull is scaled by the batch's tokens because fairseq divides the summed loss by them before the
gradient step: `l2` weighs the squared distance against the mean token loss. It acts in training only,
so the validation loss stays the plain cross-entropy the checkpoint is chosen by. Parameters outside
`trainable` (name prefixes; empty: all) are frozen before the first forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (LabelSmoothedCrossEntropyCriterion,
                                                             LabelSmoothedCrossEntropyCriterionConfig)

NAME = "anchored_label_smoothed_cross_entropy"


@dataclass
class AnchoredConfig(LabelSmoothedCrossEntropyCriterionConfig):
    anchor_l2: float = field(default=0.0, metadata={"help": "weight of the squared distance to the base weights"})
    anchor_checkpoint: str = field(default="", metadata={"help": "the base model's checkpoint (its weights)"})
    trainable: str = field(default="", metadata={"help": "comma-separated parameter name prefixes to train"})


@register_criterion(NAME, dataclass=AnchoredConfig)
class AnchoredCriterion(LabelSmoothedCrossEntropyCriterion):
    def __init__(self, task, sentence_avg, label_smoothing, ignore_prefix_size=0, report_accuracy=False,
                 anchor_l2=0.0, anchor_checkpoint="", trainable=""):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        self.l2 = float(anchor_l2)
        self.anchor_checkpoint = anchor_checkpoint
        self.prefixes = tuple(p.strip() for p in trainable.split(",") if p.strip())
        self._anchor: dict[str, torch.Tensor] | None = None

    def _prepare(self, model) -> None:
        if self._anchor is not None:
            return
        if self.prefixes:
            for name, p in model.named_parameters():
                p.requires_grad_(name.startswith(self.prefixes))
        self._anchor = {}
        if self.l2 > 0:
            from repair.nmt.fairseq.checkpoint import load_checkpoint

            base = load_checkpoint(self.anchor_checkpoint)["model"]
            for name, p in model.named_parameters():
                if p.requires_grad and name in base:
                    self._anchor[name] = base[name].to(device=p.device, dtype=p.dtype)

    def forward(self, model, sample, reduce=True):
        if model.training:
            self._prepare(model)
        loss, sample_size, logging_output = super().forward(model, sample, reduce=reduce)
        if model.training and self.l2 > 0 and self._anchor:
            params = dict(model.named_parameters())
            distance = sum(((params[n] - w) ** 2).sum() for n, w in self._anchor.items())
            loss = loss + self.l2 * sample["ntokens"] * distance
        return loss, sample_size, logging_output
