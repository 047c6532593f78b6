"""Benchmark: the OOD synthetic SPLADE's cost model (CPU seconds per SPLADE step, per MLM step, per evaluation).

For each vocabulary size and family, in this process with one torch thread: MLM pretraining steps of the family's
recipe (:func:`initlab.synthetic.splade.model.pretrain_mlm`), SPLADE training steps
(:func:`initlab.synthetic.splade.ood.train.train_to_plateau`, the plateau rule off) and one retrieval evaluation of
every set (:func:`initlab.synthetic.splade.ood.evaluate.evaluate_sets`), each as CPU seconds (process time: on
shared cores the wall time depends on the load, the CPU time much less; the load average is printed). The per-step
numbers are the median over the measured steps after the first (warm-up). ``initlab.synthetic.splade.ood.runner``'s
``STEP_SECONDS`` / ``MLM_STEP_SECONDS`` / ``EVAL_SECONDS_PER_KID`` are fitted to these lines.

Usage: ``python benchmarks/bench_ood_cost.py --vocab 2048,8192,30000 --families bert,modernbert --steps 6``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vocab", default="2048,8192,30000")
    p.add_argument("--families", default="bert,modernbert")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation (its cost is linear in V and documents)")
    p.add_argument("--sparse-mlm", action="store_true", help="MLM head at the masked positions only (what the OOD backbones use)")
    p.add_argument("--mlm-only", action="store_true", help="measure the MLM steps only")
    a = p.parse_args()
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
    print(f"load average {os.getloadavg()[0]:.1f}; torch threads 1; CPU seconds (process time)")
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
                enc = load_encoder(Path(tmp), cfg.doc_max_len, 0)

                class P:
                    def advance(self, n):
                        ticks.append(time.process_time())

                ticks = []
                train_to_plateau(enc, corpus, cfg, 0, Path(tmp) / "work", progress=P())
                step = statistics.median(b - a_ for a_, b in zip(ticks[1:], ticks[2:]))
                c0 = time.process_time()
                if not a.no_eval:
                    evaluate_sets(enc, corpus, cfg.query_max_len, cfg.doc_max_len)
                ev = float("nan") if a.no_eval else time.process_time() - c0
            row = {"vocab": V, "family": fam, "mlm_step_s": mlm, "sparse_mlm": a.sparse_mlm, "splade_step_s": step, "eval_s": ev, "corpus_s": gen,
                   "load": os.getloadavg()[0]}
            out.append(row)
            print(f"V={V:6d} {fam:10s} MLM step {mlm:.3f} s, SPLADE step {step:.3f} s, one evaluation {ev:.1f} s, "
                  f"corpus {gen:.1f} s (load {row['load']:.1f})", flush=True)
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
