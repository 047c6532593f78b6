"""The summary and the markdown report of a synthetic SPT run, from its cell results only.

:func:`summarize` turns the per-seed cells into the run's summary: ``per_seed`` (the raw numbers every
verdict is computed from), per-condition statistics, the SPT runs, the learning-rate selection (in an
``lr_sweep`` run), the SPT-duration curve, the score gradients at initialisation and the run's arms as the
figures draw them (:func:`arm_rows`). The verdicts are NOT
computed here: :func:`verdicts` calls :mod:`initlab.synthetic.spt.claims` on ``per_seed``, and so does every
other consumer (the README claims table, the docs). :func:`report_markdown` writes the report.

Statistics: "mean ± sd" is the mean over seeds and the sample standard deviation (ddof 1) of the per-seed
values; intervals are those of the claim's rule (95 % t for gains, 90 % TOST for equivalence, 95 % Fieller
for shares; :mod:`initlab.evidence.rules`).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from initlab.evidence.rules import Verdict
from initlab.experiment import text
from initlab.nn.attention_metrics import uniform_proximity_mass
from initlab.synthetic.spt import arms as spt_arms
from initlab.synthetic.spt import claims as spt_claims
from initlab.synthetic.spt.config import SPTConfig, condition_names, condition_spec

__all__ = ["RAW_KEYS", "summarize", "arm_rows", "verdicts", "lr_choice", "report_markdown", "mean_sd"]

#: the per-seed numbers kept as the raw record of a fine-tuning cell
RAW_KEYS = ("test_acc", "val_acc", "prox_start", "prox_end", "relpos_end", "final_train_acc", "best_epoch", "epochs_run",
            "capped", "lr")


def mean_sd(v) -> tuple[float, float]:
    """Mean and sample sd (ddof 1; NaN for one value)."""
    a = np.asarray(v, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else float("nan")


def _scratch_of(spec: dict[str, Any], n: str) -> str:
    sp = spec[n]
    if sp["variant"] == "attn_only":
        return "attn_scratch"
    return f"depth{sp['depth']}_scratch" if sp["depth"] != 1 else "scratch"


def lr_choice(per_lr: Mapping[str, Mapping[float, list[dict[str, Any]]]]) -> dict[str, dict[str, Any]]:
    """The learning-rate selection: per fine-tuned condition, the learning rate with the highest mean (over
    seeds) best-validation accuracy (the smaller learning rate on an exact tie), with the table behind it and
    ``interior``: False when the chosen rate is the smallest or the largest of the grid (the grid must then be
    widened before the choice is used). Test accuracy plays no part."""
    out = {}
    for cond, by_lr in per_lr.items():
        rows = {lr: {"val_acc_mean": mean_sd([r["val_acc"] for r in rs])[0], "test_acc_mean": mean_sd([r["test_acc"] for r in rs])[0],
                     "train_acc_mean": mean_sd([r["final_train_acc"] for r in rs])[0],
                     "epochs_mean": mean_sd([r["epochs_run"] for r in rs])[0], "n": len(rs)} for lr, rs in sorted(by_lr.items())}
        best = max(rows, key=lambda lr: (rows[lr]["val_acc_mean"], -lr))
        grid = sorted(rows)
        out[cond] = {"chosen": best, "interior": len(grid) > 2 and grid[0] < best < grid[-1],
                     "rows": {f"{lr:g}": r for lr, r in rows.items()}}
    return out


def _acc(x: Any) -> float | None:
    """An accuracy of a saved history, to 4 decimals; None for epoch 0's missing training accuracy (NaN,
    saved as a float or a string)."""
    v = float(x)
    return round(v, 4) if math.isfinite(v) else None


def summarize(cfg: SPTConfig, results: Mapping[str, Any]) -> dict[str, Any]:
    """The run's summary (module docstring) from ``results`` ``{cell name: result}``."""
    spec = condition_spec(cfg)
    ft = [r for r in results.values() if r.get("kind") == "finetune"]
    sweep = [r for r in ft if cfg.lr_sweep]
    per_seed: dict[str, list[dict[str, Any]]] = {}
    per_lr: dict[str, dict[float, list[dict[str, Any]]]] = {}
    for r in ft:
        rec = {"seed": r["seed"], **{k: r[k] for k in RAW_KEYS}}
        if cfg.lr_sweep:
            per_lr.setdefault(r["condition"], {}).setdefault(float(r["lr"]), []).append(rec)
        else:
            per_seed.setdefault(r["condition"], []).append(rec)
    choice = lr_choice(per_lr) if sweep else {}
    if cfg.lr_sweep:  # each condition's raw numbers are those at its chosen learning rate
        per_seed = {c: per_lr[c][v["chosen"]] for c, v in choice.items()}
    # the full learning curve of every arm and seed at its (chosen) learning rate: training and validation accuracy per epoch
    curves: dict[str, dict[str, dict[str, list[float]]]] = {}
    for r in ft:
        if cfg.lr_sweep and float(r["lr"]) != choice.get(r["condition"], {}).get("chosen"):
            continue
        h = r["history"]
        curves.setdefault(r["condition"], {})[str(r["seed"])] = {
            "train_acc": [_acc(e["train_acc"]) for e in h], "val_acc": [_acc(e["val_acc"]) for e in h]}
    for rows in per_seed.values():
        rows.sort(key=lambda r: r["seed"])
    conds = []
    for n in condition_names(cfg):
        rows = per_seed.get(n)
        if not rows:
            continue
        sd = spec[n]
        row: dict[str, Any] = {"condition": n, "variant": sd["variant"], "depth": sd["depth"], "n_seeds": len(rows),
                               "spt": "-" if sd["spt"] is None else f"{sd['spt'][0]}:{sd['spt'][1]}", "lr": rows[0]["lr"],
                               "budget": sd["budget"], "capped": sum(bool(r["capped"]) for r in rows)}
        for key in ("test_acc", "final_train_acc", "prox_start", "prox_end", "best_epoch", "epochs_run"):
            row[f"{key}_mean"], row[f"{key}_sd"] = mean_sd([r[key] for r in rows])
        row["test_acc_seeds"] = [r["test_acc"] for r in rows]
        ctrl = _scratch_of(spec, n)
        if ctrl != n and ctrl in per_seed:
            common = sorted({r["seed"] for r in rows} & {r["seed"] for r in per_seed[ctrl]})
            a = {r["seed"]: r["test_acc"] for r in rows}
            b = {r["seed"]: r["test_acc"] for r in per_seed[ctrl]}
            d = [a[s] - b[s] for s in common]
            row.update(control=ctrl, diff_mean=mean_sd(d)[0], diff_sd=mean_sd(d)[1], diff_n=len(d))
        conds.append(row)
    spt_runs = []
    for r in results.values():
        if r.get("kind") == "spt":
            rule = r["probes"]["rule"]
            spt_runs.append({"source": r["source"], "variant": r["variant"], "depth": r["depth"], "seed": r["seed"],
                             "rule_epoch": r["rule_epoch"], "stop_epoch": r["stop_epoch"], "capped": r["capped"],
                             "val_loss_rule": r["val_loss"][r["rule_epoch"]], "prox_rule": rule["prox"],
                             "relpos_rule": rule["relpos"],
                             "prox_snapshots": {e: p["prox"] for e, p in r["probes"].items() if e != "rule"}})
    spt_runs.sort(key=lambda r: (r["source"], r["variant"], r["depth"], r["seed"]))
    grads: dict[str, Any] = {}
    gcells = [r for r in results.values() if r.get("kind") == "init_grad"]
    for setting in ("model", "theorem"):
        for key in ("label_grad_norm", "label_blind_frac", "mlm_grad_norm", "mlm_blind_frac"):
            if gcells:
                grads[f"{setting}_{key}_mean"], sd = mean_sd([g[setting][key] for g in gcells])
                grads[f"{setting}_{key}_sd"] = 0.0 if math.isnan(sd) else sd
    return {"per_seed": per_seed, "conditions": conds, "spt_runs": spt_runs, "lr_selection": choice, "curves": curves,
            "init_gradients": grads, "uniform_proximity": uniform_proximity_mass(cfg.task.T, cfg.proximity_w),
            "arms": arm_rows(cfg)}


