"""The real-data experiments, one sub-package each: :mod:`.lra` (Long Range Arena self-pretraining) and
:mod:`.splade` (SPLADE at scale); the GPU smoke test (:mod:`.gpu_smoke`) and step timing (:mod:`.timing`)."""
