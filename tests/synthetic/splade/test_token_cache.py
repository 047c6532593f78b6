"""The token cache of the synthetic SPLADE encoder (:class:`initlab.synthetic.splade.train.TokenCache`): every batch
is the tokenizer's own, bit for bit, and an OOD training cell gives the same record with it as without it."""

from __future__ import annotations

import random

import pytest
import torch

from initlab.config import derive
from initlab.synthetic.splade.families import FamilyConfig, build_family_model, family_tokenizer
from initlab.synthetic.splade.ood import config as oc
from initlab.synthetic.splade.ood.cell import corpus_for, pretrain, run_cell
from initlab.synthetic.splade.train import TokenCache, load_encoder

TINY_BB = FamilyConfig(d=16, layers=1, heads=2, ffn=32, albert_embedding=8, max_len=40)


def _same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for k in a:
        if isinstance(a[k], torch.Tensor):
            assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), k
        else:
            assert a[k] == b[k], k


@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_every_batch_is_the_tokenizers_own(family, tmp_path):
    """Batches of queries and documents (some repeated, some truncated), at two lengths, through the cache and through
    the module's own preprocess: the same keys in the same order, the same dtypes, the same values."""
    corpus = corpus_for(oc.PRESETS["tiny"], 0)
    build_family_model(family, len(corpus.vocab), TINY_BB, seed=0).save_pretrained(tmp_path / "bb")
    family_tokenizer(family, corpus.vocab).save_pretrained(tmp_path / "bb")
    enc = load_encoder(tmp_path / "bb", 34, seed=0, engine="fused", token_cache=True)
    cache = enc.preprocess
    assert isinstance(cache, TokenCache)
    texts = [q for q, _ in corpus.train_pairs[:60]] + list(corpus.docs.values())[:60]
    rng = random.Random(0)
    for length in (34, 16, 8, 34):  # 16 and 8 truncate the documents; the rows are kept per length
        enc.max_seq_length = length
        for _ in range(15):
            batch = [rng.choice(texts) for _ in range(rng.randint(1, 12))]
            _same(enc.preprocess(batch), cache.inner(batch))
            _same(enc.preprocess(batch, task=None), cache.inner(batch, task=None))
    assert cache.hits > 0 and cache.misses > 0 and not cache.off
    # what the cache does not rebuild goes to the module unchanged: a prompt
    _same(enc.preprocess(texts[:3], prompt="q: "), cache.inner(texts[:3], prompt="q: "))
    # the vectors (what the evaluation reads) are the same tensors
    plain = load_encoder(tmp_path / "bb", 34, seed=0, engine="fused")
    assert not isinstance(plain.preprocess, TokenCache)
    for model in (enc, plain):
        model.max_seq_length = 34
    assert torch.equal(enc.encode(texts, convert_to_tensor=True, convert_to_sparse_tensor=False),
                       plain.encode(texts, convert_to_tensor=True, convert_to_sparse_tensor=False))


def test_an_ood_cell_gives_the_same_record_with_the_cache(tmp_path):
    """One OOD training cell (the default's fused head, float32, checkpoints and the plateau checks included) run
    twice from one backbone, with and without the cache: every number of the record is the same."""
    cfg = derive(oc.PRESETS["tiny"], families=("bert",), ks=(1.0,), max_steps=12, eval_every=4, checkpoints=(8,),
                 family_backbones={}, engine="fused")
    pretrain(str(tmp_path / "bb"), "bert", cfg, 0)
    recs = [run_cell(str(tmp_path / "bb"), cfg, "bert", 4.0, 0, str(tmp_path / f"work{c}"), token_cache=c)
            for c in (False, True)]
    for r in recs:
        for k in ("seconds", "cpu_seconds", "cpu_seconds_per_step"):
            r.pop(k)
    assert recs[0]["training"]["steps"] == 12 and set(recs[0]["training"]["checkpoints"]) == {"8", "12"}
    assert recs[0] == recs[1]
