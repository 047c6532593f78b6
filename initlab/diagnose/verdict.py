"""The preregistered rule of ``initlab diagnose`` (docs/diagnose.md, section 1): measurements -> "SPT predicted to
help / not to help / no prediction without labels", with the reasons in words.

SPT is predicted to help iff R1 the first layer's label-loss blind share ``b₁ >= 1/√2``, R2 its entropy gap
``u₁ <= 0.10`` and R3 the normalised bag-of-tokens accuracy ``< 0.5``. R3 needs the user's labels: without them
a failed R1 or R2 still decides "not predicted to help", but R1 and R2 passing decide nothing (the labels may be
a function of token counts, which mean pooling solves without query-dependent attention), so the verdict says
what was measured and that the prediction needs labels. The thresholds were fixed before the validation ran
(every validation setting had labels); do not tune them.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

__all__ = ["MIN_BLIND_SHARE", "MAX_ENTROPY_GAP", "MAX_BAG_ACCURACY", "predict"]

MIN_BLIND_SHARE = 1 / math.sqrt(2)  # R1: more than half of the gradient's squared norm is query-blind
MAX_ENTROPY_GAP = 0.10  # R2: attention near uniform at initialisation
MAX_BAG_ACCURACY = 0.5  # R3: normalised bag-of-tokens accuracy below which counts do not solve the labels


def predict(m: Mapping[str, Any], bag: Mapping[str, float] | None) -> dict[str, Any]:
    """The rule on :func:`initlab.diagnose.measure.measure`'s output ``m`` and the bag-of-tokens probe (None
    without labels).

    Returns ``{"spt_helps": bool | None, "blind_share": b₁, "entropy_gap": u₁, "checks": {"R1": bool, "R2": bool,
    "R3": bool | None}, "verdict": one sentence, "reasons": [str]}``; ``spt_helps`` is None (no prediction) when
    ``bag`` is None and R1 and R2 both pass: the deciding check R3 needs labels.
    """
    first = m["layers"][0]
    b, u = first["label_share"], first["entropy_gap"]
    r1, r2 = b >= MIN_BLIND_SHARE, u <= MAX_ENTROPY_GAP
    r3 = None if bag is None else bag["normalised"] < MAX_BAG_ACCURACY
    reasons = []
    if not r2:
        reasons.append(f"not blind: attention is far from uniform at init (first-layer entropy gap {u:.2f} > {MAX_ENTROPY_GAP})")
    if not r1:
        reasons.append(f"label-only training already sees query-dependent attention (first-layer blind share {b:.2f} < "
                       f"{MIN_BLIND_SHARE:.3f})")
    if r3 is False:
        reasons.append(f"the labels are largely a function of token counts (bag-of-tokens probe {bag['accuracy']:.2f} "
                       f"accuracy, {bag['normalised']:.2f} of the way from majority to perfect): mean pooling needs no "
                       "query-dependent attention")
    helps: bool | None = bool(r1 and r2 and r3 is not False)
    if helps and r3 is None:
        helps = None
        verdict = (f"no prediction without labels: measured, label-only training is largely blind to query-dependent "
                   f"attention here (first-layer blind share {b:.2f} with random labels, attention near uniform, "
                   f"entropy gap {u:.2f}); whether self-pretraining helps also needs the bag-of-tokens check (R3), which "
                   f"needs the labels (--labels)")
    elif helps:
        verdict = (f"label-only training is largely blind to query-dependent attention here (first-layer blind share "
                   f"{b:.2f}, attention near uniform); self-pretraining is predicted to help")
    else:
        verdict = "self-pretraining is not predicted to help: " + "; ".join(reasons)
    return {"spt_helps": helps, "blind_share": b, "entropy_gap": u, "checks": {"R1": r1, "R2": r2, "R3": r3},
            "verdict": verdict, "reasons": reasons}
