"""``initlab theory verify``: run every statement's numeric check (and, optionally, its sympy derivation).

:mod:`.base` is the protocol the checks report in (config and presets, result record, tolerances, test
hook); it imports no topic, so the checks of :mod:`initlab.theory.attention.checks` use it. :mod:`initlab.theorycheck.verify.runner`
runs those checks and derivations and prints the table.
"""
