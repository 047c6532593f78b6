"""What an OOD cell needs reaches it in its arguments: the imposed-norm arm's head norm is the high-norm backbone cell's
result, handed over by the executor (:attr:`initlab.executor.Cell.receives`), the value the cell read before from that
backbone's ``natural_scale.json`` (a file one cell wrote and another read); the config is the run's object itself."""

from __future__ import annotations

from initlab.config import derive
from initlab.executor import run_cells
from initlab.runs import RunDir
from initlab.synthetic.splade.ood import cell as ood_cell
from initlab.synthetic.splade.ood import config as oc
from initlab.synthetic.splade.ood import decide as dc
from initlab.synthetic.splade.ood.runner import plan
from initlab.textio import read_json


def test_every_imposed_cell_of_the_confirmation_receives_the_backbone_it_read_before():
    """In the preregistered plan, each imposed cell receives the result of the backbone cell whose folder (its
    artifact) holds the ``natural_scale.json`` the cell read before: the high-norm family's, of the same seed."""
    cells = plan(oc.PRESETS[dc.PRESET])
    artifact = {c.name: c.artifact for c in cells}
    imposed = [c for c in cells if c.args.get("imposed")]
    assert imposed
    for c in imposed:
        (arg, source), = c.receives
        assert arg == "imposed_backbone" and source in c.needs and "imposed_backbone" not in c.args
        assert artifact[source] == f"backbone/{c.args['imposed']}_seed={c.args['seed']}"
    assert all(not c.receives for c in cells if not c.args.get("imposed"))


def test_the_imposed_cell_gets_exactly_the_scale_the_backbone_folder_records(tmp_path, monkeypatch):
    """A tiny run in this process: the norm the imposed cell passes to training equals, bit for bit, the
    ``head_frobenius`` of the high-norm backbone's ``natural_scale.json`` (the former side channel's value)."""
    cfg = derive(oc.PRESETS["tiny"], families=("bert", "modernbert"), ks=(1.0,), seeds=(0,),
                 imposed=(("bert", "modernbert"),))
    cells = {c.name: c for c in plan(cfg)}
    name = oc.cell_name("bert", 1.0, 0, "modernbert")
    seen: list[float | None] = []

    def training(backbone_dir, cfg, family, k, seed, work_dir, progress=None, imposed_norm=None):
        seen.append(imposed_norm)  # the value training would impose; no training needed to compare it
        return {"family": family, "k": float(k), "seed": seed, "imposed_s": 1.0}

    monkeypatch.setattr(ood_cell, "run_cell", training)
    root = tmp_path / "run"
    run_cells(RunDir(root), [cells["pretrain_bert_seed=0"], cells["pretrain_modernbert_seed=0"], cells[name]],
              workers=1, progress=False)
    old = read_json(root / "backbone" / "modernbert_seed=0" / "natural_scale.json")["head_frobenius"]
    assert isinstance(seen[0], float) and seen == [old]
    bert = read_json(root / "backbone" / "bert_seed=0" / "natural_scale.json")["head_frobenius"]
    assert old != bert  # the high-norm family's own norm, not the cell's backbone's


def test_every_cell_receives_the_config_object_the_former_dict_rebuilt():
    """Each cell gets the run's config object, not ``to_dict``'s form rebuilt per cell; for every run file the object
    is the rebuilt one field for field, types included (so the confirmation's remaining cells compute what they
    would have), and a dict is refused."""
    import pytest

    from initlab.config import from_dict, to_dict
    from initlab.synthetic.splade.ood.runner import cell_bm25

    for name in oc.PRESETS:
        cfg = oc.PRESETS[name]
        assert repr(from_dict(oc.OODConfig, to_dict(cfg))) == repr(cfg), name
    cfg = oc.PRESETS[dc.PRESET]
    assert all(c.args["config"] is cfg for c in plan(cfg))
    with pytest.raises(TypeError, match="OODConfig"):
        cell_bm25("", "bm25_seed=0", {"config": to_dict(cfg), "seed": 0}, None)
