"""A stand-in SPLADE encoder for the evaluation tests: the evaluate API of a SparseEncoder (``encode_query``,
``encode_document``, ``device``) with term weight 1 per distinct known word, so that rankings follow from the texts."""

from __future__ import annotations

import torch

WORDS = "cat sofa dog rain sun tree".split()


class BagOfWords:
    """A stand-in encoder (the evaluate API of a SparseEncoder): term weight 1 per distinct known word."""

    device = torch.device("cpu")
    vocab = {w: j for j, w in enumerate(WORDS)}

    def _enc(self, texts, **_):
        rows = [[self.vocab[w] for w in sorted(set(t.split())) if w in self.vocab] for t in texts]
        idx = [[r for r, js in enumerate(rows) for _ in js], [j for js in rows for j in js]]
        return torch.sparse_coo_tensor(idx, torch.ones(len(idx[1])), (len(texts), len(self.vocab)), check_invariants=True)

    encode_query = encode_document = _enc
