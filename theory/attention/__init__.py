"""The attention-gradient statements T1, T1', T2, T3, T3', T4, T5, T6, T7 (texts: :mod:`initlab.theory.statements`).

By role: the setting as code (:mod:`.case`: random cases, the forward pass, autograd and central
differences); the closed forms, one module per statement group (:mod:`.gradient`: T1, T2, T3, T5 at uniform
attention; :mod:`.rowidentical`: T1', T3'; :mod:`.masked_reconstruction`: T4; :mod:`.padding_dropout`: T6;
:mod:`.depth`: T7); the exact sympy derivations (:mod:`.symbolic`); the numeric checks that
``initlab theory verify`` runs (:mod:`.checks`). The blind subspace they project on is
:mod:`initlab.theory.subspace`.
"""
