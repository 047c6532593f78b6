"""The score scale of SPLADE at initialisation against the MLM-head rescaling factor k.

By role: the Gaussian logit model's closed forms, config and mechanism (:mod:`.closed_form`, whose docstring
states the model); their sympy derivation (:mod:`.symbolic`); the Monte Carlo reference (:mod:`.monte_carlo`);
the table of ``initlab theory score-scale`` (:mod:`initlab.theorycheck.score_scale.table`); and SPLADE max pooling, the one definition of the
term weights used across initlab (:mod:`.splade_terms`).
"""
