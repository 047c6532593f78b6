"""Every numeric config field declares its range beside it (``initlab.config.ranged``); one checker refuses a value
outside it, naming the field, the value and the range; every preset and every saved run is inside its ranges."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from initlab.app.experiments import EXPERIMENTS
from initlab.config import (Range, RangeError, check_ranges, derive, from_dict, later_field, ranged, to_dict,
                            unranged_fields)
from initlab.nn.collapse import CollapseThresholds
from initlab.nn.encoder import ModelConfig
from initlab.realdata.lra.config import LRAConfig
from initlab.realdata.lra.listops import ListOpsGenConfig
from initlab.realdata.splade.config import SpladeTrainConfig
from initlab.synthetic.diagnose.settings import BUDGET, SETTINGS, Budget, Setting
from initlab.synthetic.splade.model import BackboneConfig
from initlab.synthetic.splade.ood.config import OODConfig
from initlab.synthetic.splade.phase.config import PhaseConfig
from initlab.synthetic.spt.config import SPTConfig

ROOT = Path(__file__).resolve().parents[1]


def _preset_tables():
    for record in EXPERIMENTS:
        if record.presets is not None:
            yield record.name, record.preset_table()


#: every config class a command resolves: each experiment's preset classes, and those built outside a preset table
#: (an initlab model file of ``diagnose``, the diagnose validation's settings, the synthetic SPLADE backbone)
CONFIG_CLASSES = sorted({type(p) for _, table in _preset_tables() for p in table.values()}
                        | {LRAConfig, SpladeTrainConfig, ModelConfig, Budget, Setting, ListOpsGenConfig,
                           CollapseThresholds, BackboneConfig}, key=lambda c: c.__name__)


def test_range_reads_intervals_as_written():
    r = Range.parse("(0, 1]")
    assert 1.0 in r and 0.5 in r and 0.0 not in r and 1.0000001 not in r and math.nan not in r
    positive = Range.parse("(0, inf)")
    assert 1e300 in positive and math.inf not in positive and -1 not in positive
    assert math.inf in Range.parse("[0, inf]") and -3 in Range.parse("[-3, 5)") and 5 not in Range.parse("[-3, 5)")
    for text in ("[1, inf)", "(0, 1]", "[0, 0.05)", "(-inf, inf)", "[-1, inf)"):
        assert str(Range.parse(text)) == text
    for bad in ("1, 2", "[2, 1]", "[a, 1]", "[1 2]", ""):
        with pytest.raises(ValueError, match="range"):
            Range.parse(bad)


@dataclasses.dataclass(frozen=True)
class _Inner:
    rate: float = ranged(0.5, "(0, 1)")

    def __post_init__(self) -> None:
        check_ranges(self)


@dataclasses.dataclass(frozen=True)
class _Demo:
    steps: int = ranged(3, "[1, inf)")
    lrs: tuple[tuple[str, float], ...] = ranged((("a", 1e-3),), "(0, inf)")
    cap: "int | None" = ranged(None, "[1, inf)")
    inner: _Inner = _Inner()
    extra: int = later_field(0, "[0, 10]")
    name: str = "x"

    def __post_init__(self) -> None:
        check_ranges(self)


def test_one_checker_names_the_field_the_value_and_the_range():
    base = _Demo()
    assert derive(base, steps=7, cap=2, extra=10).cap == 2 and base.cap is None  # None is no number: it passes
    cases = [({"steps": 0}, "_Demo.steps = 0 is outside its range [1, inf)"),
             ({"lrs": [["a", 1e-3], ["b", -1.0]]}, "_Demo.lrs[1][1] = -1.0 is outside its range (0, inf)"),
             ({"cap": 0}, "_Demo.cap = 0 is outside its range [1, inf)"),
             ({"extra": 11}, "_Demo.extra = 11 is outside its range [0, 10]"),
             ({"steps": math.nan}, None),  # a float for an int field is a type error first
             ({"inner": {"rate": 1.0}}, "inner.rate = 1.0 is outside its range (0, 1)")]
    for change, message in cases:
        with pytest.raises((RangeError, TypeError)) as err:
            derive(base, **change)
        if message is not None:
            assert isinstance(err.value, RangeError) and str(err.value) == message, err.value
    with pytest.raises(RangeError, match=r"_Demo.steps = -2 is outside"):
        _Demo(steps=-2)  # built in code, not only through from_dict
    assert to_dict(_Demo()) == {"steps": 3, "lrs": [["a", 1e-3]], "cap": None, "inner": {"rate": 0.5}, "name": "x"}


def test_a_field_without_its_range_is_listed():
    @dataclasses.dataclass(frozen=True)
    class Loose:
        n: int = 1
        xs: tuple[float, ...] = ()
        flag: bool = False
        ok: int = ranged(1, "[1, inf)")
        inner: _Inner = _Inner()

    assert unranged_fields(Loose) == ["Loose.n", "Loose.xs"]


@pytest.mark.parametrize("cls", CONFIG_CLASSES, ids=lambda c: c.__name__)
def test_every_numeric_field_of_every_config_declares_its_range(cls):
    assert unranged_fields(cls) == []


def test_every_config_kind_is_covered():
    names = {c.__name__ for c in CONFIG_CLASSES}
    assert {"SPTConfig", "PhaseConfig", "OODConfig", "LRAConfig", "SpladeTrainConfig", "VerifyConfig",
            "ScoreScaleConfig", "Budget", "Setting", "ModelConfig"} <= names


def test_every_preset_resolves_inside_its_ranges():
    n = 0
    for name, table in _preset_tables():
        for preset, cfg in table.items():
            again = from_dict(type(cfg), to_dict(cfg))  # every check, nested configs included
            assert again == cfg, (name, preset)
            n += 1
    for s in SETTINGS.values():
        assert from_dict(Setting, {f.name: getattr(s, f.name) for f in dataclasses.fields(s)}) == s
    assert from_dict(Budget, to_dict(BUDGET)) == BUDGET
    assert n >= 40


def _saved_records():
    for path in sorted((ROOT / "docs" / "results").glob("*/*.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(rec, dict):
            continue
        folder = path.parent.name
        if folder.startswith("synthetic_spt_"):
            cls = SPTConfig
        elif folder.startswith("synthetic_splade_ood"):
            cls = OODConfig
        elif folder.startswith("synthetic_splade_"):
            cls = PhaseConfig
        elif folder == "diagnose_validation" and isinstance(rec.get("budget"), dict):
            yield path, Budget, rec["budget"]
            continue
        else:
            continue
        if isinstance(rec.get("config"), dict):
            yield path, cls, rec["config"]


def test_every_saved_run_is_inside_its_ranges():
    """Each saved run's config that today's config class reads (every key a field) resolves inside its ranges; the
    runs of earlier config versions (keys since removed) are read only as saved records, and are exactly these."""
    read, earlier = [], []
    for path, cls, rec in _saved_records():
        unknown = set(rec) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            earlier.append(path.parent.name)
            continue
        from_dict(cls, rec)  # a value out of range raises RangeError naming the field
        read.append(path.parent.name)
    assert sorted(earlier) == ["synthetic_splade_confirm", "synthetic_splade_confirm-input", "synthetic_splade_default",
                               "synthetic_spt_earlier"]
    for kind in ("synthetic_spt_full", "synthetic_splade_full", "synthetic_splade_ood_confirm", "diagnose_validation"):
        assert kind in read, (kind, read)
    assert len(read) >= 30, read
