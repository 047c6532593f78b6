"""Aggregation, verdicts and the markdown report of a synthetic SPT run (reads cell results only)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from initlab.synthetic.spt.metrics import uniform_proximity_mass
from initlab.synthetic.spt.config import SPTConfig, condition_names, condition_spec
from initlab.synthetic.spt.verdicts import all_of, equivalence_verdict, gain_verdict, paired, share_verdict

__all__ = ["CLAIMS", "NOT_RUN", "summarize", "verdict_rows", "report_markdown"]

NOT_RUN = "not run"  # a claim whose conditions are not (yet) in the run: never guessed

# The seed's claims, as the project states them, and the rule that decides each (see verdicts.py).
CLAIMS: list[dict[str, Any]] = [
    {"id": "spt_gain", "claim": "SPT gain at depth 1", "quote": "self-pretraining on the task's own inputs beats training from scratch, already with one layer",
     "rule": "gain", "cond": "spt", "control": "scratch"},
    {"id": "few_epochs", "claim": "few SPT epochs suffice", "quote": "a short SPT run already gives most of the gain",
     "rule": "share", "cond": "few", "control": "scratch"},  # few = the largest sweep epoch <= 10
    {"id": "frozen_attn", "claim": "frozen attention ~ scratch", "quote": "label training leaves attention near its random init: freezing it changes little",
     "rule": "equivalence", "cond": "frozen_attn", "control": "scratch"},
    {"id": "qkvo", "claim": "attention weights recover most of the gain", "quote": "initialising only W_Q, W_K, W_V, W_O from SPT recovers most of the gain",
     "rule": "share", "cond": "hybrid_qkvo", "control": "scratch"},
    {"id": "qk", "claim": "QK alone explains it (1 layer)", "quote": "initializing W_Q, W_K alone suffices at one layer",
     "rule": "share", "cond": "hybrid_qk", "control": "scratch"},
    {"id": "ffn", "claim": "FFN alone negligible", "quote": "initialising only the FFN from SPT gives nothing",
     "rule": "equivalence", "cond": "hybrid_ffn", "control": "scratch"},
    {"id": "depth", "claim": "depth-independence", "quote": "the gain holds at depth 1, 2 and 4",
     "rule": "all_gain", "pairs": "depths"},
    {"id": "cross_data", "claim": "data-agnostic", "quote": "SPT on other inputs (count task, i.i.d. tokens) helps too",
     "rule": "all_gain", "pairs": [("cross_count", "scratch"), ("cross_iid", "scratch")]},
]
MECHANISM = [("hybrid_qk_emb", "scratch", "spt"), ("hybrid_qk_ln", "scratch", "spt"), ("hybrid_qk_emb_ln", "scratch", "spt"),
             ("attn_qk", "attn_scratch", "attn_spt")]


def _per_seed(results: dict[str, Any], cond: str) -> dict[int, dict[str, Any]] | None:
    r = results.get(f"ft_{cond}")
    return None if r is None else {s["seed"]: s for s in r["seeds"]}


def _acc(results: dict[str, Any], cond: str, seeds) -> list[float] | None:
    ps = _per_seed(results, cond)
    return None if ps is None else [ps[s]["test_acc"] for s in seeds]


def _ci_mean(v: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t-interval (NaN for one value)."""
    from scipy.stats import t

    a = np.asarray(v, dtype=float)
    if len(a) < 2:
        return float(a.mean()), float("nan")
    return float(a.mean()), float(t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / math.sqrt(len(a)))


