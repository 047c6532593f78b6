"""MLM-head tooling: find ``W_head`` in a Hugging Face masked-LM model, rescale it by ``k``, save and inspect it.

* :mod:`initlab.mlmhead.heads` -- family detection, ``W_head`` and its bias, tie detection, untying, rescaling
  (in place, or within a ``with`` block);
* :mod:`initlab.mlmhead.checkpoint` -- load a checkpoint (folder or hub id), save a rescaled copy atomically;
* :mod:`initlab.mlmhead.report` -- the scale report against k, with a recommended k;
* :mod:`initlab.mlmhead.tiny` -- tiny in-process tokenizers and masked-LM models (no downloads);
* :mod:`initlab.mlmhead.fused` -- SPLADE max pooling fused with the vocabulary projection (no ``B x T x V``
  tensor), beside its slow reference;
* :mod:`initlab.mlmhead.splade_encoder` -- that head inside a sentence-transformers SparseEncoder (``use_engine``).
"""

from initlab.mlmhead.checkpoint import load_masked_lm, save_rescaled
from initlab.mlmhead.fused import splade_max_pool, splade_reference
from initlab.mlmhead.heads import (FAMILIES, K_ATTR, K_GRID, family_of, head_bias, head_projection, is_tied, rescale_mlm_head,
                                   rescaled, untie_head)
from initlab.mlmhead.splade_encoder import ENGINES, engine_of, fuse_splade, use_engine
from initlab.mlmhead.report import format_inspect, inspect_model, recommend_k
from initlab.mlmhead.tiny import default_texts, tiny_masked_lm, tiny_tokenizer

__all__ = [
    "FAMILIES", "K_ATTR", "K_GRID", "family_of", "head_bias", "head_projection", "is_tied", "rescale_mlm_head",
    "rescaled", "untie_head",
    "load_masked_lm", "save_rescaled", "format_inspect", "inspect_model", "recommend_k", "default_texts",
    "tiny_masked_lm", "tiny_tokenizer", "splade_max_pool", "splade_reference",
    "ENGINES", "engine_of", "fuse_splade", "use_engine",
]
