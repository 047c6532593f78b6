"""Configs and presets for the LRA self-pretraining (SPT) reproduction.

One frozen :class:`LRAConfig` describes a pretrain or fine-tune run. Per-task presets follow the
Transformer experiment files of Amos et al., "Never Train from Scratch" (arXiv:2310.02980), in
github.com/IdoAmos/not-from-scratch at commit 5eecebc (fine-tuning:
``configs/experiment/lra/transformer-lra-{listops,imdb,aan,cifar,pathfinder}.yaml``; masked
pretraining: the same names with ``-mlm``). The pretraining files differ from the fine-tuning ones in
epochs, warm-up, batch size and schedule, so the SPT stage has its own ``spt_*`` fields (``None`` =
the fine-tuning value). Field-by-field comparison, with every deviation and its reason: ``docs/lra.md``.

==========  ======  ===  =====  ====  =====  ======  ====  ==========  ========================
task        layers  d    heads  d_ff  batch  lr      wd    epochs      warm-up (FT / SPT)
==========  ======  ===  =====  ====  =====  ======  ====  ==========  ========================
listops     6       512  8      2048  32     0.05    0.0   100 / 100   2000 / 2000, constant
text        6       512  8      2048  32     0.05    0.1   65 / 32     2000 cosine 50k / 5000 constant
retrieval   4       128  4      512   32     0.05    0.0   32 / 32     5000 / 2000, constant
image       3       64   4      128   50/32  0.001   0.0   200 / 50    2000 / 2500, constant
pathfinder  4       128  8      128   32     0.0005  0.0   200 / 50    5000 / 2500, constant
==========  ======  ===  =====  ====  =====  ======  ====  ==========  ========================

(``d_ff = expand * d`` with their ``expand`` 4/4/4/2/1.) Pixel tasks reach their model through a
linear map of the pixel value (their pipelines ``encoder: linear``), not a 256-entry embedding; the
Image pretraining loss is the L1 error of the masked pixels (``lm_loss: l1``), Pathfinder's
experiment file sets ``lm_loss: ce``. ``pixel_input``/``spt_loss`` select either path.
Every preset is a run file in ``runs/`` (:data:`PRESETS`): a base plus the values it changes, each with its source.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from initlab.config import check_ranges, ranged
from initlab.realdata.lra.listops import ListOpsGenConfig
from initlab.runfile import RunFiles

__all__ = ["LRAConfig", "BASE", "TASKS", "PRESETS", "get_preset", "task_preset", "INIT_GROUPS", "ABLATIONS",
           "LISTOPS_PLATEAU_SEEDS"]

Task = Literal["listops", "text", "retrieval", "image", "pathfinder"]

# hybrid initialisation: which parameter groups (initlab.nn.encoder.param_groups) come from SPT
INIT_GROUPS = {"all": None, "qk": ("qk",), "qkvo": ("qkvo",), "ffn": ("ffn",)}


@dataclass(frozen=True)
class LRAConfig:
    """A pretrain or fine-tune run.

    Data: ``task``; ``data_dir`` (standard layout, see :mod:`initlab.realdata.lra.data`; ``None`` =
    the datasets library for text/image, or a generated ListOps set from ``listops_gen``); ``limit``
    caps examples per split; ``max_len`` overrides the standard length.
    SPT: ``spt_objective`` masked/causal, ``mask_ratio`` (None = task default), ``spt_epochs``,
    ``spt_task``/``spt_data_dir`` (cross-task SPT data; None = the task's own training inputs).
    Fine-tune: ``init`` ``scratch`` or ``spt``, ``init_groups`` (``all``/``qk``/``qkvo``/``ffn``: hybrid
    initialisation), ``freeze`` (parameter groups kept at their initial values, e.g. ``attention``).
    Splits: ``split_seed`` seeds the random hold-outs (Pathfinder's 80/10/10 split of all samples, the 10 %
    validation share of Text's and Image's training sets). It is fixed (0) and independent of ``seed``, so
    runs of every seed, and an SPT run and the fine-tuning that loads its checkpoint, see the same split;
    change it only to study the split itself (an SPT checkpoint records its split, and fine-tuning refuses a
    checkpoint that saw another one).
    """

    task: Task = "listops"
    data_dir: Optional[str] = None
    listops_gen: Optional[ListOpsGenConfig] = None
    limit: Optional[int] = ranged(None, "[1, inf)")
    max_len: Optional[int] = ranged(None, "[1, inf)")  # None: the task's standard length
    # model (initlab.nn.encoder.ModelConfig)
    n_layers: int = ranged(6, "[1, inf)")
    d_model: int = ranged(512, "[1, inf)")
    n_heads: int = ranged(8, "[1, inf)")
    d_ff: int = ranged(2048, "[1, inf)")
    dropout: float = ranged(0.0, "[0, 1)")
    # optimisation (AdamW, warmup then constant or cosine)
    batch_size: int = ranged(32, "[1, inf)")
    lr: float = ranged(0.05, "(0, inf)")
    weight_decay: float = ranged(0.0, "[0, inf)")
    warmup_steps: int = ranged(2000, "[0, inf)")
    schedule: Literal["constant", "cosine"] = "constant"
    schedule_steps: Optional[int] = ranged(None, "[1, inf)")  # cosine horizon in steps (None: the run's own step count)
    grad_clip: float = ranged(1.0, "[0, inf)")  # the gradient norm's cap; 0: no clipping
    epochs: int = ranged(100, "[0, inf)")
    patience: Optional[int] = ranged(None, "[1, inf)")  # fine-tune: stop after this many epochs without a new best val accuracy
    # self-pretraining
    spt_objective: Literal["masked", "causal"] = "masked"
    mask_ratio: Optional[float] = ranged(None, "(0, 1)")  # None: the task's default
    spt_epochs: int = ranged(100, "[0, inf)")
    spt_batch_size: Optional[int] = ranged(None, "[1, inf)")  # None: batch_size
    spt_warmup_steps: Optional[int] = ranged(None, "[0, inf)")  # None: warmup_steps
    spt_schedule: Optional[Literal["constant", "cosine"]] = None  # None: schedule
    spt_patience: Optional[int] = ranged(None, "[1, inf)")  # SPT: stop after this many epochs without a relative val-loss gain
    spt_min_rel_gain: float = ranged(0.0, "[0, 1)")  # a new best SPT val loss must be below best * (1 - this)
    spt_loss: Literal["ce", "l1"] = "ce"  # l1: masked-pixel L1 (pixel_input="linear" only)
    spt_task: Optional[Task] = None
    spt_data_dir: Optional[str] = None
    # fine-tuning initialisation
    init: Literal["scratch", "spt"] = "spt"
    init_groups: Literal["all", "qk", "qkvo", "ffn"] = "all"
    freeze: tuple[str, ...] = ()
    # pixel tasks (image, pathfinder): "token" = 256-entry embedding, "linear" = d x 1 map of pixel/255
    pixel_input: Literal["token", "linear"] = "token"
    split_seed: int = ranged(0, "[0, inf)")  # the data split (not the run seed): see the class docstring
    # runtime
    seed: int = ranged(0, "[0, inf)")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    bf16: bool = True
    metrics_examples: int = ranged(64, "[0, inf)")
    cpu_threads: Optional[int] = ranged(None, "[1, inf)")  # torch.set_num_threads on CPU runs (None: torch's default)

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.pixel_input == "linear" and self.task not in ("image", "pathfinder"):
            raise ValueError(f"pixel_input: 'linear' applies to the pixel tasks image/pathfinder, not {self.task!r}")
        if self.spt_loss == "l1" and self.pixel_input != "linear":
            raise ValueError("spt_loss: 'l1' (masked-pixel L1) needs pixel_input='linear' (a pixel value to regress)")
        if self.pixel_input == "linear" and self.spt_objective == "causal" and self.spt_loss == "l1":
            raise ValueError("spt_loss: 'l1' is implemented for spt_objective='masked' only")
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads: must divide d_model={self.d_model}, got {self.n_heads}")
        from initlab.nn.encoder import GROUPS

        bad = [g for g in self.freeze if g not in GROUPS]
        if bad:
            raise ValueError(f"freeze: unknown group(s) {bad}; expected names from {list(GROUPS)}")


BASE = LRAConfig()

#: every run of the LRA commands, one file each in ``runs/`` (:class:`initlab.runfile.RunFiles`; docs/runs.md lists
#: them): the five tasks at the sizes of Amos et al.'s experiment files (the module docstring's table, with each
#: value's source beside it), ``cpu-listops`` (the commands' default), the preregistered ``cpu-listops-plateau`` and
#: ``toy`` (tests and the smoke test)
PRESETS: RunFiles[LRAConfig] = RunFiles(LRAConfig, Path(__file__).with_name("runs"))
#: the five LRA tasks, each the name of its run file at the paper's size
TASKS: tuple[str, ...] = ("listops", "text", "retrieval", "image", "pathfinder")
LISTOPS_PLATEAU_SEEDS = (10, 11, 12)  # fresh: earlier CPU ListOps runs used seeds 0, 1, 2

# The ablations of Amos et al. (arXiv:2310.02980), each a diff applied on top of a task preset.
# name -> list of (condition, {fields}) ; "pretrain" in fields: whether an SPT stage is needed.
ABLATIONS: dict[str, list[tuple[str, dict]]] = {
    "spt-vs-scratch": [("scratch", {"init": "scratch"}), ("spt", {"init": "spt"})],
    "spt-epochs": [(f"spt{e}", {"spt_epochs": e, "init": "spt" if e else "scratch"}) for e in (0, 1, 10, 50, 100, 200)],
    "depth": [(f"L{n}-{i}", {"n_layers": n, "init": i}) for n in (1, None) for i in ("scratch", "spt")],
    "cross-task": [("own-data", {"init": "spt"}), ("other-task-data", {"init": "spt", "spt_task": "__other__"}),
                   ("scratch", {"init": "scratch"})],
    "frozen-attention": [(f"{i}-frozen", {"init": i, "freeze": ("attention",)}) for i in ("scratch", "spt")]
    + [(f"{i}-trainable", {"init": i}) for i in ("scratch", "spt")],
    "hybrid": [(f"init-{g}", {"init": "spt", "init_groups": g}) for g in ("all", "qk", "qkvo", "ffn")]
    + [("scratch", {"init": "scratch"})],
}
# the cross-task partner whose *inputs* are used for SPT (same vocabulary; Pathfinder <-> Image as in the seed)
CROSS_TASK = {"image": "pathfinder", "pathfinder": "image", "text": "retrieval", "retrieval": "text", "listops": None}


def get_preset(name: str) -> LRAConfig:
    """The config of a run given by name (one of :data:`PRESETS`) or by the path of a run file.

    Raises:
        initlab.runfile.RunFileError: (a ``ValueError``) an unknown name or file, naming the choices; a run file with
            an unknown field or a value of the wrong type, naming the file and the field.
    """
    return PRESETS.resolve(name)


def task_preset(task: str) -> LRAConfig:
    """The run file of ``task`` (one of :data:`TASKS`) at the paper's size.

    Raises:
        ValueError: ``task`` is not one of :data:`TASKS`.
    """
    if task not in TASKS:
        raise ValueError(f"task: expected one of {', '.join(TASKS)}, got {task!r}")
    return PRESETS[task]
