"""The helper modules of this folder (``splade_loss_injection``: deterministic NaN/divergence injection into
the SPLADE loss; ``bag_of_words``: a stand-in encoder for the evaluation) importable by name, and the tiny saved SPLADE checkpoint the evaluation tests share."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def checkpoint(tmp_path):
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling, Transformer

    from initlab.mlmhead import tiny_masked_lm, tiny_tokenizer

    m = tmp_path / "m"
    tok = tiny_tokenizer(m)
    tiny_masked_lm("bert", len(tok), hidden=16, layers=1).save_pretrained(m)
    tok.save_pretrained(m)
    tr = Transformer(str(m), transformer_task="fill-mask", max_seq_length=32)
    SparseEncoder(modules=[tr, SpladePooling(pooling_strategy="max")]).save(str(tmp_path / "model"), safe_serialization=True)
    return tmp_path / "model"