def arm_rows(cfg: SPTConfig) -> list[dict[str, Any]]:
    """The run's arms as the figures read them (they sit below the experiments and cannot import the arms table):
    per condition of ``cfg``, in table order, ``name``, ``label_only``, ``colour`` and ``curve_colour``
    (:class:`initlab.synthetic.spt.arms.Arm`)."""
    run = set(condition_names(cfg))
    return [{"name": a.name, "label_only": a.label_only, "colour": a.colour, "curve_colour": a.curve_colour}
            for a in spt_arms.arms(cfg.spt_sweep_epochs, cfg.depths) if a.name in run]


def verdicts(cfg: SPTConfig, summary: Mapping[str, Any]) -> dict[str, Verdict]:
    """Every claim's uncorrected verdict, computed by :mod:`initlab.synthetic.spt.claims` from ``summary["per_seed"]``
    (the run's saved record; the report's table shows the Holm-corrected words)."""
    return spt_claims.evaluate_all(spt_claims.as_raw(summary["per_seed"]), cfg.thresholds)


# -- the report -------------------------------------------------------------------------------------------
_UNITS = {"gain": "points", "equivalence": "points", "share": "share"}


def _verdict_cell(v: Verdict) -> str:
    if v.rule == "all_of" and v.parts and v.word != "not run":
        parts = "; ".join(text.describe(p, _UNITS.get(p.rule, "points")) for p in v.parts)
        need = f"; {text.decide_text(v)}" if text.decide_text(v) else ""
        return f"{text.bold(v.word)} ({parts}){need}"
    return text.describe(v, _UNITS.get(v.rule, "points"))


