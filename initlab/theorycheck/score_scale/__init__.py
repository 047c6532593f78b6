"""The score-scale analysis as an experiment: the ``score_scale`` stage's cells, cost model and summary
(:mod:`.experiment`) and ``initlab theory score-scale`` (:mod:`.command`), over :mod:`initlab.theory.score_scale`."""
