"""Benchmark: the OOD synthetic SPLADE's cost model (CPU seconds per SPLADE step, per MLM step, per evaluation), and
the fused SPLADE head against sentence-transformers' own path in the same run.

For each vocabulary size and family, in this process with one torch thread: MLM pretraining steps of the family's
recipe (:func:`initlab.synthetic.splade.model.pretrain_mlm`), SPLADE training steps
(:func:`initlab.synthetic.splade.ood.train.train_to_plateau`, the plateau rule off) and one retrieval evaluation of
every set (:func:`initlab.synthetic.splade.ood.evaluate.evaluate_sets`), each as CPU seconds (process time: on
shared cores the wall time depends on the load, the CPU time much less; the load average is printed). The per-step
numbers are the median over the measured steps after the first (warm-up).

``--engine dense,fused`` (the default) measures the SPLADE steps and the evaluation with both head engines
(:func:`initlab.mlmhead.splade_encoder.use_engine`: ``dense`` is sentence-transformers' ``Transformer(fill-mask)`` +
``SpladePooling``, ``fused`` the fused head), each from the same saved backbone, interleaved in ``--rounds`` rounds
(the order rotated from round to round, :mod:`benchmarks._timing`), and prints each engine's median step and the
per-round ratio fused / dense (median, quartiles, range). ``initlab.synthetic.splade.ood.runner``'s
``STEP_SECONDS`` / ``MLM_STEP_SECONDS`` / ``EVAL_SECONDS_PER_KID`` are fitted to these lines.

Usage: ``python benchmarks/bench_ood_cost.py --vocab 2048,8192,30000 --families bert,modernbert --steps 6``;
``--vocab 30000 --families bert --steps 5 --no-eval --engine dense,fused --rounds 3`` for the step ratio alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import Comparison, load_average  # noqa: E402


def _engines(text: str) -> list[str]:
    from initlab.mlmhead.splade_encoder import ENGINES

    names = [e.strip() for e in text.split(",") if e.strip()]
    bad = [e for e in names if e not in ENGINES]
    if not names or bad or len(set(names)) != len(names):
        raise SystemExit(f"--engine: expected distinct names from {list(ENGINES)}, comma-separated, got {text!r}")
    return names


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vocab", default="2048,8192,30000")
    p.add_argument("--families", default="bert,modernbert")
    p.add_argument("--steps", type=int, default=6, help="SPLADE (and MLM) steps per measurement (>= 3)")
    p.add_argument("--engine", default="dense,fused", help="head engines to measure, comma-separated: dense, fused")
    p.add_argument("--rounds", type=int, default=1, help="interleaved rounds of every engine (>= 1)")
    p.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation (its cost is linear in V and documents)")
    p.add_argument("--sparse-mlm", action="store_true", help="MLM head at the masked positions only (what the OOD backbones use)")
    p.add_argument("--mlm-only", action="store_true", help="measure the MLM steps only")
    a = p.parse_args()
    engines = _engines(a.engine)
    if a.steps < 3 or a.rounds < 1:
        raise SystemExit(f"--steps: expected >= 3 and --rounds >= 1, got {a.steps} and {a.rounds}")
    import torch

    from initlab.config import derive
    from initlab.synthetic.splade.families import build_family_model, family_tokenizer
    from initlab.synthetic.splade.model import pretrain_mlm
    from initlab.synthetic.splade.ood.cell import corpus_for
    from initlab.synthetic.splade.ood.config import PRESETS, backbone_for
    from initlab.synthetic.splade.ood.evaluate import evaluate_sets
    from initlab.synthetic.splade.ood.train import train_to_plateau
    from initlab.synthetic.splade.train import load_encoder

    torch.set_num_threads(1)
    out = []
    print(f"load average {os.getloadavg()[0]:.1f}; torch threads 1; CPU seconds (process time); engines {engines}, "
          f"{a.rounds} round(s)")
    for V in [int(v) for v in a.vocab.split(",")]:
        cfg = derive(PRESETS["map-v2k"], corpus=derive(PRESETS["map-v2k"].corpus, vocab_size=V), max_steps=a.steps,
                     eval_every=10 ** 6, checkpoints=())
        c0 = time.process_time()
        corpus = corpus_for(cfg, 0)
        gen = time.process_time() - c0
        for fam in a.families.split(","):
            bb = derive(backbone_for(cfg, fam), mlm_steps=a.steps)
            tok = family_tokenizer(fam, corpus.vocab)
            model = build_family_model(fam, V, bb, 0)
            texts = list(corpus.docs.values())
            ticks: list[float] = []
            pretrain_mlm(model, tok, texts, bb, 0, on_step=lambda: ticks.append(time.process_time()), sparse=a.sparse_mlm)
            mlm = statistics.median(b - a_ for a_, b in zip(ticks[1:], ticks[2:]))
            if a.mlm_only:
                out.append({"vocab": V, "family": fam, "mlm_step_s": mlm, "sparse_mlm": a.sparse_mlm, "load": os.getloadavg()[0]})
                print(f"V={V:6d} {fam:10s} MLM step {mlm:.3f} s ({'sparse' if a.sparse_mlm else 'dense'} head)", flush=True)
                continue
            with tempfile.TemporaryDirectory() as tmp:
                model.save_pretrained(tmp)
                tok.save_pretrained(tmp)

                def splade_steps(engine: str) -> float:
                    """Median CPU seconds of one SPLADE step (after the first) of a fresh encoder with ``engine``."""
                    enc = load_encoder(Path(tmp), cfg.doc_max_len, 0, engine)
                    ticks: list[float] = []

                    class P:
                        def advance(self, n):
                            ticks.append(time.process_time())

                    train_to_plateau(enc, corpus, cfg, 0, Path(tmp) / "work", progress=P())
                    return statistics.median(b - a_ for a_, b in zip(ticks[1:], ticks[2:]))

                def evaluation(engine: str) -> float:
                    enc = load_encoder(Path(tmp), cfg.doc_max_len, 0, engine)
                    c0 = time.process_time()
                    evaluate_sets(enc, corpus, cfg.query_max_len, cfg.doc_max_len)
                    return time.process_time() - c0

                load_start = load_average()
                step: dict[str, list[float]] = {e: [] for e in engines}
                ev: dict[str, list[float]] = {e: [] for e in engines}
                order = []
                for r in range(a.rounds):
                    rnd = engines[r % len(engines):] + engines[: r % len(engines)]
                    order.append(rnd)
                    for e in rnd:
                        step[e].append(splade_steps(e))
                        if not a.no_eval:
                            ev[e].append(evaluation(e))
                steps = Comparison(engines[0], step, order, load_start, load_average())
                evals = Comparison(engines[0], ev, order, load_start, load_average()) if not a.no_eval else None
            for e in engines:
                row = {"vocab": V, "family": fam, "engine": e, "mlm_step_s": mlm, "sparse_mlm": a.sparse_mlm,
                       "splade_step_s": statistics.median(step[e]), "splade_step_rounds": step[e],
                       "eval_s": statistics.median(ev[e]) if ev[e] else float("nan"), "corpus_s": gen,
                       "load": os.getloadavg()[0]}
                if len(engines) > 1:
                    row["step_ratio_to_" + engines[0]] = steps.summary()[e]["ratio_to_" + engines[0]]
                    if evals is not None:
                        row["eval_ratio_to_" + engines[0]] = evals.summary()[e]["ratio_to_" + engines[0]]
                out.append(row)
                print(f"V={V:6d} {fam:10s} {e:5s} MLM step {mlm:.3f} s, SPLADE step {row['splade_step_s']:.3f} s, one "
                      f"evaluation {row['eval_s']:.1f} s, corpus {gen:.1f} s (load {row['load']:.1f})", flush=True)
            if len(engines) > 1:
                print(f"  SPLADE step, per-round ratio to {engines[0]} (load {load_start[0]:.1f} -> {load_average()[0]:.1f}):")
                print(steps.table())
                if evals is not None:
                    print(f"  evaluation, per-round ratio to {engines[0]}:")
                    print(evals.table())
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