def _proximity_cell(v: Verdict) -> str:
    if not v.parts or v.word == "not run":
        return text.describe(v, "mass")
    return f"{text.bold(v.word)} (SPT − scratch at fine-tuning start: {text.describe(v.parts[0], 'mass')}; scratch end − " \
           f"start: {text.describe(v.parts[1], 'mass')})"


def _verdict_table(vs: dict[str, Verdict]) -> list[str]:
    lines = ["| claim | seed's claim | statistic | verdict: estimate [interval] (interval, seeds) |", "| --- | --- | --- | --- |"]
    for c in spt_claims.CLAIMS:
        v = vs[c.id]
        cell = _proximity_cell(v) if c.id == "proximity" else _verdict_cell(v)
        quote = "-" if c.quote == "-" else f"“{c.quote}”"
        lines.append(f"| {c.title} | {quote} | {c.statistic} | {cell} |")
    return lines


def _pct(m: float, sd: float | None = None) -> str:
    if sd is None or not math.isfinite(sd):
        return f"{100 * m:.1f}"
    return f"{100 * m:.1f} ± {100 * sd:.1f}"


def _lr_table(summ: Mapping[str, Any]) -> list[str]:
    sel = summ["lr_selection"]
    lrs = sorted({lr for v in sel.values() for lr in v["rows"]}, key=float)
    lines = ["| condition | " + " | ".join(f"lr {lr}: val / test % (epochs)" for lr in lrs) + " | chosen (best mean validation accuracy) |",
             "| --- |" + " --- |" * (len(lrs) + 1)]
    for cond, v in sel.items():
        cells = [f"{100 * v['rows'][lr]['val_acc_mean']:.1f} / {100 * v['rows'][lr]['test_acc_mean']:.1f} "
                 f"({v['rows'][lr]['epochs_mean']:.0f})" if lr in v["rows"] else "-" for lr in lrs]
        edge = "" if v.get("interior", True) else " (at the grid's edge: widen it)"
        lines.append(f"| {cond} | " + " | ".join(cells) + f" | {v['chosen']:g}{edge} |")
    return lines


def _diff_text(r: Mapping[str, Any]) -> str:
    """A condition's paired difference to its control, ``+d ± sd`` points (no sd with one seed; ``-`` without control)."""
    if "diff_mean" not in r:
        return "-"
    return f"{100 * r['diff_mean']:+.1f}" + (f" ± {100 * r['diff_sd']:.1f}" if math.isfinite(r["diff_sd"]) else "")