def verdict_rows(cfg: SPTConfig, results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per claim whose conditions were run: paired statistic(s), verdict, the rule used."""
    th, seeds = cfg.thresholds, cfg.seeds
    acc = {n: _acc(results, n, seeds) for n in condition_names(cfg, all_=True)}
    rows = []
    spt_gain = paired(acc["spt"], acc["scratch"]) if acc.get("spt") and acc.get("scratch") else None
    for c in CLAIMS:
        row = {k: c[k] for k in ("id", "claim", "quote", "rule")}
        if c["rule"] == "all_gain":
            if c["pairs"] == "depths":
                pairs = [("spt", "scratch")] + [(f"depth{L}_spt", f"depth{L}_scratch") for L in cfg.depths if L != 1]
                pairs = pairs if len(pairs) > 1 else []  # one depth cannot show depth-independence
            else:
                pairs = c["pairs"]
            missing = sorted({n for pr in pairs for n in pr if not acc.get(n)}) or ([] if pairs else ["other depths (not configured)"])
            if missing:
                rows.append({**row, "verdict": NOT_RUN, "missing": missing})
                continue
            parts = [(a, b, paired(acc[a], acc[b])) for a, b in pairs]
            row.update(parts=[{"cond": a, "control": b, **p, "verdict": gain_verdict(p, th)} for a, b, p in parts],
                       verdict=all_of([gain_verdict(p, th) for _, _, p in parts]))
        else:
            if c["cond"] == "few":
                few = [e for e in cfg.spt_sweep_epochs if 0 < e <= 10]
                c = {**c, "cond": f"spt_e{max(few)}" if few else "spt_e10"}
            needed = [c["cond"], c["control"]] + (["spt"] if c["rule"] == "share" else [])
            missing = [n for n in needed if not acc.get(n)]
            if missing:
                rows.append({**row, "verdict": NOT_RUN, "missing": missing})
                continue
            p = paired(acc[c["cond"]], acc[c["control"]])
            row.update(cond=c["cond"], control=c["control"], **p)
            if c["rule"] == "gain":
                row["verdict"] = gain_verdict(p, th)
            elif c["rule"] == "equivalence":
                row["verdict"] = equivalence_verdict(p, th)
            else:
                row["verdict"], row["share"] = share_verdict(p, spt_gain, th)
        rows.append(row)
    for cond, control, full in MECHANISM:
        if acc.get(cond) and acc.get(control) and acc.get(full):
            p, g = paired(acc[cond], acc[control]), paired(acc[full], acc[control])
            v, share = share_verdict(p, g, th)
            rows.append({"id": f"mech_{cond}", "claim": f"{cond} recovers most of {full}'s gain (mechanism)", "quote": "-",
                         "rule": "share", "cond": cond, "control": control, **p, "share": share, "verdict": v})
    return rows


def summarize(cfg: SPTConfig, results: dict[str, Any]) -> dict[str, Any]:
    """Per-condition statistics over seeds, the verdicts, init gradients and SPT-run summaries."""
    spec = condition_spec(cfg)
    scratch_of = {n: ("attn_scratch" if spec[n]["variant"] == "attn_only" else
                      f"depth{spec[n]['depth']}_scratch" if spec[n]["depth"] != 1 else "scratch") for n in spec}
    rule_epochs = {r["source"] + f"_{r['variant']}_d{r['depth']}": {s["seed"]: s["rule_epoch"] for s in r["seeds"]}
                   for r in results.values() if r.get("kind") == "spt"}
    rows = []
    for n in condition_names(cfg):
        ps = _per_seed(results, n)
        if ps is None:
            continue
        sd = spec[n]
        src = "-"
        if sd["spt"] is not None:
            e = sd["spt"][1]
            if e == "rule":
                eps = rule_epochs.get(f"{sd['spt'][0]}_{sd['variant']}_d{sd['depth']}", {})
                e = "rule (" + ", ".join(str(eps[s]) for s in cfg.seeds if s in eps) + ")"
            src = f"{sd['spt'][0]}:{e}"
        row: dict[str, Any] = {"condition": n, "variant": sd["variant"], "depth": sd["depth"], "spt": src, "n_seeds": len(ps)}
        for key in ("test_acc", "final_train_acc", "prox_start", "prox_end", "relpos_end", "best_epoch"):
            row[f"{key}_mean"], row[f"{key}_ci"] = _ci_mean([ps[s][key] for s in cfg.seeds])
        row["test_acc_seeds"] = [ps[s]["test_acc"] for s in cfg.seeds]
        ctrl = scratch_of[n]
        if ctrl != n and _per_seed(results, ctrl) is not None:
            p = paired(row["test_acc_seeds"], _acc(results, ctrl, cfg.seeds))
            row.update(control=ctrl, diff_mean=p["mean"], diff_lo=p["lo"], diff_hi=p["hi"])
        rows.append(row)
    grads: dict[str, Any] = {}
    gcells = [r for r in results.values() if r.get("kind") == "init_grad"]
    for setting in ("model", "theorem"):
        for key in ("label_grad_norm", "label_blind_frac", "mlm_grad_norm", "mlm_blind_frac"):
            if gcells:
                v = [g[setting][key] for g in gcells]
                grads[f"{setting}_{key}_mean"], grads[f"{setting}_{key}_std"] = float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0
    spt_rows = []
    for r in results.values():
        if r.get("kind") == "spt":
            for s in r["seeds"]:
                rule = s["probes"]["rule"]
                spt_rows.append({"source": r["source"], "variant": r["variant"], "depth": r["depth"], "seed": s["seed"],
                                 "rule_epoch": s["rule_epoch"], "stop_epoch": s["stop_epoch"],
                                 "val_loss_rule": s["val_loss"][s["rule_epoch"]], "prox_rule": rule["prox"],
                                 "relpos_rule": rule["relpos"]})
    return {"conditions": rows, "verdicts": verdict_rows(cfg, results), "init_gradients": grads, "spt_runs": spt_rows}


def _pct(m: float, h: float | None = None) -> str:
    if h is None:
        return f"{100 * m:.1f}"
    return f"{100 * m:.1f} ± {100 * h:.1f}" if math.isfinite(h) else f"{100 * m:.1f}"


def _interval(lo: float, hi: float) -> str:
    return f"[{100 * lo:+.1f}, {100 * hi:+.1f}]" if math.isfinite(lo) else "n/a (1 seed)"


def _verdict_table(summ: dict[str, Any]) -> list[str]:
    lines = ["| claim | seed's claim | statistic (paired over seeds, points) | 95 % interval | verdict |", "| --- | --- | --- | --- | --- |"]
    for v in summ["verdicts"]:
        if v["verdict"] == NOT_RUN:
            lines.append(f"| {v['claim']} | “{v['quote']}” | missing: {', '.join(v['missing'])} | - | **not run** |")
            continue
        if "parts" in v:
            stat = "; ".join(f"{p['cond']} − {p['control']}: {100 * p['mean']:+.1f} ({_interval(p['lo'], p['hi'])}, {p['verdict']})" for p in v["parts"])
            lines.append(f"| {v['claim']} | “{v['quote']}” | {stat} | see each | **{v['verdict']}** |")
            continue
        stat = f"{v['cond']} − {v['control']}: {100 * v['mean']:+.1f}"
        if "share" in v:
            stat += f"; share of the SPT gain {v['share']:.2f}" if math.isfinite(v["share"]) else "; share not judged (the SPT gain itself is not reproduced)"
        quote = "-" if v["quote"] == "-" else f"“{v['quote']}”"
        lines.append(f"| {v['claim']} | {quote} | {stat} | {_interval(v['lo'], v['hi'])} | **{v['verdict']}** |")
    return lines


def report_markdown(cfg: SPTConfig, summ: dict[str, Any], seconds: float | None = None) -> str:
    """The report: verdict table first, then per-condition accuracies and proximity, then the rest."""
    th = cfg.thresholds
    lines = [f"## Synthetic self-pretraining (local task, T = {cfg.task.T}): verdicts", "",
             f"Seeds {', '.join(map(str, cfg.seeds))}; SPT until the validation masked-reconstruction loss stalls "
             f"(patience {cfg.spt_patience}, at most {cfg.spt_max_epochs} epochs); fine-tuning {cfg.finetune_epochs} epochs, "
             f"test accuracy at the best validation epoch. Thresholds: gain ≥ {100 * th.min_gain:.0f} points with a 95 % "
             f"interval above 0; equivalence: interval within ± {100 * th.margin:.0f} points; \"most\" = share ≥ {th.min_share:.2f}.", ""]
    if len(cfg.seeds) < 2:
        lines += [f"**Smoke test, {len(cfg.seeds)} seed: not evidence.** With one seed there is no interval, so by the "
                  "preregistered rules a gain can be at most *partly* and every share claim (which needs the SPT gain "
                  "itself *reproduced*) is *not reproduced*; the verdicts below only show that the pipeline runs. "
                  "The evidence is the `default` preset (5 seeds).", ""]
    lines += _verdict_table(summ)
    lines += ["", f"Per condition ({len(cfg.seeds)} seed{'s' if len(cfg.seeds) > 1 else ''}): test accuracy at the best validation epoch, mean ± 95 % interval of "
              "the mean; paired difference to the condition's scratch control; first-layer proximity mass (|i−j| ≤ "
              f"{cfg.proximity_w}; uniform attention {uniform_proximity_mass(cfg.task.T, cfg.proximity_w):.3f}) at the start and "
              "the end of fine-tuning; final training accuracy.", "",
              "| condition | model | SPT (source:epoch) | test acc % | per seed | − control (95 % interval) | prox. start | prox. end | train acc % (final) | best val. epoch |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in summ["conditions"]:
        diff = f"{100 * r['diff_mean']:+.1f} {_interval(r['diff_lo'], r['diff_hi'])}" if "diff_mean" in r else "-"
        model = f"{'attn-only' if r['variant'] == 'attn_only' else 'full'}, depth {r['depth']}"
        lines.append(f"| {r['condition']} | {model} | {r['spt']} | {_pct(r['test_acc_mean'], r['test_acc_ci'])} | "
                     f"{', '.join(_pct(a) for a in r['test_acc_seeds'])} | {diff} | {r['prox_start_mean']:.3f} | "
                     f"{r['prox_end_mean']:.3f} | {_pct(r['final_train_acc_mean'])} | {r['best_epoch_mean']:.0f} |")
    if summ["spt_runs"]:
        lines += ["", "SPT runs (rule's epoch = best validation masked-reconstruction loss; first-layer proximity at that epoch):", "",
                  "| source | model | depth | rule's epoch per seed | stopped at | val. loss | proximity mass |", "| --- | --- | --- | --- | --- | --- | --- |"]
        keys = sorted({(r["source"], r["variant"], r["depth"]) for r in summ["spt_runs"]})
        for src, var, d in keys:
            rs = [r for r in summ["spt_runs"] if (r["source"], r["variant"], r["depth"]) == (src, var, d)]
            lines.append(f"| {src} | {var} | {d} | {', '.join(str(r['rule_epoch']) for r in rs)} | {', '.join(str(r['stop_epoch']) for r in rs)} | "
                         f"{np.mean([r['val_loss_rule'] for r in rs]):.3f} | {np.mean([r['prox_rule'] for r in rs]):.3f} |")
    g = summ["init_gradients"]
    if g:
        lines += ["", "Score gradients at initialisation (first layer, batch of 64; blind fraction = ‖P_B G‖ / ‖G‖, the share of the gradient lying in the query-dependent directions the label loss is blind to under the theorem: 0 for a blind gradient, near 1 for one that can build query-dependent patterns), mean ± std:", "",
                  "| setting | label ‖G‖ | label blind frac. | masked-recon. ‖G‖ | masked-recon. blind frac. |", "| --- | --- | --- | --- | --- |"]
        for st, label in (("model", "experiment model"), ("theorem", "theorem setting (attention only, uniform, float64)")):
            lines.append(f"| {label} | {g[f'{st}_label_grad_norm_mean']:.3g} | {g[f'{st}_label_blind_frac_mean']:.3f} ± {g[f'{st}_label_blind_frac_std']:.3f} | "
                         f"{g[f'{st}_mlm_grad_norm_mean']:.3g} | {g[f'{st}_mlm_blind_frac_mean']:.3f} ± {g[f'{st}_mlm_blind_frac_std']:.3f} |")
    if seconds is not None:
        lines += ["", f"Wall time of this invocation: {seconds:.0f} s (cells already finished are not redone)."]
    return "\n".join(lines) + "\n"
