"""The verdict cells of the README's claims table, each computed from saved result files (read only).

Every function here takes the loaded result files (``{file name under docs/results: parsed JSON}``) and
returns one markdown cell: a bold verdict and its key numbers. The verdict words are those the experiment
code computed and saved; this module only words them for the table, by these fixed rules:

* synthetic SPT (``synthetic_spt_default/summary.json``): the saved per-claim verdicts of
  ``initlab.synthetic.spt.verdicts`` (``reproduced``, ``partly``, ``not reproduced``, ``not run``), as saved;
* synthetic SPLADE (``synthetic_splade_<preset>/phase.json``): the saved overall verdicts ``reproduces`` /
  ``partly`` / ``not`` are written ``reproduced`` / ``partly`` / ``not reproduced``; the input-side
  verdicts (``explains``, ``partly``, ``does not``, ``no harm to explain``) as saved;
* CPU ListOps (``lra_listops_summary.json``): the saved preregistered verdict is quoted and worded
  ``SPT gain`` -> ``reproduced``, ``no difference detected`` or ``SPT loss`` -> ``not reproduced``,
  ``no paired seeds finished`` -> ``not run``.

Two verdicts exist only in prose elsewhere, so this module decides them by a stated rule:

* theory (:func:`theory_verdict`, ``theory_verify.json``): *reproduced* if every statement's saved
  verdict is ``PASS``; *partly* if some fail but T1 (label loss: query-blind) and T4 (masked
  reconstruction: not blind), the claim's two halves, pass; *not reproduced* otherwise;
* proximity mechanism (:func:`proximity_verdict`): SPT "forms" a proximity pattern when its mean
  first-layer proximity mass at fine-tuning start is >= 2 x the uniform-attention value and >= 1.5 x
  scratch's (the thresholds preregistered for the CPU ListOps run, ``initlab.realdata.lra.experiment``;
  applied here after the synthetic run); label training "forms none" when scratch's mass at the end of
  fine-tuning stays < 2 x uniform. *reproduced*: both; *partly*: SPT forms it but label training too;
  *not reproduced*: SPT does not.

Errors: a missing key or a wrong type in a file surfaces as ``KeyError`` / ``TypeError`` /
``ValueError``; :mod:`initlab.paper_figs.claims` turns it into an error naming the file.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from initlab.nn.attention_metrics import uniform_proximity_mass

Results = Mapping[str, Any]

THEORY = "theory_verify.json"
SPT = "synthetic_spt_default/summary.json"
LRA = "lra_listops_summary.json"
SPLADE = {seed: f"synthetic_splade_{preset}/phase.json" for seed, preset in ((0, "default"), (1, "confirm"))}
SPLADE_INPUT = "synthetic_splade_confirm-input/phase.json"

#: saved SPLADE overall verdicts -> the table's words
SPLADE_WORDS = {"reproduces": "reproduced", "partly": "partly", "not": "not reproduced"}
#: saved CPU ListOps verdicts -> the table's words
LRA_WORDS = {"SPT gain": "reproduced", "no difference detected": "not reproduced", "SPT loss": "not reproduced",
             "no paired seeds finished": "not run"}
#: proximity rule thresholds (see the module docstring)
PROX_UNIFORM_FACTOR, PROX_SCRATCH_FACTOR = 2.0, 1.5
#: a measured blind fraction above this is "not blind" (float64 rounding is ~1e-16)
BLIND_ZERO = 1e-6


def b(word: str) -> str:
    return f"**{word}**"


def pts(x: float) -> str:
    """A fraction as signed percentage points, e.g. ``0.35 -> +35.0``."""
    return f"{100 * x:+.1f}"


def interval(lo: float, hi: float) -> str:
    return f"[{pts(lo)}, {pts(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else "[n/a, 1 seed]"


def seeds_text(seeds: list[int]) -> str:
    """``[7301, ..., 7305] -> 'seeds 7301-7305'`` for a consecutive run, else the list."""
    s = sorted(seeds)
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"seeds {s[0]}-{s[-1]}"
    return ("seed " if len(s) == 1 else "seeds ") + ", ".join(map(str, s))


# ------------------------------------------------------------------------------------------------
# theory
# ------------------------------------------------------------------------------------------------
def theory_verdict(statements: list[dict[str, Any]]) -> str:
    """The theory rule of the module docstring, from the saved per-statement ``verdict`` fields."""
    ok = {s["statement"]: s["verdict"] == "PASS" for s in statements}
    if not ok:
        raise ValueError("statements: expected at least one checked statement")
    if all(ok.values()):
        return "reproduced"
    return "partly" if ok.get("T1") and ok.get("T4") else "not reproduced"


def _checks_text(statements: list[dict[str, Any]], cases: int) -> str:
    """The kinds of check every statement ran (read from the saved check names), e.g. ``sympy derivations,
    float64 autograd identities and finite differences (20 random cases each)``."""
    kinds = [label for label, key in (("sympy derivations", "sympy"), ("float64 autograd identities", "autograd"),
                                      ("finite differences", "central difference"))
             if all(any(key in name for name in st["checks"]) for st in statements)] or ["checks"]
    listed = kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} and {kinds[-1]}"
    return f"{listed} ({cases} random cases each)"


def theory_row(r: Results) -> str:
    v = r[THEORY]
    st = v["statements"]
    verdict, cfg = theory_verdict(st), v["config"]
    how = _checks_text(st, cfg["cases"])
    failing = [s["statement"] for s in st if s["verdict"] != "PASS"]
    if failing:
        return f"{b(verdict)}: {', '.join(failing)} fail ({len(failing)} of {len(st)} statements; {how})"
    measured = {s["statement"]: s["measured"] for s in st}
    per_mask = statistics.median(measured["T6"]["dropout_mc"]["per_mask_median_blind_fraction"])
    stacks = [t for t in measured["T7"]["table"] if t["spec"]["residual"] and t["max"] > BLIND_ZERO]
    parts = [name for name, on in (("FFN", lambda sp: sp["ffn"]), ("LayerNorm", lambda sp: sp["layernorm"]),
                                   ("random later attention", lambda sp: sp["later_attention"] == "random"))
             if any(on(t["spec"]) for t in stacks)]
    with_ = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} or {parts[-1]}"
    scope = (f"residual stacks with {with_} are not ({min(t['min'] for t in stacks):.2f}-"
             f"{max(t['max'] for t in stacks):.2f})" if stacks else "every measured residual stack is blind")
    return (f"{b(verdict)}: all {len(st)} statements ({st[0]['statement']}-{st[-1]['statement']}) pass {how}. "
            f"Scope: one dropout mask is not blind (median blind fraction {per_mask:.2f} over verify's "
            f"{cfg['cases']} random T6 cases), its expectation is; {scope}")


# ------------------------------------------------------------------------------------------------
# synthetic SPT
# ------------------------------------------------------------------------------------------------
def _spt(r: Results) -> tuple[dict, dict, dict[str, dict], dict[str, dict]]:
    s = r[SPT]
    summ = s["summary"]
    return s, s["config"], {c["condition"]: c for c in summ["conditions"]}, {v["id"]: v for v in summ["verdicts"]}


def _acc(c: dict) -> str:
    ci = c["test_acc_ci"]
    return f"{100 * c['test_acc_mean']:.1f}" + (f" ± {100 * ci:.1f}" if math.isfinite(ci) else "") + " %"


def proximity_verdict(spt_start: float, scratch_start: float, scratch_end: float, uniform: float) -> str:
    """The proximity rule of the module docstring."""
    forms = spt_start >= PROX_UNIFORM_FACTOR * uniform and spt_start >= PROX_SCRATCH_FACTOR * scratch_start
    if not forms:
        return "not reproduced"
    return "reproduced" if scratch_end < PROX_UNIFORM_FACTOR * uniform else "partly"


def proximity_row(r: Results) -> str:
    _, cfg, cond, _ = _spt(r)
    T, w = cfg["task"]["T"], cfg["proximity_w"]
    u = uniform_proximity_mass(T, w)
    spt, scr = cond["spt"], cond["scratch"]
    v = proximity_verdict(spt["prox_start_mean"], scr["prox_start_mean"], scr["prox_end_mean"], u)
    return (f"{b(v)} (synthetic, T = {T}, {seeds_text(cfg['seeds'])}): first-layer proximity mass at "
            f"fine-tuning start {spt['prox_start_mean']:.3f} after SPT vs {scr['prox_start_mean']:.3f} from scratch "
            f"(uniform {u:.3f}); {scr['prox_end_mean']:.3f} after training from scratch")


def _partial(s: dict) -> str:
    """Said beside a "not run" of an unfinished run (finished cells of a partial run are final)."""
    return " (partial run)" if s.get("partial") else ""


def _depths(s: dict, cond: dict[str, dict], d: dict) -> str:
    if d["verdict"] != "not run":
        parts = "; ".join(f"depth {p['cond'].removeprefix('depth').split('_')[0]}: {pts(p['mean'])} "
                          f"{interval(p['lo'], p['hi'])}" for p in d["parts"][1:])
        return f"; {parts}; every depth: {b(d['verdict'])}"
    done = [c for n, c in cond.items() if re.fullmatch(r"depth\d+_spt", n) and "diff_mean" in c]
    out = "".join(f"; depth {c['depth']}: {pts(c['diff_mean'])} {interval(c['diff_lo'], c['diff_hi'])}" for c in done)
    missing = sorted({int(m) for n in d["missing"] for m in re.findall(r"depth(\d+)_", n)})
    what = ("depth " + ", ".join(map(str, missing))) if missing else "other depths"
    return out + f"; {what} {b('not run')}{_partial(s)}"


def spt_gain_row(r: Results) -> str:
    s, cfg, cond, ver = _spt(r)
    g = ver["spt_gain"]
    if g["verdict"] == "not run":
        return f"{b('not run')}{_partial(s)}"
    return (f"{b(g['verdict'])} (synthetic, {seeds_text(cfg['seeds'])}): SPT {_acc(cond['spt'])} vs scratch "
            f"{_acc(cond['scratch'])}, paired {pts(g['mean'])} points {interval(g['lo'], g['hi'])}"
            + _depths(s, cond, ver["depth"]))


def _share(v: dict) -> str:
    return f"share {v['share']:.2f}" if math.isfinite(v["share"]) else "no SPT gain to share"


def _labelled_verdicts(s: dict, ver: dict, labels: Sequence[tuple[str, str]], detail: Callable[[dict], str]) -> list[str]:
    """``"label: **verdict**"`` per ``(verdict id, label)``, followed by the partial-run note when not run, else ``detail(v)``."""
    return [f"{label}: {b(ver[key]['verdict'])}" + (_partial(s) if ver[key]["verdict"] == "not run" else detail(ver[key]))
            for key, label in labels]


def attention_weights_row(r: Results) -> str:
    s, _, _, ver = _spt(r)
    out = _labelled_verdicts(s, ver, (("qkvo", "W_Q/W_K/W_V/W_O"), ("qk", "W_Q, W_K alone")),
                             lambda v: f" ({_share(v)}, {pts(v['mean'])} {interval(v['lo'], v['hi'])})")
    mech = [("mech_hybrid_qk_emb", "with the embeddings"), ("mech_hybrid_qk_ln", "with the LayerNorms"),
            ("mech_hybrid_qk_emb_ln", "with both"), ("mech_attn_qk", "in the attention-only model")]
    shares = [f"{label} {ver[k]['share']:.2f}" for k, label in mech if k in ver and math.isfinite(ver[k]["share"])]
    if shares:
        out.append("W_Q, W_K share " + ", ".join(shares))
    return "; ".join(out)


def few_epochs_other_data_row(r: Results) -> str:
    s, _, cond, ver = _spt(r)
    few, cross = ver["few_epochs"], ver["cross_data"]
    text = f"few epochs: {b(few['verdict'])}"
    if few["verdict"] == "not run":
        text += _partial(s)
    else:
        n = few["cond"].removeprefix("spt_e")
        others = [(int(c.removeprefix("spt_e")), v) for c, v in cond.items()
                  if re.fullmatch(r"spt_e\d+", c) and c != few["cond"] and "diff_mean" in v]
        text += (f" ({n} SPT epochs: {pts(few['mean'])} {interval(few['lo'], few['hi'])}"
                 + "".join(f"; {e} epoch{'s' * (e != 1)}: {pts(v['diff_mean'])}" for e, v in sorted(others)) + ")")
    text += f"; other data: {b(cross['verdict'])}"
    if cross["verdict"] == "not run":
        text += _partial(s)
    else:
        names = {"cross_count": "count-task inputs", "cross_iid": "i.i.d. tokens"}
        text += " (" + ", ".join(f"{names.get(p['cond'], p['cond'])} {pts(p['mean'])}" for p in cross["parts"]) + ")"
    return text


def frozen_ffn_row(r: Results) -> str:
    s, cfg, _, ver = _spt(r)
    out = _labelled_verdicts(s, ver, (("frozen_attn", "frozen attention"), ("ffn", "FFN only")),
                             lambda v: f", {pts(v['mean'])} {interval(v['lo'], v['hi'])}")
    margin = 100 * cfg["thresholds"]["margin"]
    return "; ".join(out) + f" (equivalent: the 95 % interval within ±{margin:g} points)"


# ------------------------------------------------------------------------------------------------
# CPU ListOps
# ------------------------------------------------------------------------------------------------
def lra_row(r: Results) -> str:
    v = r[LRA]
    word = LRA_WORDS[v["verdict"]]
    head = f"{b('not run')} at LRA scale (presets match the authors' configs, deviations listed)"
    if word == "not run":
        return head + f"; CPU ListOps: {b(word)} ({v['verdict']})"
    ahead = sum(p["spt_test_acc"] > p["scratch_test_acc"] for p in v["per_seed"])
    text = (f"{head}; preregistered CPU ListOps (preset `{v['preset']}`, {seeds_text(v['seeds'])}): {b(word)} "
            f"({v['verdict']}), SPT {v['spt_mean']:.3f} vs scratch {v['scratch_mean']:.3f} "
            f"({v['mean_diff_points']:+.1f} points, ahead on {ahead} of {len(v['per_seed'])} seeds)")
    if "proximity_verdict" in v:
        text += (f"; {v['proximity_verdict']} ({v['prox_init_spt_mean']:.3f} vs uniform "
                 f"{v['uniform_proximity_mean']:.3f})")
    return text


# ------------------------------------------------------------------------------------------------
# synthetic SPLADE
# ------------------------------------------------------------------------------------------------
def _family_verdict(phase: dict, key: str) -> tuple[str, list[str]]:
    v = phase["verdicts"][key]
    return SPLADE_WORDS[v["overall"]], [f for f, yes in v["per_family"].items() if yes]


def both_seeds(r: Results, key: str) -> str:
    """The saved verdict ``key`` on seeds 0 (default preset) and 1 (confirm), with the families where
    it holds when it holds in some but not all."""
    out = []
    for seed, name in SPLADE.items():
        word, yes = _family_verdict(r[name], key)
        n = len(r[name]["verdicts"][key]["per_family"])
        out.append((seed, word, "" if len(yes) in (0, n) else f": {', '.join(yes)}"))
    if out[0][1:] == out[1][1:]:
        return f"{b(out[0][1])} (seeds {out[0][0]}, {out[1][0]}{out[0][2]})"
    return ", ".join(f"{b(w)} (seed {s}{d})" for s, w, d in out)


def splade_degradation_row(r: Results) -> str:
    p = r[SPLADE[0]]
    cfg = p["config"]
    s_max = max(cfg["head_scales"])
    stab = [t for t in p["stability"] if t["s"] == s_max]
    loss = {t["family"]: t["ndcg@10_best"] - t["ndcg@10_k1"] for t in stab}
    lo, hi = min(loss, key=loss.get), max(loss, key=loss.get)
    init = [t["init_infonce_k1"] for t in stab]
    gap = [t["final_infonce_k1"] - t["final_infonce_best"] for t in stab]
    return (f"{both_seeds(r, 'high_initial_loss_and_poor_minimum')} in {len(cfg['families'])} tiny synthetic families "
            f"built with transformers. Seed {cfg['seeds'][0]}, s = {s_max:g}, k = 1 against the best k at equal steps: "
            f"{loss[lo]:.2f} ({lo}) to {loss[hi]:.2f} ({hi}) lower nDCG@10; initial InfoNCE {min(init):.0f}-"
            f"{max(init):.0f} nats (ln B = {math.log(cfg['batch_size']):.2f}); final {min(gap):.2f}-{max(gap):.2f} nats worse")


def splade_fix_row(r: Results) -> str:
    g0, g1 = r[SPLADE[0]]["regret"], r[SPLADE[1]]["regret"]
    return (f"{both_seeds(r, 'high_norm_fixed_by_rescaling')}, synthetic; real backbones {b('not run')}. "
            f"`mlmhead inspect`'s recommended k: hit rate {g0['hit_rate']:.2f} / {g1['hit_rate']:.2f}, mean "
            f"nDCG@10 regret {g0['mean_regret']:.3f} / {g1['mean_regret']:.3f} on seeds 0 / 1")


def _input_side(phase: dict, point: str) -> str:
    by: dict[str, list[str]] = {}
    for fam, points in phase["verdicts"]["input_side"].items():
        by.setdefault(points[point]["verdict"], []).append(fam)
    return "; ".join(f"{word} in {', '.join(fams)}" for word, fams in by.items())


def _frac(x: float) -> str:
    return f"1/{1 / x:g}" if 0 < x < 1 else f"{x:g}"


def splade_over_rescaling_row(r: Results) -> str:
    """Sub-verdicts on seeds 0 and 1; the nDCG@10 cost of tied rescaling at (s_min, k = 16) on seed 0
    (``harm_tied`` > ``harm_margin``); the input-side verdicts there on seed 0 (default run) and on the
    confirm-input run's seed."""
    p0, p = r[SPLADE[0]], r[SPLADE_INPUT]
    s_min = min(p["config"]["head_scales"])
    point = f"s={s_min:g},k=16"
    harm = {f: v[point]["harm_tied"] for f, v in p0["verdicts"]["input_side"].items() if "harm_tied" in v[point]}
    hurt = [f for f, h in harm.items() if h > p0["config"]["harm_margin"]]
    cost = (f"s/k = {_frac(s_min / 16)} costs {min(harm[f] for f in hurt):.2f}-{max(harm[f] for f in hurt):.2f} "
            f"nDCG@10 in {', '.join(hurt)} (seed {p0['config']['seeds'][0]}) but" if hurt else "")
    return (f"non-monotone optimum {both_seeds(r, 'non_monotone_optimum')}; small-norm harm "
            f"{both_seeds(r, 'small_norm_harm')}; {cost} collapse at k >= 16 {both_seeds(r, 'over_rescaling_collapse')}. "
            f"The tie's input side (control: output-only rescaling at s = {_frac(s_min)}, k = 16, which leaves the input "
            f"embeddings alone): seed {p0['config']['seeds'][0]}: {_input_side(p0, point)}; seed {p['config']['seeds'][0]}: "
            f"{_input_side(p, point)}")
