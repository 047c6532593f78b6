"""Full-scale Long Range Arena self-pretraining reproduction (Amos et al., ICLR 2024) and its ablations.

Modules, in reading order: :mod:`.data` (loaders in the standard layouts), :mod:`.listops` (LRA's
ListOps generator), :mod:`.masking` (SPT objectives), :mod:`.config` (frozen configs and presets),
:mod:`.model` (the synthetic encoder plus the Retrieval two-tower head and the causal pass),
:mod:`.train` (pretrain / fine-tune loops), :mod:`.metrics` (attention metrics), :mod:`.sweep`
(ablations), :mod:`.cli` (``initlab lra ...``), :mod:`.gpu_check`, :mod:`.ddp_check`.
"""

from __future__ import annotations

from initlab.experiment.record import Experiment
from initlab.realdata.lra import claims

#: the experiment's record for the roof (:class:`initlab.experiment.record.Experiment`)
EXPERIMENT = Experiment("lra_listops", claims)
