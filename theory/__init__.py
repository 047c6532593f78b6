"""Mathematics only, one sub-package per topic: :mod:`.attention` (the attention-gradient statements T1-T7:
setting, closed forms, sympy derivations, numeric checks), :mod:`.score_scale` (SPLADE's score scale against
the rescaling factor k) and :mod:`.verify` (the protocol every check reports in; the runner is
:mod:`initlab.theorycheck.verify.runner`). Shared by the topics and
the experiments: the statement registry (:mod:`.statements`) and the blind subspace (:mod:`.subspace`)."""
