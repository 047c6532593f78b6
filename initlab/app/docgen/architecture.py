"""The one-way import rule of the package: :data:`LAYERS` and :data:`SUBLAYERS`, which ``tests/test_architecture.py``
enforces on the source, and the enumeration of the namespace's modules it reads them against."""

from __future__ import annotations

import tomllib
from pathlib import Path

from initlab.textio import read_text

__all__ = ["LAYERS", "SUBLAYERS", "REPO", "package_dirs", "modules", "component", "layer_of"]

#: the repository root (``pyproject.toml`` lives under it)
REPO = Path(__file__).resolve().parents[3]

#: lowest layer first; packages in one layer may not import each other
LAYERS: list[set[str]] = [
    {"initlab.textio"},
    {"initlab.config"},
    {"initlab.runs"},
    {"initlab.executor"},
    {"initlab.theory"},
    {"initlab.nn", "initlab.mlmhead", "initlab.evidence"},
    {"initlab.paper_figs", "initlab.diagnose", "initlab.experiment"},
    {"initlab.synthetic", "initlab.realdata", "initlab.theorycheck"},
    {"initlab.app"},
]

#: inside a package: its layers, lowest first; each layer a list of groups, each group the module prefixes
#: (relative to the package) that may import each other freely. A module imports groups of lower layers only.
SUBLAYERS: dict[str, list[list[tuple[str, ...]]]] = {
    "initlab.theory": [
        [("statements",), ("subspace",)],
        [("verify.base",)],
        [("attention",), ("score_scale",)],
        [("verify",)],
    ],
    "initlab.synthetic": [
        [("spt",), ("splade",)],
        [("diagnose",)],
    ],
    "initlab.synthetic.splade": [
        [("config", "data", "domains", "model", "families", "train", "measure", "claims")],
        [("phase",), ("calibration",), ("ood",)],
    ],
    "initlab.theorycheck": [
        [("verify",), ("score_scale",)],
    ],
    "initlab.executor": [
        [("core",)],
        [("local",), ("cluster",)],
    ],
    "initlab.app": [
        [("stages",)],
        [("commands",)],
        [("cli",)],
        [("docgen",)],
    ],
    "initlab.app.docgen": [
        [("doc_examples",), ("tables",), ("theory_doc",), ("mlmhead_doc",), ("prediction_check",), ("architecture",)],
        [("claims",), ("cli_docs",)],
    ],
}

def package_dirs(root: Path = REPO) -> dict[str, Path]:
    """Package name -> folder, from ``pyproject.toml``'s ``[tool.setuptools] package-dir``."""
    cfg = tomllib.loads(read_text(root / "pyproject.toml"))["tool"]["setuptools"]
    return {name: root / folder for name, folder in cfg["package-dir"].items()}


def modules(root: Path = REPO) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the initlab namespace (a folder mapped separately,
    ``initlab.theory -> theory/``, wins over an ``initlab/`` subfolder of that name)."""
    out: dict[str, Path] = {}
    for pkg, folder in package_dirs(root).items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([pkg, *parts])
            if name not in out or len(str(folder)) > len(str(out[name].parent)):
                out[name] = path
    return out


def component(module: str) -> str | None:
    """The entry of :data:`LAYERS` holding ``module`` (the longest matching prefix), or None."""
    found = [comp for layer in LAYERS for comp in layer if module == comp or module.startswith(comp + ".")]
    return max(found, key=len) if found else None


def layer_of(comp: str) -> int:
    """The layer number of a :data:`LAYERS` entry, 1 for the lowest."""
    return next(i for i, layer in enumerate(LAYERS) if comp in layer) + 1
