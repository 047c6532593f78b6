"""The README's LRA row: not run at LRA scale; the preregistered CPU ListOps run (``lra_listops_summary.json``) by
:func:`initlab.evidence.lra_claims.listops_gain` on its ``per_seed`` numbers."""

from __future__ import annotations

from initlab.app.docgen.claim_rows import Claim, Headline, Results, b, headline, one, seeds_text
from initlab.evidence import lra_claims
from initlab.evidence.rules import NOT_RUN

__all__ = ["LRA", "CLAIMS", "lra_row"]

LRA = "lra_listops_summary.json"


def lra_row(r: Results) -> str:
    v = r[LRA]
    head = f"{b('not run')} at LRA scale (presets match the authors' configs, deviations listed)"
    g = lra_claims.listops_gain(v)
    if g.word == NOT_RUN:
        return head + f"; CPU ListOps: {b('not run')}"
    text_ = (f"{head}; preregistered CPU ListOps (preset `{v['preset']}`, {seeds_text(v['seeds'])}): SPT − scratch "
             f"{one(g)} against the preregistered +{100 * lra_claims.MIN_GAIN:g} points; test accuracy SPT "
             f"{v['spt_mean']:.3f} vs scratch {v['scratch_mean']:.3f}")
    if "prox_init_spt_mean" in v:  # the run saved seed means only: a number, no interval, no verdict
        text_ += (f"; first-layer proximity mass at fine-tuning start {v['prox_init_spt_mean']:.3f} after SPT vs "
                  f"{v['uniform_proximity_mean']:.3f} for uniform attention (seed means; no interval)")
    return text_


def lra_headline(r: Results) -> Headline:
    g = lra_claims.listops_gain(r[LRA])
    h = headline([("CPU ListOps SPT − scratch", g, "points")])
    return Headline(f"{b(NOT_RUN)} at LRA scale; CPU ListOps: {h.word}", h.estimate)


CLAIMS: list[Claim] = [
    Claim("SPT vs from scratch on the five LRA tasks (Transformer)",
          "from scratch 36.4/64.3/57.5/42.4/71.4, SPT 59.2/88.8/90.4/76.0/88.5", "[LRA](docs/lra.md)", (LRA,), lra_row,
          headline=lra_headline),
]
