"""Synthetic SPLADE on CPU: collapse under a large-norm MLM head, recovery by dividing the head by k.

The pieces both SPLADE experiments build on: the synthetic corpus with known relevance (:mod:`.data`), the tiny
masked-LM backbones (:mod:`.model` for BERT, :mod:`.families` for BERT, RoBERTa, ALBERT and ModernBERT), the
sentence-transformers ``SparseEncoder`` and its training recipe (:mod:`.train`, configured by :mod:`.config`)
and the measurements of a trained or untrained encoder (:mod:`.measure`). The experiment: the four-family phase
diagram that ``initlab synthetic splade`` and ``initlab reproduce`` run (:mod:`.phase`; an imposed head scale s,
the earlier inflation sweep's design, is its ``imposed-s*`` presets), and the collapse detector's calibration
(:mod:`.calibration`).
"""
