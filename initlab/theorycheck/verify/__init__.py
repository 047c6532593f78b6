"""The theorem checks as an experiment: the ``theory`` stage's cells, cost model and summary (:mod:`.experiment`), the
theorem claim (:mod:`.claims`) and ``initlab theory verify`` (:mod:`.command`), over :mod:`initlab.theory.verify`."""
