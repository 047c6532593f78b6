"""initlab.runfile: a run is a TOML file, a named base plus the values it changes, each with its reason."""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from initlab.config import to_dict
from initlab.runfile import RunFileError, RunFiles, read_run_file

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Inner:
    a: int = 1
    b: float = 2.0


@dataclass(frozen=True)
class Cfg:
    seeds: tuple[int, ...] = (0,)
    lr: float = 1e-3
    name: str = "x"
    inner: Inner = field(default_factory=Inner)
    pairs: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ValueError(f"lr: expected > 0, got {self.lr}")


def _write(folder: Path, rel: str, text: str) -> Path:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _runs(tmp_path: Path) -> RunFiles[Cfg]:
    _write(tmp_path, "quick.toml", 'purpose = "smoke"\nbase = "tuned"\n[seeds]\nwhy = "one seed"\nvalue = [7]\n')
    _write(tmp_path, "full.toml", 'purpose = "the run"\nbase = "defaults"\n[inner.b]\nwhy = "nested alone"\nvalue = 5\n'
                                  '[pairs]\nwhy = "pairs"\nvalue = [["a", 1e-2]]\n')
    _write(tmp_path, "explore/look.toml", 'purpose = "a look"\nbase = "full"\n[name]\nwhy = "named"\nvalue = "y"\n')
    _write(tmp_path, "archive/old.toml", 'purpose = "old"\nbase = "defaults"\n')
    _write(tmp_path, "bases/tuned.toml", 'purpose = "tuned base"\nbase = "defaults"\n[lr]\nwhy = "chosen"\nvalue = 0.01\n')
    return RunFiles(Cfg, tmp_path)


def test_a_run_is_its_base_plus_its_changes(tmp_path):
    runs = _runs(tmp_path)
    assert runs["quick"] == Cfg(seeds=(7,), lr=0.01)  # the base's change and its own
    assert runs["full"] == Cfg(inner=Inner(a=1, b=5.0), pairs=(("a", 0.01),))  # a nested field changed alone
    assert runs["look"] == Cfg(inner=Inner(b=5.0), pairs=(("a", 0.01),), name="y")  # based on another run
    assert runs.named() == ("quick", "full") and runs.of_kind("exploratory") == ("look",)
    assert list(runs) == ["quick", "full", "look", "old"] and "tuned" not in runs  # a base is not a run
    assert runs.resolve(tmp_path / "explore" / "look.toml") == runs["look"]  # by path
    assert [c[0] for c in read_run_file(tmp_path / "full.toml").changes] == ["inner.b", "pairs"]


@pytest.mark.parametrize("text, words", [
    ('purpose = "p"\nbase = "defaults"\n[seedz]\nwhy = "w"\nvalue = [1]\n', "unknown config key(s) seedz"),
    ('purpose = "p"\nbase = "defaults"\n[seeds]\nwhy = "w"\nvalue = "one"\n', "seeds: expected tuple"),
    ('purpose = "p"\nbase = "defaults"\n[lr]\nwhy = "w"\nvalue = -1.0\n', "lr: expected > 0"),
    ('purpose = "p"\nbase = "defaults"\n[lr]\nvalue = 0.1\n', "lr: expected exactly the keys 'why' and 'value'"),
    ('purpose = "p"\nbase = "defaults"\n[lr]\nwhy = ""\nvalue = 0.1\n', "lr: 'why' must be a non-empty string"),
    ('purpose = "p"\nbase = "defaults"\nlr = 0.1\n', "lr: expected a table with 'why' and 'value'"),
    ('purpose = "p"\nbase = "defaults"\n[lr]\nwhy = "w"\nvalue = 0.1\nhow = 1\n', "expected exactly the keys"),
    ('base = "defaults"\n', "expected 'purpose' = a one-line string"),
    ('purpose = "p"\n', "expected 'base' = a one-line string"),
    ('purpose = "p"\nbase = "nowhere"\n', "base 'nowhere': expected 'defaults' or a run"),
    ('purpose = "p"\nbase = "defaults"\n[name.x]\nwhy = "w"\nvalue = 1\n', "name: not a nested config"),
    ('purpose = "p"\nbase = "defaults"\n[inner.c]\nwhy = "w"\nvalue = 1\n', "unknown config key(s) inner.c"),
    ('purpose = "p"\nbase = [', "not a readable run file"),
])
def test_a_bad_run_file_is_refused_naming_the_file_and_the_field(tmp_path, text, words):
    runs = _runs(tmp_path)
    bad = _write(tmp_path, "elsewhere/bad.toml", text)
    with pytest.raises(RunFileError) as err:
        runs.resolve(bad)
    assert str(bad) in str(err.value) and words in str(err.value)


def test_unknown_names_two_files_of_one_name_and_cycles_are_refused(tmp_path):
    runs = _runs(tmp_path)
    with pytest.raises(RunFileError, match="expected one of quick, full"):
        runs.resolve("nope")
    with pytest.raises(RunFileError, match="expected one of"):
        runs.resolve("tuned")  # a base is no run
    with pytest.raises(RunFileError, match="no such run file"):
        runs.resolve(tmp_path / "missing.toml")
    _write(tmp_path, "archive/a.toml", 'purpose = "p"\nbase = "b"\n')
    _write(tmp_path, "archive/b.toml", 'purpose = "p"\nbase = "a"\n')
    with pytest.raises(RunFileError, match="a cycle of bases"):
        RunFiles(Cfg, tmp_path)["a"]
    _write(tmp_path, "explore/quick.toml", 'purpose = "p"\nbase = "defaults"\n')
    with pytest.raises(RunFileError, match="a run named 'quick' exists already"):
        RunFiles(Cfg, tmp_path).files()


def test_the_run_files_of_the_package_ship_with_it():
    """A non-editable install holds only what pyproject's package-data names: every run file must match it."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setup["package-data"]["*"]
    found = []
    for folder in {ROOT / d for d in setup["package-dir"].values()}:
        for path in folder.rglob("runs/**/*.toml"):
            pkg = next(p for p in path.parents if (p / "__init__.py").exists())
            rel = str(path.relative_to(pkg))
            assert any(fnmatch.fnmatch(rel, pat) and rel.count("/") == pat.count("/") for pat in patterns), rel
            found.append(rel)
    assert len(found) >= 20


def test_to_dict_of_a_resolved_run_is_plain_json(tmp_path):
    assert to_dict(_runs(tmp_path)["full"])["pairs"] == [["a", 0.01]]