def _epoch_curve(cfg: SPTConfig, summ: Mapping[str, Any]) -> list[str]:
    rows = {r["condition"]: r for r in summ["conditions"]}
    eps = [e for e in sorted(cfg.spt_sweep_epochs) if f"spt_e{e}" in rows]
    if not eps or "scratch" not in rows:
        return []
    runs = [r for r in summ["spt_runs"] if (r["source"], r["variant"], r["depth"]) == ("local", "full", 1)]
    out = ["", "SPT-duration curve (depth 1; fine-tuned from the SPT snapshot after E epochs; paired difference to "
           "scratch, mean ± sd over seeds; proximity mass of the snapshot itself):", "",
           "| SPT epochs | test acc % (mean ± sd) | − scratch (points, mean ± sd) | proximity mass of the snapshot |",
           "| --- | --- | --- | --- |"]
    out.append(f"| 0 (scratch) | {_pct(rows['scratch']['test_acc_mean'], rows['scratch']['test_acc_sd'])} | - | "
               f"{rows['scratch']['prox_start_mean']:.3f} |")
    for e in eps:
        r = rows[f"spt_e{e}"]
        prox = [x["prox_snapshots"].get(str(e)) for x in runs if x["prox_snapshots"].get(str(e)) is not None]
        diff = _diff_text(r)
        out.append(f"| {e} | {_pct(r['test_acc_mean'], r['test_acc_sd'])} | {diff} | {np.mean(prox):.3f} |" if prox else
                   f"| {e} | {_pct(r['test_acc_mean'], r['test_acc_sd'])} | {diff} | - |")
    if "spt" in rows and runs:
        r = rows["spt"]
        rule = ", ".join(str(x["rule_epoch"]) for x in runs)
        diff = _diff_text(r)
        out.append(f"| rule ({rule}) | {_pct(r['test_acc_mean'], r['test_acc_sd'])} | {diff} | "
                   f"{np.mean([x['prox_rule'] for x in runs]):.3f} |")
    return out


def power_table(vs: Mapping[str, Verdict]) -> list[str]:
    """Per claim: the estimate and per-seed sd this run measured and the seeds a fresh run would need for its rule
    to decide with 80 % power if those were the true values (:func:`initlab.evidence.rules.planned_seeds`)."""
    from initlab.evidence.rules import planned_seeds

    lines = ["| claim | rule | estimate | per-seed sd | seeds for 80 % power |", "| --- | --- | --- | --- | --- |"]
    for c in spt_claims.CLAIMS:
        v = vs[c.id]
        if v.word == "not run":
            continue
        n = planned_seeds(v)
        need = "more than 200 (or undecidable: the estimate sits on a threshold)" if n is None else str(n)
        if v.rule == "all_of":
            lines.append(f"| {c.title} | all of {len(v.parts)} parts | - | - | {need} |")
            continue
        unit = "share" if v.rule == "share" else "points"
        est = text.number(v.estimate, unit)
        sd = "n/a" if not math.isfinite(v.sd) else (f"{v.sd:.2f}" if unit == "share" else f"{100 * v.sd:.1f} points")
        lines.append(f"| {c.title} | {v.rule} | {est} | {sd} | {need} |")
    return lines


