"""The README's claims rows, one module per experiment's claims (``theory_claims``, ``spt_claims``, ``lra_claims``,
``splade_claims``, ``diagnose_claims``); the ``Claim`` record they share is :mod:`initlab.evidence.rows`."""
