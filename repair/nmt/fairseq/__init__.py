"""The fairseq family: a fairseq checkpoint (.pt, or a model folder holding model.pt) translated in-process
(translator) or, converted, with CTranslate2 (ct2), trained and fine-tuned with fairseq (train, finetune), its
constrained search (constrained) and checks (modelcheck, probe); registered in repair.face.FAMILIES (family)."""
