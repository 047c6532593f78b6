"""Benchmark: the cost of ``initlab reproduce``'s default cells in reference seconds, robust to the load (the
check of the per-cell reference seconds its expected-duration line is built from).

Every timed piece (CPU seconds) is divided by the CPU seconds of :func:`initlab.executor.measure_speed`'s workload
(one repetition: 4 steps of a (8, 100, 64) batch, the median of 15) timed right before and after it in the same
process, and multiplied by ``REFERENCE_SPEED_SECONDS`` (what that repetition takes on the reference core), so the
load of a shared machine cancels in the ratio. One torch thread.

  spt: per round, one epoch of SPT (full, depth 1), one of fine-tuning (full, depth 1) and one of fine-tuning with
       the alibi_scratch arm's distance bias, each bracketed by probes (default preset's sizes); median over rounds.
       With ``FT_EPOCHS=N``: fine-tuning (plain and alibi) for 1 and N epochs, so the per-epoch cost is the
       difference over N - 1 (the fixed cost of a fine-tuning call: its test-set passes, cancels).
  ood: the splade_in_domain default's cells of its first seed (bm25, bert backbone, its inspect, bert k=1, k=4),
       each bracketed by probes, against the cost model's expected seconds of the cell.

  tokens: the splade_in_domain default's training cells bert k = 1 and k = 16 of its first seed (the whole cell:
       rescale, initial InfoNCE, 300 steps with the plateau checks, the checkpoint evaluations) with each text
       tokenised once (``token_cache``, :class:`initlab.synthetic.splade.train.TokenCache`) and without, in
       ``ROUNDS`` rounds (default 1) of the four, the order rotated: the CPU seconds spent inside the encoder's
       ``preprocess`` (every tokenisation of the cell: training batches, plateau checks, checkpoint evaluations;
       what the cache removes, measured directly, since a whole cell's CPU time varies by more than the saving with
       the load), the whole cell's CPU seconds, and a check that the two records are the same (a short untimed cell first: the first cell of a process imports the
       trainer). The bert backbone is pretrained first (37 CPU s), or read from
       ``BACKBONES=<a splade_in_domain run's backbone folder>`` (read only).

  attention: ``MLM_STEPS`` (default 30) MLM pretraining steps of the splade_in_domain default's bert and modernbert
       backbones (their recipes' batch and masking, the head at the masked positions) with each of transformers'
       attention implementations, ``eager`` and ``sdpa`` (``set_attn_implementation``; the recipes build bert with
       ``sdpa``, transformers' default, and modernbert with ``eager``), in ``ROUNDS`` rounds (default 6), the order
       rotated (``_timing.interleaved``, CPU seconds); per round the ratio of CPU seconds per step, sdpa / eager
       (median and range over rounds), and the largest difference of the per-step losses over 20 steps from the
       same initialisation (float rounding only).

  batch: MLM pretraining steps of the splade_in_domain default's bert and modernbert backbones (their recipes, the
       head at the masked positions, batches padded to the recipe's 104 tokens) at batch sizes 8, 32 and 128, each
       over the same ``MLM_STEPS`` (default 6) batches per size, in ``ROUNDS`` rounds (default 4) after one untimed
       round, the sizes' order rotated (``_timing.interleaved``, CPU seconds); the median CPU seconds per step at
       each size and the least-squares line ``a + b * B`` through them (``statistics.linear_regression``).
       ``a`` is the part of a step that does not grow with the batch (Python, dispatch, the optimiser): the most a
       batched model of n seeds could save is ``(n - 1) * a`` per n steps, ``a / step(32)`` of the recipe's step
       (its batch is 32).

Usage: ``python benchmarks/bench_reproduce_cost.py spt ood``; ``FT_EPOCHS=6 python benchmarks/bench_reproduce_cost.py spt``;
``BACKBONES=results/reproduce/splade_in_domain/backbone python benchmarks/bench_reproduce_cost.py tokens``.
"""
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import interleaved  # noqa: E402

from initlab.executor import REFERENCE_SPEED_SECONDS as REF  # noqa: E402
from initlab.runs import torch_threads  # noqa: E402

torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
x = torch.randn(8, 100, 64, generator=g)
w = [(torch.randn(64, 64, generator=g) * 0.1).requires_grad_() for _ in range(3)]
f1 = (torch.randn(64, 256, generator=g) * 0.1).requires_grad_()
f2 = (torch.randn(256, 64, generator=g) * 0.1).requires_grad_()


