"""The CPU experiments, one sub-package each: :mod:`.spt` (synthetic length-100 self-pretraining against label
supervision) and :mod:`.splade` (synthetic SPLADE under MLM-head rescaling, with the phase diagram in
:mod:`.splade.phase`). The two do not import each other (``tests/test_architecture.py``)."""
