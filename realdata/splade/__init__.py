"""Full-scale SPLADE reproduction: seven backbones x MLM-head rescaling factor k on MS MARCO, TREC DL 2019,
BEIR-13 and NanoBEIR (``initlab splade train|eval|sweep``).

Modules: :mod:`.config` (recipe and presets), :mod:`.data` (ir_datasets ids and local file layouts),
:mod:`.modeling` (SparseEncoder + rescaling, safetensors checkpoints), :mod:`.train` (SpladeLoss with a
global-batch FLOPS regulariser), :mod:`.retrieval` (exact sparse top-k, FLOPS, seismic), :mod:`.evaluate`,
:mod:`.sweep`, :mod:`.cli`, :mod:`.gpu_check`.
"""
