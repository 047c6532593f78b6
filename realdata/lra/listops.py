"""ListOps generator following the Long Range Arena's published one, writing the same TSV layout.

The generator mirrors ``lra_benchmarks/data/listops.py`` (Tay et al., "Long Range Arena", ICLR 2021;
after Nangia & Bowman 2018): a tree is a value ``0..9`` with probability ``1 - value_p`` (always a
value at ``max_depth``), otherwise an operator from ``[MIN``, ``[MAX``, ``[MED``, ``[SM`` (sum mod 10)
applied to ``2..max_args`` sub-trees. Its *length* counts one per value and two per operator
(the operator token and ``]``), and only trees with ``min_length < length < max_length`` are kept
(LRA: depth <= 10, <= 10 arguments, 500 < length < 2000, 96k/2k/2k distinct train/val/test trees).

The string form is LRA's, with parentheses around every binary node::

    ( ( ( [MAX 2 ) 9 ) ] )        -> 9

and the files are ``basic_train.tsv``, ``basic_val.tsv``, ``basic_test.tsv`` with a header
``Source<TAB>Target``. Median follows LRA's ``int(np.median(args))`` (mean of the two middle values
for an even count, truncated).

The tests check the labels with an evaluator written independently (a token-stack parser).
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from initlab.config import check_ranges, ranged
from initlab.runs import atomic_write_text, holds_run_folder

__all__ = ["ListOpsGenConfig", "OPERATORS", "generate_tree", "tree_to_string", "tree_value", "generate_examples", "write_listops_tsv"]

MIN, MAX, MED, SUM_MOD, END = "[MIN", "[MAX", "[MED", "[SM", "]"
OPERATORS = (MIN, MAX, MED, SUM_MOD)

# a tree is an int (a value) or a nested binary tuple, exactly LRA's representation:
# ((((op, v1), v2), ...), END)
Tree = Union[int, str, tuple]


@dataclass(frozen=True)
class ListOpsGenConfig:
    """Sizes for :func:`generate_examples`; the defaults are LRA's (``listops.py`` flags)."""

    n_train: int = ranged(96_000, "[1, inf)")
    n_val: int = ranged(2_000, "[1, inf)")
    n_test: int = ranged(2_000, "[1, inf)")
    max_depth: int = ranged(10, "[1, inf)")
    max_args: int = ranged(10, "[2, inf)")  # an operator takes 2 to max_args arguments
    min_length: int = ranged(500, "[1, inf)")
    max_length: int = ranged(2_000, "[1, inf)")
    value_p: float = ranged(0.25, "[0, 1]")
    seed: int = ranged(0, "[0, inf)")

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.min_length + 1 >= self.max_length:
            raise ValueError(f"min_length/max_length: need min_length + 1 < max_length, got {self.min_length}, "
                             f"{self.max_length}")


def generate_tree(rng: random.Random, depth: int, max_depth: int, max_args: int, value_p: float = 0.25) -> tuple[Tree, int]:
    """One random tree and its length (values count 1, operators 2). LRA's ``generate_tree``."""
    r = rng.random() if depth < max_depth else 1.0
    if r > value_p:
        return rng.choice(range(10)), 1
    length = 2
    values = []
    for _ in range(rng.randint(2, max_args)):
        sub, sub_len = generate_tree(rng, depth + 1, max_depth, max_args, value_p)
        values.append(sub)
        length += sub_len
    t: Tree = (rng.choice(OPERATORS), values[0])
    for v in values[1:]:
        t = (t, v)
    return (t, END), length


def tree_to_string(t: Tree) -> str:
    """LRA's ``to_string`` with parentheses around every binary node."""
    if isinstance(t, str):
        return t
    if isinstance(t, int):
        return str(t)
    return "( " + tree_to_string(t[0]) + " " + tree_to_string(t[1]) + " )"


def _apply(op: str, args: list[int]) -> int:
    if op == MIN:
        return min(args)
    if op == MAX:
        return max(args)
    if op == MED:
        return int(statistics.median(args))
    if op == SUM_MOD:
        return sum(args) % 10
    raise ValueError(f"unknown ListOps operator {op!r}")


def tree_value(t: Tree):
    """The label of a tree (LRA's ``to_value``): an int in ``0..9`` for a complete tree."""
    if not isinstance(t, tuple):
        return t
    left, right = tree_value(t[0]), tree_value(t[1])
    if left in OPERATORS:
        return (left, [right])
    if right == END:
        return _apply(left[0], left[1])
    return (left[0], left[1] + [right])


def generate_examples(cfg: ListOpsGenConfig) -> dict[str, list[tuple[str, int]]]:
    """Distinct trees split into ``train``/``val``/``test`` lists of ``(source, target)``.

    As in LRA, trees are drawn until enough *distinct* ones fall strictly inside the length bounds;
    splits are disjoint. Deterministic for a given ``cfg.seed``.

    Raises:
        ValueError: bounds that no tree can satisfy (e.g. ``min_length >= max_length``).
    """
    if cfg.min_length + 1 >= cfg.max_length:
        raise ValueError(f"min_length/max_length: need min_length + 1 < max_length, got {cfg.min_length}, {cfg.max_length}")
    if cfg.max_args < 2 or cfg.max_depth < 1:
        raise ValueError(f"max_args >= 2 and max_depth >= 1 required, got {cfg.max_args}, {cfg.max_depth}")
    rng = random.Random(cfg.seed)
    total = cfg.n_train + cfg.n_val + cfg.n_test
    seen: dict[str, int] = {}
    tries = 0
    while len(seen) < total:
        tries += 1
        if tries > 1000 * total + 100_000:
            raise ValueError(f"could not draw {total} distinct trees with {cfg.min_length} < length < {cfg.max_length}")
        tree, length = generate_tree(rng, 1, cfg.max_depth, cfg.max_args, cfg.value_p)
        if cfg.min_length < length < cfg.max_length:
            s = tree_to_string(tree)
            if s not in seen:
                seen[s] = tree_value(tree)
    items = list(seen.items())
    return {
        "train": items[: cfg.n_train],
        "val": items[cfg.n_train : cfg.n_train + cfg.n_val],
        "test": items[cfg.n_train + cfg.n_val :],
    }


@holds_run_folder("out_dir")
def write_listops_tsv(out_dir: str | Path, cfg: ListOpsGenConfig, overwrite: bool = False) -> dict[str, Path]:
    """Generate and write ``basic_{train,val,test}.tsv`` (header ``Source\\tTarget``) atomically.

    Raises:
        FileExistsError: ``out_dir`` already holds a ``basic_*.tsv`` (e.g. the LRA release) and not ``overwrite``.
    """
    out_dir = Path(out_dir)
    existing = sorted(str(p) for p in out_dir.glob("basic_*.tsv")) if out_dir.is_dir() else []
    if existing and not overwrite:
        raise FileExistsError(f"{out_dir}: already holds {existing[0]}{' ...' if len(existing) > 1 else ''}; "
                              "choose another folder or pass overwrite=True (--overwrite)")
    paths = {}
    for split, rows in generate_examples(cfg).items():
        text = "Source\tTarget\n" + "".join(f"{s}\t{v}\n" for s, v in rows)
        paths[split] = atomic_write_text(out_dir / f"basic_{split}.tsv", text)
    return paths
