"""Hugging Face transformers models (MarianMT, NLLB-200, M2M100, mBART-50): translation, fine-tuning with LoRA
adapters, CTranslate2 conversion and constrained search, behind the same face as the fairseq backend."""
