"""repair: test an EN->ZH NMT model with Purity, correct its errors, fine-tune, re-verify."""

__version__ = "0.1.0"
