"""The protocol of ``initlab theory verify``'s checks: :mod:`.base` (config and presets, result record, tolerances, test
hook).

It imports no topic, so the checks of :mod:`initlab.theory.attention.checks` use it; the runner over those checks and
derivations, which prints the table, is :mod:`initlab.theorycheck.verify.runner`.
"""
