"""The one-way import rule of docs/architecture.md, checked on the source with ``ast``.

Every ``import`` and ``from ... import`` of every module under the ``initlab`` namespace is read, those
inside functions included (a lazy import is still a dependency), and each import of another initlab
package must go to the same package or a lower layer. The folders are found through ``pyproject.toml``'s
``package-dir`` mapping, so this test follows the design card's top-level layout.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]

#: lowest layer first; packages in one layer may not import each other (except within config/runs/textio)
LAYERS: list[set[str]] = [
    {"initlab.config", "initlab.runs", "initlab.textio"},
    {"initlab.theory"},
    {"initlab.nn", "initlab.mlmhead"},
    {"initlab.paper_figs"},
    {"initlab.synthetic", "initlab.realdata"},
    {"initlab.stages"},
    {"initlab.commands"},
    {"initlab.cli"},
]
SAME_LAYER_ALLOWED = {frozenset({"initlab.config", "initlab.runs"}), frozenset({"initlab.config", "initlab.textio"}),
                      frozenset({"initlab.runs", "initlab.textio"})}


def _package_dirs() -> dict[str, Path]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {name: ROOT / folder for name, folder in cfg["package-dir"].items()}


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the initlab namespace."""
    out: dict[str, Path] = {}
    dirs = _package_dirs()
    for pkg, folder in dirs.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([pkg, *parts])
            # a folder mapped separately (initlab.theory -> theory/) wins over initlab/ subfolders
            if name not in out or len(str(folder)) > len(str(out[name].parent)):
                out[name] = path
    return out


def _component(module: str) -> str | None:
    for layer in LAYERS:
        for comp in layer:
            if module == comp or module.startswith(comp + "."):
                return comp
    return None


def _rank(comp: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if comp in layer)


def _imports(name: str, path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against this module's package
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, node.lineno))
            out += [(f"{mod}.{a.name}", node.lineno) for a in node.names]
    return out


def _show(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def violations(modules: dict[str, Path] | None = None) -> list[str]:
    bad = []
    for name, path in sorted((modules if modules is not None else _modules()).items()):
        src = _component(name)
        if name == "initlab":  # the namespace root: a version string, no imports of the package
            bad += [f"{_show(path)}:{line}: the initlab root imports {t}" for t, line in _imports(name, path)
                    if t.startswith("initlab")]
            continue
        if src is None:
            bad.append(f"{_show(path)}: module {name} belongs to no layer of docs/architecture.md")
            continue
        for target, line in _imports(name, path):
            dst = _component(target)
            if dst is None or dst == src:
                continue
            if frozenset({src, dst}) in SAME_LAYER_ALLOWED:
                continue
            if _rank(dst) >= _rank(src):
                bad.append(f"{_show(path)}:{line}: {src} imports {target} ({dst} is not below it)")
    return sorted(set(bad))


def test_every_module_is_found():
    mods = _modules()
    for name in ("initlab.cli", "initlab.theory.subspace", "initlab.synthetic.spt", "initlab.realdata.lra.train",
                 "initlab.paper_figs.spt_figures", "initlab.nn.encoder", "initlab.mlmhead.heads", "initlab.stages"):
        assert name in mods, name


def test_imports_flow_one_way():
    bad = violations()
    assert not bad, "upward or sideways imports:\n" + "\n".join(bad)


def test_the_check_catches_an_upward_import(tmp_path):
    """Mutation: a theory module importing a figure module inside a function must be reported."""
    fake = tmp_path / "theory_fake.py"
    fake.write_text("def f():\n    from initlab.paper_figs import spt_figures\n")
    bad = [b for b in violations({**_modules(), "initlab.theory.theory_fake": fake}) if "theory_fake" in b]
    assert bad and "initlab.theory imports initlab.paper_figs" in bad[0]
