"""The synthetic SPT claims, one verdict function each, on raw per-seed numbers, and their table (:data:`CLAIMS`,
the families :data:`SPT_FAMILIES`, :func:`evaluate_corrected`).

Imported as ``initlab.synthetic.spt.claims``. Every consumer (the run's ``report.md``, the README claims
table, the docs pages, the generated tables) calls these functions on the saved per-seed values; nobody
reads a saved verdict word. A claim function takes

* ``raw``: ``{condition: {seed: {"test_acc": float, "prox_start": float, "prox_end": float, ...}}}`` --
  test accuracy as a fraction (at the best validation epoch), first-layer proximity mass at the start and
  the end of fine-tuning (see :mod:`initlab.nn.attention_metrics`);
* ``th``: the preregistered :class:`SPTThresholds` (saved in the run's config),

and returns a :class:`initlab.evidence.rules.Verdict` (``not run`` when a condition is absent). Conditions
are named as in :mod:`initlab.synthetic.spt` (``scratch`` = label training with the learning rate chosen on
validation, ``scratch_matched`` = label training for as many optimiser steps as SPT + fine-tuning, ``spt``,
``hybrid_<groups>``, ``spt_e<E>``, ``frozen_attn``, ``depth<L>_<...>``, ``cross_<source>``, ``attn_<...>``).
The rules are those of :mod:`initlab.evidence.rules`; claim by claim:

* ``spt_gain``: gain of ``spt`` over ``scratch`` in test accuracy, δ = ``min_gain``;
* ``spt_gain_matched``: gain of ``spt`` over the compute-matched ``scratch_matched``, δ = ``min_gain``;
* ``proximity``: all of (a) gain of ``spt`` over ``scratch`` in proximity mass at fine-tuning start,
  δ = ``min_prox_gain``, and (b) label training forms no proximity pattern: ``scratch``'s proximity mass at
  the end of fine-tuning equivalent to its value at the start within ± ``prox_margin``;
* ``qkvo``, ``qk``: share of the SPT gain recovered by ``hybrid_qkvo`` / ``hybrid_qk``, σ = ``min_share``;
* ``few_epochs``: share recovered by ``spt_e<few_epochs>`` (a fixed, preregistered SPT epoch count);
* ``frozen_attn``, ``ffn``: ``frozen_attn`` / ``hybrid_ffn`` equivalent to ``scratch`` within ± ``margin``;
* ``depth``: all of the SPT gains at every depth in the run, each against its own scratch;
* ``cross_data``: all of the gains of ``cross_count`` and ``cross_iid`` over ``scratch``;
* ``mech_<cond>``: share of ``spt``'s (``attn_spt``'s) gain recovered by the QK-plus hybrids (mechanism
  analyses, not seed claims).

The causal claims (interventions on the explanation; predictions and refutations in docs/synthetic_spt.md):

* ``causal_prior``: a label-only model given a fixed proximity prior (``alibi_scratch``, an ALiBi distance bias)
  recovers at least ``min_share`` of the SPT gain (share of ``spt − scratch``);
* ``causal_nopos``: SPT by a model without position codes (``spt_nopos``) recovers at least ``min_share`` of the
  SPT gain (share of ``spt − scratch``; the explanation predicts *not reproduced*);
* ``causal_nonuniform``: a non-uniform random start (``qkscale_scratch``) gains at least ``min_gain`` over scratch;
* ``causal_pooling``: last-token pooling (``lastpool_scratch``) gains at least ``min_gain`` over mean pooling.

Family-wise error control (Holm within the declared primary and secondary families) is applied on top of these
functions by :mod:`initlab.evidence.families` (:func:`evaluate_corrected`).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from initlab.config import check_ranges, from_dict, ranged
from initlab.evidence import families, rules
from initlab.evidence.families import Family
from initlab.evidence.rules import Verdict

__all__ = ['Raw', 'SPTThresholds', 'spt_gain', 'spt_gain_matched', 'proximity', 'qkvo', 'qk', 'few_epochs', 'frozen_attn', 'ffn', 'depth', 'cross_data', 'causal_prior', 'causal_nopos', 'causal_nonuniform', 'causal_pooling', 'mechanism', 'ClaimSpec', 'CLAIMS', 'FAMILY_TEXT', 'spt_families', 'SPT_FAMILIES', 'evaluate_all', 'evaluate_corrected', 'seed_plan', 'by_id', 'as_raw']

Raw = Mapping[str, Mapping[int, Mapping[str, float]]]


@dataclass(frozen=True)
class SPTThresholds:
    """Preregistered thresholds of the SPT claims; accuracies and proximity masses as fractions.

    ``min_gain`` a large gain (0.05 = 5 points); ``margin`` the equivalence margin (± 3 points); ``min_share``
    "most of the gain"; ``min_prox_gain`` the proximity-mass gain at fine-tuning start that counts as a
    pattern (0.05: about doubling uniform attention's 0.049 at T = 100, w = 2); ``prox_margin`` the margin
    within which label training leaves proximity unchanged; ``few_epochs`` the SPT epoch count that is
    "few". Tolerances: an interval end within ``tol`` (accuracy and proximity) or ``share_tol`` (shares)
    of a threshold counts as touching it; 0.002 is about one test sequence in 512.
    """

    min_gain: float = ranged(0.05, "(0, 1]")
    margin: float = ranged(0.03, "(0, 1]")
    min_share: float = ranged(0.5, "(0, 1]")
    min_prox_gain: float = ranged(0.05, "(0, 1]")
    prox_margin: float = ranged(0.02, "(0, 1]")
    few_epochs: int = ranged(10, "[1, inf)")
    tol: float = ranged(0.002, "[0, 0.05)")
    share_tol: float = ranged(0.01, "[0, 0.05)")

    def __post_init__(self) -> None:
        check_ranges(self)


def _values(raw: Raw, cond: str, key: str) -> dict[int, float] | None:
    per_seed = raw.get(cond)
    if not per_seed:
        return None
    return {int(s): float(v[key]) for s, v in per_seed.items()}


def _diff(raw: Raw, cond: str, control: str, key: str = "test_acc", seeds: set[int] | None = None) -> list[float] | None:
    """Per-seed ``cond - control`` over ``cond``'s seeds (only those in ``seeds`` when given), in seed order."""
    a, b = _values(raw, cond, key), _values(raw, control, key)
    if a is None or b is None:
        return None
    if seeds is not None:
        a = {s: v for s, v in a.items() if s in seeds}
    return rules.paired_differences(a, b, f"{cond} - {control} ({key})")


def _missing(raw: Raw, *conds: str) -> list[str]:
    return [c for c in conds if not raw.get(c)]


def _gain(raw: Raw, cond: str, control: str, th: SPTThresholds, key: str = "test_acc", delta: float | None = None) -> Verdict:
    miss = _missing(raw, cond, control)
    if miss:
        return rules.not_run("gain", miss)
    return rules.gain(_diff(raw, cond, control, key), min_gain=th.min_gain if delta is None else delta, tol=th.tol)


def _share(raw: Raw, cond: str, control: str, full: str, th: SPTThresholds) -> Verdict:
    miss = _missing(raw, cond, control, full)
    if miss:
        return rules.not_run("share", miss)
    common = {int(s) for s in raw[cond]} & {int(s) for s in raw[full]}  # both gains paired on the same seeds
    return rules.share(_diff(raw, cond, control, seeds=common), _diff(raw, full, control, seeds=common),
                       min_share=th.min_share, tol=th.share_tol)


def _equivalent(raw: Raw, cond: str, control: str, th: SPTThresholds) -> Verdict:
    miss = _missing(raw, cond, control)
    if miss:
        return rules.not_run("equivalence", miss)
    return rules.equivalence(_diff(raw, cond, control), margin=th.margin, tol=th.tol)


def spt_gain(raw: Raw, th: SPTThresholds) -> Verdict:
    """SPT beats label training from scratch (tuned learning rate) by at least ``min_gain``, at depth 1."""
    return _gain(raw, "spt", "scratch", th)


def spt_gain_matched(raw: Raw, th: SPTThresholds) -> Verdict:
    """SPT beats label training given as many optimiser steps as SPT + fine-tuning together."""
    return _gain(raw, "spt", "scratch_matched", th)


def proximity(raw: Raw, th: SPTThresholds) -> Verdict:
    """SPT starts fine-tuning with a proximity pattern; label training does not form one."""
    miss = _missing(raw, "spt", "scratch")
    if miss:
        return rules.not_run("all_of", miss)
    formed = _gain(raw, "spt", "scratch", th, key="prox_start", delta=th.min_prox_gain)
    start, end = _values(raw, "scratch", "prox_start"), _values(raw, "scratch", "prox_end")
    unchanged = rules.equivalence(rules.paired_differences(end, start, "scratch prox_end - prox_start"),
                                  margin=th.prox_margin, tol=th.tol)
    return rules.all_of([formed, unchanged])


def qkvo(raw: Raw, th: SPTThresholds) -> Verdict:
    """Initialising only W_Q, W_K, W_V, W_O from SPT recovers at least ``min_share`` of the SPT gain."""
    return _share(raw, "hybrid_qkvo", "scratch", "spt", th)


def qk(raw: Raw, th: SPTThresholds) -> Verdict:
    """Initialising only W_Q, W_K from SPT recovers at least ``min_share`` of the SPT gain (one layer)."""
    return _share(raw, "hybrid_qk", "scratch", "spt", th)


def few_epochs(raw: Raw, th: SPTThresholds) -> Verdict:
    """``few_epochs`` SPT epochs already recover at least ``min_share`` of the gain of SPT to its rule's epoch."""
    return _share(raw, f"spt_e{th.few_epochs}", "scratch", "spt", th)


def frozen_attn(raw: Raw, th: SPTThresholds) -> Verdict:
    """Attention frozen at its random init fine-tunes as well as label training (within ± ``margin``)."""
    return _equivalent(raw, "frozen_attn", "scratch", th)


def ffn(raw: Raw, th: SPTThresholds) -> Verdict:
    """Initialising only the FFN from SPT gives nothing (equivalent to scratch within ± ``margin``)."""
    return _equivalent(raw, "hybrid_ffn", "scratch", th)


def depth(raw: Raw, th: SPTThresholds) -> Verdict:
    """The SPT gain holds at every depth of the run (depth 1 and each ``depth<L>_spt`` vs its scratch)."""
    depths = sorted({int(c[len("depth"):].split("_")[0]) for c in raw if c.startswith("depth") and c.endswith("_spt")})
    if not depths:
        return rules.not_run("all_of", ["depth<L>_spt (no other depth in the run)"])
    parts = [spt_gain(raw, th)] + [_gain(raw, f"depth{L}_spt", f"depth{L}_scratch", th) for L in depths]
    return rules.all_of(parts)


def cross_data(raw: Raw, th: SPTThresholds) -> Verdict:
    """SPT on other inputs (count-task inputs, i.i.d. tokens) gains too."""
    return rules.all_of([_gain(raw, "cross_count", "scratch", th), _gain(raw, "cross_iid", "scratch", th)])


def causal_prior(raw: Raw, th: SPTThresholds) -> Verdict:
    """A fixed proximity prior without SPT (``alibi_scratch``) recovers at least ``min_share`` of the SPT gain."""
    return _share(raw, "alibi_scratch", "scratch", "spt", th)


def causal_nopos(raw: Raw, th: SPTThresholds) -> Verdict:
    """SPT without position codes (``spt_nopos``) recovers at least ``min_share`` of the SPT gain (the explanation
    predicts it does not: no position codes, no proximity pattern to learn)."""
    return _share(raw, "spt_nopos", "scratch", "spt", th)


def causal_nonuniform(raw: Raw, th: SPTThresholds) -> Verdict:
    """A non-uniform random start (W_Q, W_K scaled up at init) gains at least ``min_gain`` over scratch."""
    return _gain(raw, "qkscale_scratch", "scratch", th)


def causal_pooling(raw: Raw, th: SPTThresholds) -> Verdict:
    """Last-token pooling gains at least ``min_gain`` over mean pooling in label training from scratch."""
    return _gain(raw, "lastpool_scratch", "scratch", th)


def mechanism(cond: str, control: str, full: str) -> Callable[[Raw, SPTThresholds], Verdict]:
    """A mechanism row: ``cond`` recovers at least ``min_share`` of ``full``'s gain over ``control``."""

    def claim(raw: Raw, th: SPTThresholds) -> Verdict:
        return _share(raw, cond, control, full, th)

    claim.__name__ = f"mech_{cond}"
    claim.__doc__ = f"{cond} recovers most of {full}'s gain over {control} (mechanism analysis)."
    return claim


#: the declared Holm families of the SPT claims, in order, each with what it holds; a claim names its family in its
#: :class:`ClaimSpec`, and :data:`SPT_FAMILIES` is built from the table
FAMILY_TEXT: tuple[tuple[str, str], ...] = (
    ("primary", "the SPT gain against tuned and compute-matched label training, the proximity pattern it forms, and the "
                "two interventions on the explanation: a proximity prior without SPT, SPT without positions"),
    ("secondary", "where the gain lives (hybrids, frozen attention, FFN), its scope (SPT epochs, depth, other data), the "
                  "theorem's premises (a non-uniform start, last-token pooling) and the mechanism rows"),
)


@dataclass(frozen=True)
class ClaimSpec:
    """One claim: ``id``, a short ``title``, the ``quote`` of the seed's claim ("-" for mechanism rows), the
    comparison it makes (``statistic``, e.g. ``"spt − scratch"``), its verdict function and its declared Holm
    ``family`` (a name of :data:`FAMILY_TEXT`).

    Raises:
        ValueError: ``family`` is not a declared family.
    """

    id: str
    title: str
    quote: str
    statistic: str
    verdict: Callable[[Raw, SPTThresholds], Verdict]
    family: str

    def __post_init__(self) -> None:
        names = [n for n, _ in FAMILY_TEXT]
        if self.family not in names:
            raise ValueError(f"ClaimSpec {self.id}: family: expected one of {names}, got {self.family!r}")


CLAIMS: tuple[ClaimSpec, ...] = (
    ClaimSpec("spt_gain", "SPT gain at depth 1", "self-pretraining on the task's own inputs beats training from scratch, "
              "already with one layer", "spt − scratch", spt_gain, "primary"),
    ClaimSpec("spt_gain_matched", "SPT gain against compute-matched scratch", "the gain is not the extra optimiser steps",
              "spt − scratch_matched", spt_gain_matched, "primary"),
    ClaimSpec("proximity", "SPT forms a proximity pattern; label training does not",
              "SPT learns W_Q, W_K that turn sinusoidal positions into a proximity bias", "proximity mass", proximity,
              "primary"),
    ClaimSpec("qkvo", "attention weights recover most of the gain", "initialising only W_Q, W_K, W_V, W_O from SPT "
              "recovers most of the gain", "share of spt − scratch", qkvo, "secondary"),
    ClaimSpec("qk", "QK alone recovers most of the gain (1 layer)", "initialising W_Q, W_K alone suffices at one layer",
              "share of spt − scratch", qk, "secondary"),
    ClaimSpec("few_epochs", "few SPT epochs suffice", "a short SPT run already gives most of the gain",
              "share of spt − scratch", few_epochs, "secondary"),
    ClaimSpec("frozen_attn", "frozen attention ~ scratch", "label training leaves attention near its random init: "
              "freezing it changes little", "frozen_attn − scratch", frozen_attn, "secondary"),
    ClaimSpec("ffn", "FFN alone negligible", "initialising only the FFN from SPT gives nothing", "hybrid_ffn − scratch", ffn,
              "secondary"),
    ClaimSpec("depth", "depth-independence", "the gain holds at depth 1, 2 and 4", "spt − scratch per depth", depth,
              "secondary"),
    ClaimSpec("cross_data", "data-agnostic", "SPT on other inputs (count task, i.i.d. tokens) helps too",
              "cross − scratch", cross_data, "secondary"),
    ClaimSpec("causal_prior", "a proximity prior without SPT recovers most of the gain (causal)",
              "(explanation) SPT's gain is the proximity pattern label training cannot form", "share of spt − scratch",
              causal_prior, "primary"),
    ClaimSpec("causal_nopos", "SPT without position codes recovers most of the gain (causal; predicted not to)",
              "(explanation) the pattern comes from W_Q, W_K acting on the positions", "share of spt − scratch",
              causal_nopos, "primary"),
    ClaimSpec("causal_nonuniform", "a non-uniform random start gains (causal)", "(theorem T1) the blindness is a "
              "property of uniform attention", "qkscale_scratch − scratch", causal_nonuniform, "secondary"),
    ClaimSpec("causal_pooling", "last-token pooling gains (causal)", "(theorem T1) the blindness is a property of mean "
              "pooling", "lastpool_scratch − scratch", causal_pooling, "secondary"),
    ClaimSpec("mech_hybrid_qk_emb", "hybrid_qk_emb recovers most of spt's gain (mechanism)", "-", "share",
              mechanism("hybrid_qk_emb", "scratch", "spt"), "secondary"),
    ClaimSpec("mech_hybrid_qk_ln", "hybrid_qk_ln recovers most of spt's gain (mechanism)", "-", "share",
              mechanism("hybrid_qk_ln", "scratch", "spt"), "secondary"),
    ClaimSpec("mech_hybrid_qk_emb_ln", "hybrid_qk_emb_ln recovers most of spt's gain (mechanism)", "-", "share",
              mechanism("hybrid_qk_emb_ln", "scratch", "spt"), "secondary"),
    ClaimSpec("mech_attn_qk", "attn_qk recovers most of attn_spt's gain (mechanism)", "-", "share",
              mechanism("attn_qk", "attn_scratch", "attn_spt"), "secondary"),
)


def spt_families(claims: Sequence[ClaimSpec]) -> tuple[Family, ...]:
    """The declared Holm families of ``claims``: one per :data:`FAMILY_TEXT` entry, holding the ids of the claims that
    name it, in ``claims`` order."""
    return tuple(Family(name, tuple(c.id for c in claims if c.family == name), text) for name, text in FAMILY_TEXT)


#: the synthetic SPT claims' families (:func:`spt_families` of :data:`CLAIMS`). Primary: the gain itself, against both
#: controls, the proximity mechanism, and the two causal predictions that decide the explanation (a proximity
#: prior without SPT recovers the gain; SPT without position codes gives none). Secondary: everything else.
SPT_FAMILIES: tuple[Family, ...] = spt_families(CLAIMS)


def evaluate_all(raw: Raw, th: SPTThresholds) -> dict[str, Verdict]:
    """Every claim's verdict, by id, in :data:`CLAIMS` order (uncorrected: each claim on its own)."""
    return rules.evaluate_claims(CLAIMS, raw, th)


def evaluate_corrected(raw: Raw, th: SPTThresholds) -> dict[str, Verdict]:
    """Every claim's Holm-corrected verdict within its declared family
    (:data:`SPT_FAMILIES`), by id, in :data:`CLAIMS` order."""
    from initlab.evidence import families

    return families.corrected(evaluate_all(raw, th), SPT_FAMILIES)


def seed_plan(summary: Mapping[str, Any], claim_ids: Sequence[str], power: float = 0.9) -> list[families.LeafPlan]:
    """The seeds a fresh run of ``claim_ids`` needs for each of their leaves to reach the word the saved run
    ``summary`` (a ``synthetic_spt_<preset>/summary.json`` or a run's ``metrics.json``) gave it, with ``power``, the
    claims one Holm family (:func:`initlab.evidence.families.seeds_for_words` on the uncorrected verdicts
    recomputed from the run's per-seed numbers with its saved thresholds)."""
    th = from_dict(SPTThresholds, summary["config"]["thresholds"])
    return families.seeds_for_words(evaluate_all(as_raw(summary["summary"]["per_seed"]), th), claim_ids, power=power)


def by_id(claim_id: str) -> ClaimSpec:
    """The :class:`ClaimSpec` of ``claim_id``.

    Raises:
        KeyError: naming the unknown id and the known ones.
    """
    return rules.claim_by_id(CLAIMS, claim_id)


def as_raw(cells: Mapping[str, Any]) -> dict[str, dict[int, dict[str, float]]]:
    """``raw`` from saved per-seed records ``{condition: [{"seed": s, "test_acc": ..., ...}, ...]}``."""
    out: dict[str, dict[int, dict[str, float]]] = {}
    for cond, rows in cells.items():
        out[cond] = {int(r["seed"]): {k: float(v) for k, v in r.items() if k != "seed" and isinstance(v, (int, float))}
                     for r in rows}
    return out
