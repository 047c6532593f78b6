"""``initlab diagnose``: is label-only training of this model on this data blind to query-dependent attention,
and is self-pretraining predicted to help? (docs/diagnose.md)

* :mod:`initlab.diagnose.data` -- readers (text lines, JSONL, LRA-style TSV, ``.npy`` token ids) and the batch;
* :mod:`initlab.diagnose.models` -- the model under diagnosis (Hugging Face encoders from config or checkpoint,
  built-in base-size configs, initlab's own encoders) and the capture of attention scores;
* :mod:`initlab.diagnose.measure` -- blind shares of the label and masked-reconstruction score gradients, entropy
  gap, proximity mass, per layer and head;
* :mod:`initlab.diagnose.probes` -- the bag-of-tokens probe and the short SPT probe;
* :mod:`initlab.diagnose.verdict` -- the preregistered rule;
* :mod:`initlab.diagnose.report` -- :func:`diagnose`, the text report, the figure.
"""

from initlab.diagnose.report import diagnose, diagnose_loaded, format_report, save_figure

__all__ = ["diagnose", "diagnose_loaded", "format_report", "save_figure"]
