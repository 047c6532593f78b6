"""The two experiments that run the theory (``theory/``, mathematics only) as experiments: :mod:`.verify` (the
attention-gradient statements checked on fresh random cases: ``initlab theory verify`` and the ``theory`` stage of
``initlab reproduce``) and :mod:`.score_scale` (the SPLADE score scale against k, theory vs Monte Carlo: ``initlab
theory score-scale`` and the ``score_scale`` stage). Each holds its cells, cost model, summary, claims and command."""
