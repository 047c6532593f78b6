"""The out-of-domain synthetic SPLADE: a generated multi-domain corpus with a real-sized vocabulary,
BM25 as the lexical anchor, SPLADE trained to a dev-loss plateau, out-of-domain nDCG@10 as the primary metric."""
