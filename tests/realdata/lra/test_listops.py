"""ListOps generator: labels checked by an independent evaluator, LRA's layout and bounds."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from initlab.realdata.lra.data import read_listops_tsv
from initlab.realdata.lra.tokens import LISTOPS_TOKENS
from initlab.realdata.lra.listops import (ListOpsGenConfig, generate_examples, generate_tree, tree_to_string, tree_value,
                                          write_listops_tsv)


def independent_eval(source: str) -> int:
    """A token-stack evaluator written separately from the generator: parentheses are ignored; an
    operator opens a frame, ``]`` closes it and pushes the result to the enclosing frame."""
    stack: list[tuple[str, list[int]]] = [("ROOT", [])]
    for tok in source.split():
        if tok in ("(", ")"):
            continue
        if tok.startswith("["):
            stack.append((tok, []))
        elif tok == "]":
            op, args = stack.pop()
            s = sorted(args)
            n = len(s)
            if op == "[MIN":
                v = s[0]
            elif op == "[MAX":
                v = s[-1]
            elif op == "[SM":
                v = sum(s) % 10
            elif op == "[MED":
                v = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) // 2
            else:
                raise AssertionError(op)
            stack[-1][1].append(v)
        else:
            stack[-1][1].append(int(tok))
    assert len(stack) == 1 and len(stack[0][1]) == 1
    return stack[0][1][0]


def max_depth_and_args(source: str) -> tuple[int, int]:
    depth = best = max_args = 0
    counts = []
    for tok in source.split():
        if tok.startswith("["):
            depth += 1
            best = max(best, depth)
            counts.append(0)
        elif tok == "]":
            depth -= 1
            max_args = max(max_args, counts.pop())
            if counts:
                counts[-1] += 1
        elif tok not in ("(", ")") and counts:
            counts[-1] += 1
    return best, max_args


@given(st.integers(0, 2**31 - 1))
def test_lra_tree_labels_match_independent_evaluator(seed):
    rng = random.Random(seed)
    for _ in range(20):
        tree, length = generate_tree(rng, 1, 6, 6)
        s = tree_to_string(tree)
        assert tree_value(tree) == independent_eval(s)
        toks = [t for t in s.split() if t not in ("(", ")")]
        assert len(toks) == length  # LRA's length: one per value, two per operator


def test_lra_generate_examples_bounds_split_and_determinism():
    cfg = ListOpsGenConfig(n_train=60, n_val=20, n_test=20, max_depth=5, max_args=5, min_length=8, max_length=40, seed=3)
    ex = generate_examples(cfg)
    assert {k: len(v) for k, v in ex.items()} == {"train": 60, "val": 20, "test": 20}
    all_src = [s for v in ex.values() for s, _ in v]
    assert len(set(all_src)) == 100  # distinct, disjoint splits
    for s, y in (p for v in ex.values() for p in v):
        assert independent_eval(s) == y and 0 <= y <= 9
        n = len([t for t in s.split() if t not in ("(", ")")])
        assert 8 < n < 40
        depth, args = max_depth_and_args(s)
        assert depth <= 5 and 2 <= args <= 5
        assert set(s.split()) <= set(LISTOPS_TOKENS)
    assert generate_examples(cfg) == ex
    assert generate_examples(ListOpsGenConfig(**{**cfg.__dict__, "seed": 4})) != ex
    labels = {y for v in ex.values() for _, y in v}
    assert len(labels) >= 5  # all operators/values actually exercised


def test_lra_write_listops_tsv_reads_back_in_lra_layout(tmp_path):
    cfg = ListOpsGenConfig(n_train=10, n_val=5, n_test=5, max_depth=4, max_args=4, min_length=5, max_length=30, seed=1)
    paths = write_listops_tsv(tmp_path, cfg)
    assert sorted(p.name for p in paths.values()) == ["basic_test.tsv", "basic_train.tsv", "basic_val.tsv"]
    lines = (tmp_path / "basic_train.tsv").read_text().splitlines()
    assert lines[0] == "Source\tTarget" and len(lines) == 11
    seqs, labels = read_listops_tsv(tmp_path / "basic_train.tsv")
    assert labels == [independent_eval(line.split("\t")[0]) for line in lines[1:]]
    # existing data (e.g. the LRA release) is never silently replaced
    before = (tmp_path / "basic_train.tsv").read_text()
    with pytest.raises(FileExistsError, match="already holds .*basic_"):
        write_listops_tsv(tmp_path, ListOpsGenConfig(n_train=3, n_val=1, n_test=1, max_depth=4, max_args=4, min_length=5,
                                                      max_length=30, seed=2))
    assert (tmp_path / "basic_train.tsv").read_text() == before
    write_listops_tsv(tmp_path, cfg, overwrite=True)
    assert (tmp_path / "basic_train.tsv").read_text() == before  # same seed: same data


def test_lra_generator_rejects_impossible_bounds():
    with pytest.raises(ValueError, match="min_length"):
        generate_examples(ListOpsGenConfig(min_length=10, max_length=11))