def _step():
    q, k, v = (x @ wi for wi in w)
    a = torch.softmax(q @ k.transpose(1, 2) / 8.0, dim=-1) @ v
    h = torch.nn.functional.layer_norm(x + a, (64,))
    out = torch.nn.functional.gelu(h @ f1) @ f2
    out.square().mean().backward()


def probe(reps=15):
    """Median CPU seconds of one repetition (4 steps) of measure_speed's workload."""
    ts = []
    for _ in range(reps):
        c = time.process_time()
        for _ in range(4):
            _step()
        ts.append(time.process_time() - c)
    return statistics.median(ts)


def timed(fn):
    p0 = probe()
    c = time.process_time()
    out = fn()
    cpu = time.process_time() - c
    p1 = probe()
    return cpu, (p0 + p1) / 2, out


def spt(rounds=6):
    from initlab.synthetic.spt import PRESETS, training
    from initlab.synthetic.spt.cells import fresh_model, seed_data, spt_inputs
    from initlab.synthetic.spt.config import condition_spec
    from initlab.synthetic.spt.tasks import MASK_ID

    cfg = PRESETS["default"]
    d = seed_data(cfg, 0)
    xs, xv = spt_inputs(cfg, "local", 0)
    alibi = condition_spec(cfg)["alibi_scratch"]["model"]

    def ft(epochs=1, **model):
        def run():
            m = fresh_model(cfg, 1, "full", 0, **model)
            training.finetune(m, d, torch.Generator().manual_seed(1), lr=cfg.lr, weight_decay=0.0,
                              batch_size=cfg.batch_size, max_epochs=epochs, patience=0)
        return run

    def sp():
        m = fresh_model(cfg, 1, "full", 0)
        training.pretrain(m, xs, xv, torch.Generator().manual_seed(1), 5, lr=cfg.lr, weight_decay=0.0,
                          batch_size=cfg.batch_size, mask_rate=cfg.mask_rate, mask_id=MASK_ID, window=10 ** 6,
                          min_rel=0.0, max_epochs=1)

    if os.environ.get("FT_EPOCHS"):
        n = int(os.environ["FT_EPOCHS"])
        pieces = {"finetune 1 epoch": ft(1), f"finetune {n} epochs": ft(n), "finetune alibi 1 epoch": ft(1, **alibi),
                  f"finetune alibi {n} epochs": ft(n, **alibi)}
    else:
        pieces = {"spt epoch (+ model build)": sp, "finetune epoch (+ build, test passes)": ft(),
                  "finetune alibi epoch (+ build, test passes)": ft(**alibi)}
    for fn in pieces.values():
        fn()  # warm-up
    got = {k: [] for k in pieces}
    for r in range(rounds):
        for k, fn in pieces.items():
            cpu, p, _ = timed(fn)
            got[k].append((cpu, p))
    print(f"spt pieces (default preset sizes, {rounds} rounds; probe rep CPU s median {statistics.median(p for v in got.values() for _, p in v):.4f}):")
    for k, v in got.items():
        ratios = [c / p for c, p in v]
        print(f"  {k:<45} cpu median {statistics.median(c for c, _ in v):.3f} s; reference s "
              f"{statistics.median(ratios) * REF:.3f} (range {min(ratios) * REF:.3f}-{max(ratios) * REF:.3f})", flush=True)


def ood():
    from initlab.executor import run_cells
    from initlab.runs import RunDir
    from initlab.synthetic.splade.ood import runner, stage

    cfg = stage.PRESETS["default"]
    s = cfg.seeds[0]
    names = [f"bm25_seed={s}", f"pretrain_bert_seed={s}", f"inspect_bert_seed={s}", f"bert_k=1_seed={s}",
             f"bert_k=4_seed={s}"]
    cells = {c.name: c for c in runner.plan(cfg)}
    with tempfile.TemporaryDirectory() as tmp:
        rd = RunDir(Path(tmp) / "ood", config={"bench": "ood"})
        print("ood cells (splade_in_domain default, seed %d):" % s)
        for n in names:
            c = cells[n]
            cpu, p, rep = timed(lambda: run_cells(rd, [c], workers=1, progress=False))
            r = rd.load_cell(n)
            units = r["training"]["steps"] if "training" in r else c.units
            ref = cpu / p * REF
            print(f"  {n:<28} cpu {cpu:6.1f} s  probe {p:.4f}  reference s {ref:6.1f} (model {c.expected_seconds:6.1f}); "
                  f"per unit {ref / units:.4f} (model {c.unit_seconds:.4f}, {units} units)", flush=True)


