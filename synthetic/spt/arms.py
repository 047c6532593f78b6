"""The arms (conditions) of the synthetic SPT experiment, one :class:`Arm` entry each: the one table of them.

An arm is a recipe for one fine-tuned model per seed (which encoder, its depth, which SPT checkpoint it starts
from -- none for a *label-only* arm --, which parameter groups it loads and freezes, its budget, its model
overrides) and how the figures show it (its colour, and its own colour in the learning-curve figure). Everything
else reads this table: :func:`initlab.synthetic.spt.config.condition_spec` (the recipes), the label-only list
(:data:`initlab.synthetic.spt.config.LABEL_ONLY`), the plan's claim order (:data:`CLAIM_ORDER`), the run figures,
through the condition rows every run saves in its summary (``label_only``, ``colour``, ``curve_colour``:
:func:`initlab.synthetic.spt.report.summarize`), since the figure code sits below the experiments, and the README's
headline charts (:data:`HEADLINE`, read by :mod:`initlab.app.docgen.headline_figures`).

A new arm is one entry of :data:`ARMS` (and its place in :data:`CLAIM_ORDER`, if it should not run last, and in
:data:`HEADLINE`, if a README headline chart should show it under its ``label``); e.g. a
label-only arm with last-token pooling is ``Arm("lastpool_scratch", model=(("pooling", "last"),))``. The arms
that depend on a run's config (the SPT-epoch snapshots ``spt_e<E>``, the depth arms ``depth<L>_scratch`` /
``depth<L>_spt``) are made by :func:`arms` from its ``spt_sweep_epochs`` and ``depths``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Arm", "ARMS", "ALL_GROUPS", "HYBRIDS", "CLAIM_ORDER", "HEADLINE", "GREY", "BLUE", "ORANGE", "GREEN", "PURPLE",
           "arms", "headline_conditions"]

#: the parameter groups an SPT checkpoint can hand over (:func:`initlab.synthetic.spt.training.load_partial`)
ALL_GROUPS = ("embeddings", "qkvo", "ffn", "layernorm")
#: the hybrids: ``hybrid_<key>`` loads only these groups from SPT
HYBRIDS = {"qk": ("qk",), "qkvo": ("qkvo",), "ffn": ("ffn",), "qk_emb": ("qk", "embeddings"),
           "qk_ln": ("qk", "layernorm"), "qk_emb_ln": ("qk", "embeddings", "layernorm")}

#: the figures' colours of the arm groups: label-only (grey), SPT (blue), hybrids (orange), SPT on other data
#: (green), the attention-only model (purple)
GREY, BLUE, ORANGE, GREEN, PURPLE = "tab:gray", "tab:blue", "tab:orange", "tab:green", "tab:purple"

_VARIANTS = ("full", "attn_only")
_BUDGETS = ("early_stop", "matched")
_SOURCES = ("local", "count", "iid", "nopos")


@dataclass(frozen=True)
class Arm:
    """One arm of the synthetic SPT experiment.

    Recipe: ``variant`` (``full`` pre-norm model or the theorem's ``attn_only`` model), ``depth`` (layers),
    ``spt`` (``(source, epoch)`` of the SPT checkpoint it starts from, epoch ``"rule"`` or a snapshot epoch; None
    for a label-only arm), ``load`` / ``freeze`` (parameter groups taken from SPT / frozen at their start),
    ``budget`` (``early_stop``, or ``matched``: as many steps as SPT plus its fine-tuning), ``model`` (fixed
    :class:`initlab.nn.encoder.ModelConfig` overrides, ``(field, value)`` pairs), ``model_from_config``
    (``(ModelConfig field, SPTConfig field)`` pairs: overrides read from the run's config), ``qk_scale_from``
    (the SPTConfig field holding the factor on the initial W_Q, W_K; empty: 1).

    Figures: ``colour`` (default: grey for a label-only arm, else blue), ``curve_colour`` (its own colour in the
    learning-curve figure; empty: not drawn there) and ``label`` (its tick label in the README's headline charts,
    line breaks allowed; default: its name; which charts show it, and where, is :data:`HEADLINE`).

    Raises:
        ValueError: a field outside its allowed values (the message names the arm and the field).
    """

    name: str
    variant: str = "full"
    depth: int = 1
    spt: tuple[str, Any] | None = None
    load: tuple[str, ...] = ()
    freeze: tuple[str, ...] = ()
    budget: str = "early_stop"
    model: tuple[tuple[str, Any], ...] = ()
    model_from_config: tuple[tuple[str, str], ...] = ()
    qk_scale_from: str = ""
    colour: str = ""
    curve_colour: str = ""
    label: str = ""

    def __post_init__(self) -> None:
        where = f"Arm {self.name!r}"
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"Arm.name: expected letters, digits and underscores, got {self.name!r}")
        if self.variant not in _VARIANTS:
            raise ValueError(f"{where}: variant: expected one of {list(_VARIANTS)}, got {self.variant!r}")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 1:
            raise ValueError(f"{where}: depth: expected an int >= 1, got {self.depth!r}")
        if self.budget not in _BUDGETS:
            raise ValueError(f"{where}: budget: expected one of {list(_BUDGETS)}, got {self.budget!r}")
        if self.spt is not None and (len(self.spt) != 2 or self.spt[0] not in _SOURCES):
            raise ValueError(f"{where}: spt: expected None or (source, epoch) with a source of {list(_SOURCES)}, "
                             f"got {self.spt!r}")
        if self.spt is None and self.load:
            raise ValueError(f"{where}: load: a label-only arm (spt None) loads nothing, got {self.load!r}")
        if not self.colour:
            object.__setattr__(self, "colour", GREY if self.spt is None else BLUE)
        if not self.label:
            object.__setattr__(self, "label", self.name)

    @property
    def label_only(self) -> bool:
        """No SPT checkpoint: label training only."""
        return self.spt is None

    def spec(self, cfg: Any) -> dict[str, Any]:
        """The recipe as :func:`initlab.synthetic.spt.config.condition_spec` gives it, under the run config ``cfg``
        (an :class:`initlab.synthetic.spt.config.SPTConfig`)."""
        model = dict(self.model)
        model.update({field: getattr(cfg, src) for field, src in self.model_from_config})
        return dict(variant=self.variant, depth=self.depth, spt=self.spt, load=self.load, freeze=self.freeze,
                    budget=self.budget, model=model,
                    qk_scale=getattr(cfg, self.qk_scale_from) if self.qk_scale_from else 1.0)


_SPT = ("local", "rule")

#: every arm that does not depend on the run's config, in the order reports and figures show them (the arms of
#: :func:`arms` are inserted before ``cross_count``)
_HYBRID_LABELS = {"qkvo": "SPT\nW_Q,K,V,O\nonly", "qk": "SPT\nW_Q, W_K\nonly", "ffn": "SPT\nFFN only"}

ARMS: tuple[Arm, ...] = (
    Arm("scratch", curve_colour=GREY),
    Arm("scratch_matched", budget="matched", label="scratch,\ncompute-\nmatched"),
    Arm("spt", spt=_SPT, load=ALL_GROUPS, curve_colour=BLUE, label="SPT"),
    Arm("frozen_attn", freeze=("qkvo",), label="attention\nfrozen\nat init"),
    *(Arm(f"hybrid_{h}", spt=_SPT, load=groups, colour=ORANGE, label=_HYBRID_LABELS.get(h, ""))
      for h, groups in HYBRIDS.items()),
    Arm("cross_count", spt=("count", "rule"), load=ALL_GROUPS, colour=GREEN, label="SPT on\ncount-task\ninputs"),
    Arm("cross_iid", spt=("iid", "rule"), load=ALL_GROUPS, colour=GREEN, label="SPT on\ni.i.d.\ntokens"),
    Arm("attn_scratch", variant="attn_only", colour=PURPLE),
    Arm("attn_spt", variant="attn_only", spt=_SPT, load=("embeddings", "qkvo"), colour=PURPLE),
    Arm("attn_qk", variant="attn_only", spt=_SPT, load=("qk",), colour=PURPLE),
    # the causal arms: a proximity prior without SPT, a non-uniform start, last-token pooling, SPT without positions
    Arm("alibi_scratch", model_from_config=(("proximity_bias", "alibi_slope"),), curve_colour="tab:green",
        label="scratch with\na fixed\nproximity\nprior"),
    Arm("qkscale_scratch", qk_scale_from="qk_init_scale", curve_colour="tab:brown",
        label="scratch,\nW_Q, W_K x4\nat init"),
    Arm("lastpool_scratch", model=(("pooling", "last"),), curve_colour="tab:pink",
        label="scratch,\nlast-token\npooling"),
    Arm("spt_nopos", spt=("nopos", "rule"), load=ALL_GROUPS, curve_colour="tab:cyan",
        label="SPT without\nposition\ncodes"),
)

#: the README's headline charts (drawn by ``python -m initlab.app.docgen.headline_figures``): chart -> the arms it
#: shows, in reading order, each under its ``label``; an arm a run did not train is left out of the chart
HEADLINE: dict[str, tuple[str, ...]] = {
    "accuracy": ("scratch", "scratch_matched", "frozen_attn", "spt", "hybrid_qkvo", "hybrid_qk", "hybrid_ffn",
                 "spt_e10", "cross_count", "cross_iid"),
    "causal": ("scratch", "spt", "alibi_scratch", "spt_nopos", "qkscale_scratch", "lastpool_scratch"),
}

#: claim order: the arms a reader needs first run first (an arm not listed runs after every listed one)
CLAIM_ORDER = ("scratch", "spt", "scratch_matched", "frozen_attn", "hybrid_qkvo", "hybrid_qk", "hybrid_ffn", "spt_e10",
               "spt_e1", "spt_e5", "spt_e20", "spt_e40", "hybrid_qk_emb", "hybrid_qk_ln", "hybrid_qk_emb_ln",
               "attn_scratch", "attn_spt", "attn_qk", "alibi_scratch", "spt_nopos", "qkscale_scratch",
               "lastpool_scratch", "cross_count", "cross_iid", "depth2_scratch", "depth2_spt", "depth4_scratch",
               "depth4_spt")

_INSERT_BEFORE = "cross_count"


def arms(spt_sweep_epochs: tuple[int, ...] = (), depths: tuple[int, ...] = (1,),
         table: tuple[Arm, ...] | None = None) -> tuple[Arm, ...]:
    """Every arm of a run whose config has these ``spt_sweep_epochs`` and ``depths``: ``table`` (default
    :data:`ARMS`, read at call time) with the SPT-epoch snapshots ``spt_e<E>`` and the depth arms
    ``depth<L>_scratch`` / ``depth<L>_spt`` (L != 1) inserted before ``cross_count`` (at the end without it).

    Raises:
        ValueError: two arms share a name.
    """
    table = ARMS if table is None else table
    made = [Arm(f"spt_e{e}", spt=("local", e), load=ALL_GROUPS, label=f"SPT,\n{e} epochs") for e in spt_sweep_epochs]
    for L in depths:
        if L != 1:
            made += [Arm(f"depth{L}_scratch", depth=L), Arm(f"depth{L}_spt", depth=L, spt=_SPT, load=ALL_GROUPS)]
    names = [a.name for a in table]
    at = names.index(_INSERT_BEFORE) if _INSERT_BEFORE in names else len(table)
    out = (*table[:at], *made, *table[at:])
    seen = [a.name for a in out]
    dup = sorted({n for n in seen if seen.count(n) > 1})
    if dup:
        raise ValueError(f"synthetic SPT arms: names used twice: {dup}")
    return out


def headline_conditions(chart: str, spt_sweep_epochs: tuple[int, ...] = (), depths: tuple[int, ...] = (1,),
                        table: tuple[Arm, ...] | None = None) -> tuple[tuple[str, str], ...]:
    """``(name, label)`` of every arm the headline ``chart`` (a key of :data:`HEADLINE`) shows, in its reading order,
    among the arms of a run with these ``spt_sweep_epochs`` and ``depths`` (:func:`arms`; ``table`` as there).

    Raises:
        ValueError: ``chart`` is not a key of :data:`HEADLINE`.
    """
    if chart not in HEADLINE:
        raise ValueError(f"chart: expected one of {sorted(HEADLINE)}, got {chart!r}")
    by_name = {a.name: a for a in arms(spt_sweep_epochs, depths, table)}
    return tuple((n, by_name[n].label) for n in HEADLINE[chart] if n in by_name)
