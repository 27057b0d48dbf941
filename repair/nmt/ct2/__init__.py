"""CTranslate2, the runtime both families convert their models for: the library imported (runtime), the converted
cache (cache), and the translator base that places a model, loads it and checks the fidelity of its compute types
(translator). Each family converts and translates its own models with it (repair.nmt.fairseq.ct2,
repair.nmt.hf.ct2)."""
