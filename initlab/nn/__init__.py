"""Shared neural code: the sequence encoder, pooling, masking and attention metrics.

* :mod:`initlab.nn.encoder` -- the transformer encoder (W_Q/W_K/W_V/W_O, sinusoidal positions, mean
  pooling, a public ``causal`` option) used by the synthetic SPT runs and LRA;
* :mod:`initlab.nn.pooling` -- SPLADE max pooling and length-aware mean pooling;
* :mod:`initlab.nn.masking` -- token masking for masked reconstruction;
* :mod:`initlab.nn.attention_metrics` -- proximity mass, Toeplitz part, relative-position score, entropy.
"""