def tokens():
    from initlab.config import derive
    from initlab.synthetic.splade.ood import cell as ood_cell
    from initlab.synthetic.splade.ood import stage

    cfg = stage.stage_config("default")
    s = cfg.seeds[0]
    ood_cell.corpus_for(cfg, s), ood_cell.shift_sets_for(cfg, s)  # generated once per process, as in a worker
    rounds = int(os.environ.get("ROUNDS", "1"))
    spent = [0.0]  # CPU seconds inside the encoder's preprocess (tokenising; cached or not), per cell
    load = ood_cell.load_encoder

    def timed_encoder(*a, **kw):  # the cell's encoder, its preprocess timed (what the collator and encode call)
        enc = load(*a, **kw)
        inner = enc.preprocess

        def preprocess(*pa, **pkw):
            c = time.process_time()
            try:
                return inner(*pa, **pkw)
            finally:
                spent[0] += time.process_time() - c

        enc.preprocess = preprocess
        return enc

    ood_cell.load_encoder = timed_encoder
    with tempfile.TemporaryDirectory() as tmp:
        bb = Path(os.environ["BACKBONES"]) / f"bert_seed={s}" if os.environ.get("BACKBONES") else Path(tmp) / "bb"
        if not (bb / "natural_scale.json").exists():
            ood_cell.pretrain(str(bb), "bert", cfg, s)
        warm = derive(cfg, max_steps=25, checkpoints=(25,))  # the first cell of a process imports the trainer: untimed
        ood_cell.run_cell(str(bb), warm, "bert", 1.0, s, str(Path(tmp) / "work"))
        cases = [(k, c) for k in (1.0, 16.0) for c in (False, True)]
        got = {x: [] for x in cases}
        recs = {}
        for r in range(rounds):
            for i in range(len(cases)):
                k, c = cases[(i + r) % len(cases)]
                spent[0] = 0.0
                cpu, p, rec = timed(lambda: ood_cell.run_cell(str(bb), cfg, "bert", k, s, str(Path(tmp) / "work"),
                                                              token_cache=c))
                got[(k, c)].append((cpu, spent[0], rec["training"]["steps"]))
                recs[(k, c)] = {n: v for n, v in rec.items() if n not in ("seconds", "cpu_seconds", "cpu_seconds_per_step")}
        print(f"splade_in_domain default, bert cells of seed {s}, {rounds} round(s); token_cache off -> on "
              "(medians over rounds):")
        for k in (1.0, 16.0):
            same = recs[(k, False)] == recs[(k, True)]
            off, on = (statistics.median(x[0] for x in got[(k, c)]) for c in (False, True))
            t_off, t_on = (statistics.median(x[1] for x in got[(k, c)]) for c in (False, True))
            steps = got[(k, True)][0][2]
            print(f"  bert k={k:g} ({steps} steps): tokenising {t_off:5.2f} -> {t_on:5.2f} CPU s (saved {t_off - t_on:4.2f} s, "
                  f"{(t_off - t_on) / steps * 1000:.1f} ms per step); whole cell {off:6.1f} -> {on:6.1f} CPU s "
                  f"(load-dependent); same record: {same}", flush=True)
            if not same:
                raise SystemExit("the token cache changed a cell's record")


def _default_backbones():
    """``(seed, its MLM text, family, the family's recipe, its tokenizer)`` for the splade_in_domain default's bert
    and modernbert backbones, on the default's first seed."""
    from initlab.synthetic.splade.families import family_tokenizer
    from initlab.synthetic.splade.ood import cell as ood_cell
    from initlab.synthetic.splade.ood import config as ood_config
    from initlab.synthetic.splade.ood import stage

    cfg = stage.stage_config("default")
    s = cfg.seeds[0]
    text = ood_cell.mlm_texts(cfg, s)
    for fam in ("bert", "modernbert"):
        yield s, text, fam, ood_config.backbone_for(cfg, fam), family_tokenizer(fam, text.vocab)