def report_markdown(cfg: SPTConfig, summ: Mapping[str, Any], seconds: float | None = None) -> str:
    """The report: verdict table first (computed here from ``summ["per_seed"]``), then per-condition numbers,
    the budgets as they ran, the SPT-duration curve, the SPT runs and the gradients at initialisation."""
    th = cfg.thresholds
    n_seeds = len(cfg.seeds)
    lines = [f"## Synthetic self-pretraining (local task, T = {cfg.task.T}): verdicts", "",
             f"Seeds {', '.join(map(str, cfg.seeds))}. SPT until the best validation masked-reconstruction loss improves by "
             f"less than {100 * cfg.spt_min_rel_improvement:g} % over {cfg.spt_window} epochs (at most {cfg.spt_max_epochs}); "
             f"fine-tuning until the best validation accuracy is {cfg.finetune_patience} epochs old (at most "
             f"{cfg.finetune_max_epochs}); test accuracy ({cfg.n_test} sequences) at the best validation epoch. Thresholds "
             f"(preregistered): gain ≥ {100 * th.min_gain:g} points; equivalence within ± {100 * th.margin:g} points; "
             f"\"most\" = share ≥ {th.min_share:g}; proximity gain ≥ {th.min_prox_gain:g}; an interval end within "
             f"{100 * th.tol:g} points (shares: {th.share_tol:g}) of a threshold is inconclusive.", ""]
    if n_seeds < 2:
        lines += [f"**Smoke test, {n_seeds} seed: not evidence.** One seed gives no interval, so every verdict is "
                  "*inconclusive*; the table only shows that the pipeline runs.", ""]
    if summ["lr_selection"]:
        lines += ["Learning-rate selection of the fine-tuned arms (mean over seeds of the best validation accuracy; test "
                  "accuracy shown, never used):", ""] + _lr_table(summ) + [""]
    vs = spt_claims.evaluate_corrected(spt_claims.as_raw(summ["per_seed"]), cfg.thresholds)
    lines += ["Words are Holm-corrected within the declared claim families (primary, secondary: "
              "`initlab.evidence.families`, family-wise α = 0.05); intervals are the uncorrected ones.", ""]
    lines += _verdict_table(vs)
    if n_seeds >= 2 and not cfg.lr_sweep:
        lines += ["", "Power for a fresh run (planning; the estimate and sd of this run taken as true, 80 % power for the "
                  "claim's rule to reach the word its estimate points to):", ""] + power_table(vs)
    lines += ["", f"Per condition: test accuracy at the best validation epoch, mean ± sd over seeds; paired difference to "
              "the condition's scratch control (mean ± sd); first-layer proximity mass (|i−j| ≤ "
              f"{cfg.proximity_w}; uniform attention {summ['uniform_proximity']:.3f}) at the start and the end of fine-tuning; "
              "epochs run (how many runs hit the cap); learning rate.", "",
              "| condition | model | SPT (source:epoch) | seeds | test acc % | − control (points) | prox. start | prox. end | "
              "train acc % (final) | epochs (capped) | lr |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in summ["conditions"]:
        diff = _diff_text(r)
        model = f"{'attn-only' if r['variant'] == 'attn_only' else 'full'}, depth {r['depth']}"
        budget = " (matched)" if r["budget"] == "matched" else ""
        lines.append(f"| {r['condition']} | {model} | {r['spt']} | {r['n_seeds']} | {_pct(r['test_acc_mean'], r['test_acc_sd'])} | "
                     f"{diff} | {r['prox_start_mean']:.3f} | {r['prox_end_mean']:.3f} | {_pct(r['final_train_acc_mean'])} | "
                     f"{r['epochs_run_mean']:.0f}{budget} ({r['capped']}) | {r['lr']:g} |")
    lines += _epoch_curve(cfg, summ)
    if summ["spt_runs"]:
        capped = sum(bool(r["capped"]) for r in summ["spt_runs"])
        lines += ["", f"SPT runs (rule's epoch = best validation masked-reconstruction loss; the {cfg.spt_max_epochs}-epoch cap "
                  f"bound in {capped} of {len(summ['spt_runs'])} runs):", "",
                  "| source | model | depth | rule's epoch per seed | stopped at | val. loss | proximity mass |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for key in sorted({(r["source"], r["variant"], r["depth"]) for r in summ["spt_runs"]}):
            rs = [r for r in summ["spt_runs"] if (r["source"], r["variant"], r["depth"]) == key]
            lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {', '.join(str(r['rule_epoch']) for r in rs)} | "
                         f"{', '.join(str(r['stop_epoch']) for r in rs)} | {np.mean([r['val_loss_rule'] for r in rs]):.3f} | "
                         f"{np.mean([r['prox_rule'] for r in rs]):.3f} |")
    g = summ["init_gradients"]
    if g:
        lines += ["", "Score gradients at initialisation (first layer, batch of 64; blind fraction = ‖P_B G‖ / ‖G‖, the share "
                  "of the gradient in the query-dependent directions the label loss is blind to under the theorem: 0 for a "
                  "blind gradient, near 1 for one that can build query-dependent patterns), mean ± sd over seeds:", "",
                  "| setting | label ‖G‖ | label blind frac. | masked-recon. ‖G‖ | masked-recon. blind frac. |", "| --- | --- | --- | --- | --- |"]
        for st, label in (("model", "experiment model"), ("theorem", "theorem setting (attention only, uniform, float64)")):
            lines.append(f"| {label} | {g[f'{st}_label_grad_norm_mean']:.3g} | {g[f'{st}_label_blind_frac_mean']:.3f} ± "
                         f"{g[f'{st}_label_blind_frac_sd']:.3f} | {g[f'{st}_mlm_grad_norm_mean']:.3g} | "
                         f"{g[f'{st}_mlm_blind_frac_mean']:.3f} ± {g[f'{st}_mlm_blind_frac_sd']:.3f} |")
    if seconds is not None:
        lines += ["", f"Wall time of this invocation: {seconds:.0f} s (cells already finished are not redone)."]
    return "\n".join(lines) + "\n"
