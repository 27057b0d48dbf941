"""The scoped edit: a repair served as the fine-tuned model inside the scope of its corrections and the base model
outside it (repair.edit.scoped: the scope, its router, the taught words, the second opinion). What tests a
translator is repair.purity; this is what repairs one."""