def attention():
    import dataclasses
    import itertools

    from initlab.synthetic.splade.families import build_family_model
    from initlab.synthetic.splade.model import pretrain_mlm

    rounds, steps = int(os.environ.get("ROUNDS", "6")), int(os.environ.get("MLM_STEPS", "30"))
    impls = ("eager", "sdpa")
    print(f"splade_in_domain default, MLM pretraining of the first seed's backbones, {rounds} rounds of {steps} steps:")
    for s, text, fam, bc, tok in _default_backbones():
        docs = list(text.docs.values())
        models = {}
        for impl in impls:
            models[impl] = build_family_model(fam, len(text.vocab), bc, s)
            models[impl].set_attn_implementation(impl)
        first = {impl: pretrain_mlm(m, tok, docs, dataclasses.replace(bc, mlm_steps=20), s, sparse=True)
                 for impl, m in models.items()}  # also the warm-up
        diff = max(abs(a - b) for a, b in zip(*first.values()))

        def case(impl):  # round r trains on seed s + 1 + r, for both implementations
            seeds = itertools.count(s + 1)
            return lambda: pretrain_mlm(models[impl], tok, docs, dataclasses.replace(bc, mlm_steps=steps), next(seeds),
                                        sparse=True)

        cmp = interleaved({impl: case(impl) for impl in impls}, baseline="eager", repeats=rounds, warmup=0,
                          clock=time.process_time)
        ratios = cmp.ratios["sdpa"]
        last = {impl: cmp.seconds[impl][-1] / steps for impl in impls}
        print(f"  {fam:<10} sdpa / eager CPU s per step: median {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f}-{max(ratios):.3f}); last round eager {last['eager'] * 1000:.1f} ms, "
              f"sdpa {last['sdpa'] * 1000:.1f} ms; largest loss difference over 20 steps {diff:.1e}", flush=True)


def batch():
    from transformers import DataCollatorForLanguageModeling

    from initlab.synthetic.splade.families import build_family_model
    from initlab.synthetic.splade.model import mlm_param_groups, sparse_mlm_loss

    rounds, steps, sizes = int(os.environ.get("ROUNDS", "4")), int(os.environ.get("MLM_STEPS", "6")), (8, 32, 128)
    print(f"splade_in_domain default, MLM steps of the first seed's backbones by batch size, {rounds} rounds of "
          f"{steps} steps per size:")
    for s, text, fam, bc, tok in _default_backbones():
        model = build_family_model(fam, len(text.vocab), bc, s).train()
        opt = torch.optim.AdamW(mlm_param_groups(model, bc), lr=bc.mlm_lr)
        coll = DataCollatorForLanguageModeling(tok, mlm_probability=bc.mlm_probability, return_tensors="pt",
                                               pad_to_multiple_of=bc.max_len)
        ids = tok(list(text.docs.values()), truncation=True, max_length=bc.max_len)["input_ids"]
        gen = torch.Generator().manual_seed(s)
        batches = {n: [coll([{"input_ids": ids[i]} for i in torch.randint(len(ids), (n,), generator=gen).tolist()])
                       for _ in range(steps)] for n in sizes}

        def run(n):
            for b in batches[n]:
                loss = sparse_mlm_loss(model, b["input_ids"], b["attention_mask"], b["labels"])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()

        cmp = interleaved({n: (lambda n=n: run(n)) for n in sizes}, baseline=32, repeats=rounds, warmup=1,
                          clock=time.process_time)
        med = {n: statistics.median(cmp.seconds[n]) / steps for n in sizes}
        b, a = statistics.linear_regression(sizes, [med[n] for n in sizes])
        print(f"  {fam:<10} CPU ms per step: " + ", ".join(f"B={n} {med[n] * 1000:.1f}" for n in sizes)
              + f"; fit a + b*B: a = {a * 1000:.1f} ms, b = {b * 1000:.2f} ms per sequence; a / step(32) = "
              f"{a / med[32]:.3f}", flush=True)


if __name__ == "__main__":
    print(f"load {os.getloadavg()}", flush=True)
    with torch_threads(1):
        for what in sys.argv[1:]:
            {"spt": spt, "ood": ood, "tokens": tokens, "attention": attention, "batch": batch}[what]()
    print(f"load {os.getloadavg()}", flush=True)
