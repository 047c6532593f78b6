"""The one-way import rule of docs/architecture.md, checked on the source with ``ast``.

The rule itself (:data:`LAYERS`, :data:`SUBLAYERS`) lives in :mod:`initlab.app.docgen.architecture`, which also
renders docs/architecture.md from it, so the page and this test read one list.

Every ``import`` and ``from ... import`` of every module under the ``initlab`` namespace is read, those
inside functions included (a lazy import is still a dependency), and each import of another initlab
package must go to the same package or a lower layer. Inside a package with sub-packages
(:data:`SUBLAYERS`) the same rule holds one level down: the two synthetic experiments do not import each
other, the theory topics do not import each other, and the roof (``initlab.app``)
is stacked as stages, commands, cli, then docgen (the one home of generated documents). The folders are found
through ``pyproject.toml``'s ``package-dir`` mapping, so this test follows the design card's top-level
layout; every package folder must also be listed in ``pyproject.toml`` so that a wheel ships it.

Names given as strings are imports made later, so they are resolved too: ``"module:function"`` calls, module-only
names (``preload``, the figure scripts), a package's lazy ``_LAZY`` names and every ``__all__``. No module, test or
benchmark uses another module's private name, and every package has a test file in its mirror folder.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

from initlab.app.docgen.architecture import SUBLAYERS, component as _component, layer_of, modules as _modules

ROOT = Path(__file__).resolve().parents[1]


def _rank(comp: str) -> int:
    return layer_of(comp)


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


def _group(package: str, module: str) -> tuple[int, tuple[str, ...]] | None:
    """(layer, group) of ``module`` inside ``package`` by the longest matching prefix, or None outside it."""
    best: tuple[int, int, tuple[str, ...]] | None = None
    for rank, layer in enumerate(SUBLAYERS[package]):
        for group in layer:
            for prefix in group:
                full = f"{package}.{prefix}"
                if (module == full or module.startswith(full + ".")) and (best is None or len(full) > best[0]):
                    best = (len(full), rank, group)
    return None if best is None else (best[1], best[2])


def _sub_violation(src: str, dst: str) -> str | None:
    """Why ``src`` may not import ``dst`` under :data:`SUBLAYERS` (None if it may)."""
    for package in SUBLAYERS:
        inside = package + "."
        if not (src.startswith(inside) and dst.startswith(inside)):
            continue
        a, b = _group(package, src), _group(package, dst)
        if a is None or b is None or a[1] == b[1]:
            continue
        if b[0] >= a[0]:
            return f"{src} imports {dst} ({package}: {'/'.join(b[1])} is not below {'/'.join(a[1])})"
    return None


def _import_violation(src: str, src_comp: str, target: str) -> str | None:
    """Why module ``src`` (of component ``src_comp``) may not import ``target`` (None if it may)."""
    dst = _component(target)
    if dst is None:
        return None
    if dst == src_comp:
        return _sub_violation(src, target)
    if _rank(dst) >= _rank(src_comp):
        return f"{src_comp} imports {target} ({dst} is not below it)"
    return None


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
        for package in SUBLAYERS:
            if name.startswith(package + ".") and _group(package, name) is None:
                bad.append(f"{_show(path)}: module {name} belongs to no sub-layer of {package} (initlab.app.docgen.architecture.SUBLAYERS)")
        for target, line in _imports(name, path):
            why = _import_violation(name, src, target)
            if why:
                bad.append(f"{_show(path)}:{line}: {why}")
    return sorted(set(bad))


#: a call by string name: ``"package.module:function"`` (the CLI's registry, the executor's cell targets)
_NAMED = re.compile(r"(initlab(?:\.[A-Za-z_]\w*)+):([A-Za-z_]\w*)")


def named_calls(modules: dict[str, Path] | None = None) -> list[tuple[str, Path, int, str, str]]:
    """Every string constant of the initlab namespace that names a function to call, ``"initlab.x.y:function"``:
    ``(holder module, its file, line, target module, function)``."""
    out = []
    for name, path in sorted((modules if modules is not None else _modules()).items()):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                m = _NAMED.fullmatch(node.value)
                if m:
                    out.append((name, path, node.lineno, m.group(1), m.group(2)))
    return out


def _top_level_names(path: Path) -> set[str]:
    """The names a module defines or imports at its top level (what ``getattr(module, name)`` finds)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def unresolved_named_calls(modules: dict[str, Path] | None = None) -> list[str]:
    """Every call by string name whose module or function does not exist, or whose module the holder of the
    string may not import (the layers above: a name is an import made later)."""
    mods = modules if modules is not None else _modules()
    bad = []
    for holder, path, line, module, func in named_calls(mods):
        where = f"{_show(path)}:{line}: {module}:{func}"
        if module not in mods:
            bad.append(f"{where} names module {module}, which does not exist")
        elif func not in _top_level_names(mods[module]):
            bad.append(f"{where} names {func}, which {module} does not define")
        else:
            src = _component(holder)
            why = _import_violation(holder, src, module) if src else None
            if why:
                bad.append(f"{where}: the holder may not import it: {why}")
    return sorted(set(bad))


#: a string naming a module only, ``"initlab.x.y"`` (a worker's ``preload``, a figure script run as ``python -m``)
_MODULE = re.compile(r"initlab(?:\.[A-Za-z_]\w*)+")


def named_modules(modules: dict[str, Path] | None = None) -> list[tuple[str, Path, int, str]]:
    """Every string constant of the initlab namespace that is a dotted initlab name without a function,
    ``"initlab.x.y"``: ``(holder module, its file, line, the name)``."""
    out = []
    for name, path in sorted((modules if modules is not None else _modules()).items()):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE.fullmatch(node.value):
                out.append((name, path, node.lineno, node.value))
    return out


def unresolved_named_modules(modules: dict[str, Path] | None = None) -> list[str]:
    """Every module-only string name (:func:`named_modules`) that is no module of the namespace."""
    mods = modules if modules is not None else _modules()
    return sorted({f"{_show(path)}:{line}: {target} names a module that does not exist"
                   for _, path, line, target in named_modules(mods) if target not in mods})


def lazy_names(modules: dict[str, Path] | None = None) -> list[tuple[str, Path, int, str, str]]:
    """Every entry of a package's lazy-attribute map (a top-level ``_LAZY = {name: submodule}`` in an
    ``__init__.py``, read by its module ``__getattr__``): ``(package, its file, line, name, submodule)``. The map is
    evaluated from its source without builtins (literals and comprehensions only)."""
    out = []
    for name, path in sorted((modules if modules is not None else _modules()).items()):
        if path.name != "__init__.py":
            continue
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets):
                table = eval(compile(ast.Expression(node.value), str(path), "eval"), {"__builtins__": {}})
                out += [(name, path, node.lineno, attr, sub) for attr, sub in sorted(table.items())]
    return out


def unresolved_lazy_names(modules: dict[str, Path] | None = None) -> list[str]:
    """Every lazy name (:func:`lazy_names`) whose submodule does not exist or does not define it."""
    mods = modules if modules is not None else _modules()
    bad = []
    for package, path, line, attr, sub in lazy_names(mods):
        module = f"{package}.{sub}"
        if module not in mods:
            bad.append(f"{_show(path)}:{line}: {attr} is read from {module}, which does not exist")
        elif attr not in _top_level_names(mods[module]):
            bad.append(f"{_show(path)}:{line}: {attr} is read from {module}, which does not define it")
    return sorted(set(bad))


def undefined_exports(modules: dict[str, Path] | None = None) -> list[str]:
    """Every name of a module's ``__all__`` (a literal list or tuple) that the module neither defines nor imports at
    its top level nor reads lazily (:func:`lazy_names`)."""
    mods = modules if modules is not None else _modules()
    lazy: dict[str, set[str]] = {}
    for package, _, _, attr, _ in lazy_names(mods):
        lazy.setdefault(package, set()).add(attr)
    bad = []
    for name, path in sorted(mods.items()):
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                known = _top_level_names(path) | lazy.get(name, set())
                bad += [f"{_show(path)}:{node.lineno}: {name}.__all__ names {n}, which it does not define"
                        for n in ast.literal_eval(node.value) if n not in known]
    return sorted(set(bad))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def script_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every ``.py`` file under ``tests/`` and ``benchmarks/`` by a dotted name outside the initlab namespace
    (``tests.app.test_cli``, ``benchmarks.bench_spt``): the code that uses the package from outside it."""
    return {".".join(p.relative_to(root).with_suffix("").parts): p
            for folder in ("tests", "benchmarks") for p in sorted((root / folder).rglob("*.py"))}


def private_imports(modules: dict[str, Path] | None = None, scan: set[str] | None = None) -> list[str]:
    """Every use of another initlab module's private name (``_name``): ``from x import _name`` (relative imports
    included), and ``x._name`` where ``x`` is an initlab module bound by an import (``import initlab.x.y as x``,
    ``from initlab.x import y``). What several modules share is public in the module that owns it.

    ``modules``: name -> file of every module an import may name (default: the initlab namespace); ``scan``: the
    names among them whose files are read (default: all). A name given as a string (``monkeypatch.setattr(x,
    "_name", ...)``, ``getattr``) is not a use: a test may patch a private seam where no public one exists."""
    mods = modules if modules is not None else _modules()
    bad = []
    for name, path in sorted(mods.items()):
        if scan is not None and name not in scan:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        is_pkg = path.name == "__init__.py"
        bound: dict[str, str] = {}  # local name -> the initlab module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("initlab"):
                        bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if not mod.startswith("initlab") or mod == name:
                    continue
                for a in node.names:
                    if _private(a.name):
                        bad.append(f"{_show(path)}:{node.lineno}: {name} imports {mod}.{a.name}, a private name of another "
                                   "module (make it public where it lives)")
                    elif f"{mod}.{a.name}" in mods:
                        bound[a.asname or a.name] = f"{mod}.{a.name}"
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            chain, v = [], node.value
            while isinstance(v, ast.Attribute):
                chain.append(v.attr)
                v = v.value
            if isinstance(v, ast.Name) and v.id in bound:
                target = ".".join([bound[v.id], *reversed(chain)])
                if target != name:
                    bad.append(f"{_show(path)}:{node.lineno}: {name} uses {target}.{node.attr}, a private name of another "
                               "module (make it public where it lives)")
    return sorted(set(bad))


def _module_edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the initlab modules it imports (each import resolved to the longest existing module name; a
    ``from package import module`` is an edge to the module only)."""
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        targets = _imports(name, path)
        for target, _ in targets:
            parts = target.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            dep = ".".join(parts)
            if not dep or dep == name:
                continue
            if modules[dep].name == "__init__.py" and any(t.startswith(dep + ".") and t in modules for t, _ in targets):
                continue  # the package named only as the place of a module imported from it
            deps.add(dep)
        edges[name] = deps
    return edges


def import_cycles(modules: dict[str, Path] | None = None) -> list[list[str]]:
    """Every set of modules that import each other in a cycle (strongly connected, more than one module)."""
    edges = _module_edges(modules if modules is not None else _modules())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return cycles


def _listed_packages() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])


def test_every_module_is_found():
    mods = _modules()
    for name in ("initlab.app.cli", "initlab.theory.subspace", "initlab.synthetic.spt", "initlab.synthetic.spt.runner",
                 "initlab.synthetic.splade.phase.cell", "initlab.theory.attention.checks", "initlab.theory.verify.base",
                 "initlab.realdata.lra.train", "initlab.paper_figs.spt_figures", "initlab.nn.encoder",
                 "initlab.mlmhead.heads", "initlab.app.stages", "initlab.app.docgen.theory_doc", "initlab.executor"):
        assert name in mods, name


def test_imports_flow_one_way():
    bad = violations()
    assert not bad, "upward or sideways imports:\n" + "\n".join(bad)


def test_every_package_folder_is_listed_in_pyproject():
    """A folder with an ``__init__.py`` missing from ``[tool.setuptools] packages`` would not be in the wheel."""
    folders = {name for name, path in _modules().items() if path.name == "__init__.py"}
    assert folders - _listed_packages() == set()
    assert _listed_packages() - folders == set()


def test_the_check_catches_an_upward_import(tmp_path):
    """Mutation: a theory module importing a figure module inside a function must be reported."""
    fake = tmp_path / "theory_fake.py"
    fake.write_text("def f():\n    from initlab.paper_figs import spt_figures\n")
    bad = [b for b in violations({**_modules(), "initlab.theory.attention.fake": fake}) if "fake" in b]
    assert bad and "initlab.theory imports initlab.paper_figs" in bad[0]


@pytest.mark.parametrize("name,source,expected", [
    ("initlab.synthetic.spt.fake", "from initlab.synthetic.splade.data import make_corpus\n",
     "initlab.synthetic.spt.fake imports initlab.synthetic.splade.data (initlab.synthetic: splade is not below spt)"),
    ("initlab.synthetic.splade.train.fake", "def f():\n    from initlab.synthetic.splade.phase import runner\n",
     "initlab.synthetic.splade.train.fake imports initlab.synthetic.splade.phase"),
    ("initlab.theory.verify.fake", "from initlab.theory.attention.checks import CHECKERS\n",
     "initlab.theory.verify.fake imports initlab.theory.attention.checks (initlab.theory: attention is not below verify)"),
    ("initlab.theory.score_scale.fake", "from initlab.theory.attention.case import random_case\n",
     "initlab.theory.score_scale.fake imports initlab.theory.attention.case (initlab.theory: attention is not below score_scale)"),
    ("initlab.config.fake", "from initlab.runs import atomic_write_json\n", "initlab.config imports initlab.runs"),
    ("initlab.executor.core.fake", "def f():\n    from initlab.synthetic.splade.phase import runner\n",
     "initlab.executor imports initlab.synthetic.splade.phase"),
    ("initlab.runs.folder.fake", "from initlab.executor import run_cells\n", "initlab.runs imports initlab.executor"),
    ("initlab.synthetic.spt.fake", "def f():\n    from initlab.app import stages\n", "initlab.synthetic imports initlab.app"),
    ("initlab.paper_figs.fake", "from initlab.app.docgen import claims\n", "initlab.paper_figs imports initlab.app.docgen"),
    ("initlab.executor.local.fake", "from initlab.executor.cluster import run_dask\n",
     "initlab.executor.local.fake imports initlab.executor.cluster (initlab.executor: cluster is not below local)"),
    ("initlab.app.stages.fake", "from initlab.app.commands import reproduce\n",
     "initlab.app.stages.fake imports initlab.app.commands (initlab.app: commands is not below stages)"),
    ("initlab.app.commands.fake", "def f():\n    from initlab.app.docgen import tables\n",
     "initlab.app.commands.fake imports initlab.app.docgen (initlab.app: docgen is not below commands)"),
    ("initlab.app.cli.fake", "from initlab.app.docgen.cli_docs import COMMANDS\n",
     "initlab.app.cli.fake imports initlab.app.docgen.cli_docs (initlab.app: docgen is not below cli)"),
    ("initlab.app.docgen.tables.fake", "from initlab.app.docgen import claims\n",
     "initlab.app.docgen.tables.fake imports initlab.app.docgen.claims (initlab.app.docgen: claims is not below tables)"),
    ("initlab.synthetic.spt.claims.fake", "from initlab.app.docgen import claims\n",
     "initlab.synthetic imports initlab.app.docgen"),
])
def test_the_check_catches_sideways_and_upward_imports_between_sub_packages(tmp_path, name, source, expected):
    """Mutations one level down: an experiment importing the other, a shared piece importing an experiment, a
    topic importing the runner or another topic, and config importing runs must be reported."""
    fake = tmp_path / "fake.py"
    fake.write_text(source)
    bad = [b for b in violations({**_modules(), name: fake}) if "fake.py" in b]
    assert bad and expected in bad[0], bad


def test_every_module_of_a_sub_layered_package_has_a_group(tmp_path):
    fake = tmp_path / "stray.py"
    fake.write_text("")
    bad = [b for b in violations({**_modules(), "initlab.theory.stray": fake}) if "stray" in b]
    assert bad and "belongs to no sub-layer of initlab.theory" in bad[0]


def test_no_module_uses_another_modules_private_names():
    bad = private_imports()
    assert not bad, "private names used across modules:\n" + "\n".join(bad)


@pytest.mark.parametrize("name,source,expected", [
    ("initlab.executor.local.fake", "from initlab.executor.core import Cell, _Bar\n",
     "initlab.executor.local.fake imports initlab.executor.core._Bar"),
    ("initlab.executor.fake", "def f():\n    from .core import _dependency_order\n",
     "imports initlab.executor.core._dependency_order"),
    ("initlab.executor.local.fake", "from initlab.executor import core\ncore._WORKER_QUEUE = None\n",
     "uses initlab.executor.core._WORKER_QUEUE"),
    ("initlab.app.cli.fake", "import initlab.mlmhead.heads as h\nh._check(1)\n", "uses initlab.mlmhead.heads._check"),
    ("initlab.app.cli.fake", "import initlab.mlmhead.heads\ninitlab.mlmhead.heads._check(1)\n",
     "uses initlab.mlmhead.heads._check"),
])
def test_the_check_catches_a_private_name_used_across_modules(tmp_path, name, source, expected):
    fake = tmp_path / "fake.py"
    fake.write_text(source)
    bad = [b for b in private_imports({**_modules(), name: fake}) if "fake.py" in b]
    assert bad and expected in bad[0], bad


def test_no_test_or_benchmark_uses_private_names():
    """The tests and benchmarks keep to the package's public names as well: what they need is public where it
    lives, or they test through the public API."""
    scripts = script_modules()
    assert "tests.test_architecture" in scripts and "benchmarks.bench_retrieval" in scripts
    bad = private_imports({**_modules(), **scripts}, scan=set(scripts))
    assert not bad, "private names used by tests or benchmarks:\n" + "\n".join(bad)


@pytest.mark.parametrize("source,expected", [
    ("from initlab.executor.core import Cell, _dependency_order\n", "imports initlab.executor.core._dependency_order"),
    ("def test_x():\n    from initlab.synthetic.spt import runner\n    assert runner._NOT_IN_KEY\n",
     "uses initlab.synthetic.spt.runner._NOT_IN_KEY"),
    ("import initlab.executor as ex\nprint(ex._SPEED.get())\n", "uses initlab.executor._SPEED"),
])
def test_the_check_catches_a_test_using_a_private_name(tmp_path, source, expected):
    fake = tmp_path / "test_fake.py"
    fake.write_text(source)
    bad = private_imports({**_modules(), "tests.fake.test_fake": fake}, scan={"tests.fake.test_fake"})
    assert bad and expected in bad[0], bad


def test_the_private_name_check_lets_a_test_patch_a_private_seam_by_its_string_name(tmp_path):
    fake = tmp_path / "test_fake.py"
    fake.write_text("from initlab.synthetic.spt import training\n"
                    "def test_x(monkeypatch):\n    monkeypatch.setattr(training, '_seam', None)\n")
    assert private_imports({**_modules(), "tests.fake.test_fake": fake}, scan={"tests.fake.test_fake"}) == []


def test_the_private_name_check_allows_dunders_and_public_names(tmp_path):
    fake = tmp_path / "fake.py"
    fake.write_text("import initlab\nfrom initlab.executor.core import Cell\nfrom initlab.executor import core\n"
                    "print(initlab.__version__, core.__name__, core.Cell, self._own)\n")
    assert [b for b in private_imports({**_modules(), "initlab.executor.local.fake": fake}) if "fake.py" in b] == []


def test_every_call_by_string_name_resolves_and_respects_the_layers():
    calls = named_calls()
    holders = {h for h, *_ in calls}
    assert "initlab.synthetic.splade.ood" in holders and "initlab.synthetic.spt" in holders
    from initlab.app import cli
    from initlab.app.experiments import EXPERIMENTS
    found = {f"{module}:{func}" for *_, module, func in calls}
    named = {t for t, _ in cli.COMMANDS.values()} | {e.presets for e in EXPERIMENTS if e.presets} | {
        f for e in EXPERIMENTS for f in e.figures} | {s for e in EXPERIMENTS for s in e.stages}
    assert len(named) >= 30 and named <= found  # the command table's and the records' names are all checked below
    bad = unresolved_named_calls()
    assert not bad, "calls by string name that do not resolve:\n" + "\n".join(bad)


@pytest.mark.parametrize("name,source,expected", [
    ("initlab.app.cli.fake", 'C = {"x": "initlab.app.commands.nowhere:main"}\n', "names module initlab.app.commands.nowhere"),
    ("initlab.app.cli.fake", 'C = {"x": "initlab.app.commands.mlmhead:no_such_main"}\n', "names no_such_main, which"),
    ("initlab.theory.attention.fake", 'T = "initlab.synthetic.spt.command:spt_main"\n',
     "the holder may not import it: initlab.theory imports initlab.synthetic.spt.command"),
    ("initlab.synthetic.splade.ood.fake", 'T = "initlab.synthetic.splade.phase.runner:cell_train"\n',
     "the holder may not import it: initlab.synthetic.splade.ood.fake imports initlab.synthetic.splade.phase.runner"),
])
def test_the_check_catches_a_bad_call_by_string_name(tmp_path, name, source, expected):
    fake = tmp_path / "fake.py"
    fake.write_text(source)
    bad = [b for b in unresolved_named_calls({**_modules(), name: fake}) if "fake.py" in b]
    assert bad and expected in bad[0], bad


def test_every_module_named_by_a_string_exists():
    """A module named by a string alone (the SPT workers' ``preload``, the figure scripts of the command page) is an
    import made later: it must exist."""
    found = {target for *_, target in named_modules()}
    from initlab.app.docgen.cli_docs import FIGURE_SCRIPTS
    assert "initlab.synthetic.spt.cells" in found and set(FIGURE_SCRIPTS) <= found
    bad = unresolved_named_modules()
    assert not bad, "module names that do not resolve:\n" + "\n".join(bad)


def test_every_lazy_name_of_a_package_resolves():
    """A package that defers its imports (``initlab.synthetic.spt``'s ``_LAZY``) reads each name from a submodule
    that exists and defines it."""
    assert {("initlab.synthetic.spt", "run", "runner")} <= {(p, a, s) for p, _, _, a, s in lazy_names()}
    bad = unresolved_lazy_names()
    assert not bad, "lazy names that do not resolve:\n" + "\n".join(bad)


def test_every_exported_name_is_defined():
    """``from x import *`` and the documented API read ``__all__``: each name in it exists."""
    bad = undefined_exports()
    assert not bad, "exported names that are not defined:\n" + "\n".join(bad)


def test_the_check_catches_an_undefined_export(tmp_path):
    fake = tmp_path / "fake.py"
    fake.write_text('__all__ = ["f", "g"]\n\n\ndef f():\n    pass\n')
    bad = [b for b in undefined_exports({**_modules(), "initlab.runs_fake": fake}) if "fake.py" in b]
    assert bad == [f"{fake}:1: initlab.runs_fake.__all__ names g, which it does not define"], bad


def test_the_check_catches_a_bad_module_name(tmp_path):
    fake = tmp_path / "fake.py"
    fake.write_text('P = ("initlab.synthetic.spt.nowhere", "initlab.synthetic.spt.cells")\n')
    bad = [b for b in unresolved_named_modules({**_modules(), "initlab.synthetic.spt.fake": fake}) if "fake.py" in b]
    assert bad == [f"{fake}:1: initlab.synthetic.spt.nowhere names a module that does not exist"], bad


def test_the_check_catches_a_bad_lazy_name(tmp_path):
    fake = tmp_path / "__init__.py"
    fake.write_text('_LAZY = {**{n: "runner" for n in ("run", "no_such_name")}, "summarize": "nowhere"}\n')
    bad = unresolved_lazy_names({**_modules(), "initlab.synthetic.spt": fake})
    assert bad == [f"{fake}:1: no_such_name is read from initlab.synthetic.spt.runner, which does not define it",
                   f"{fake}:1: summarize is read from initlab.synthetic.spt.nowhere, which does not exist"], bad


def test_tests_mirror_the_packages():
    """``tests/<folder>/`` holds the tests of the package in ``<folder>/`` (``tests/`` itself: the root modules;
    ``tests/benchmarks/``: the benchmark scripts): a test folder that mirrors no package is a straggler."""
    packages = {n for n, p in _modules().items() if p.name == "__init__.py"}
    stray = []
    for folder in sorted({p.parent for p in (ROOT / "tests").rglob("test_*.py")}):
        rel = folder.relative_to(ROOT / "tests").parts
        if rel[:1] == ("benchmarks",):
            continue
        if ".".join(["initlab", *rel]) not in packages:
            stray.append(str(folder.relative_to(ROOT)))
    assert not stray, f"test folders that mirror no package: {stray}"


#: packages without a test folder of their own, and why: each holds only sub-packages and a docstring, so there is
#: nothing of its own to test (its sub-packages' folders hold their tests)
UNTESTED_PACKAGES: dict[str, str] = {
    "initlab.synthetic": "only the sub-packages spt, splade and diagnose, each with its tests folder",
    "initlab.theorycheck": "only the sub-packages verify and score_scale, each with its tests folder",
}


def _docstring_only(path: Path) -> bool:
    body = ast.parse(path.read_text(), filename=str(path)).body
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body)


def untested_packages(modules: dict[str, Path] | None = None, root: Path = ROOT) -> list[str]:
    """Every package ``initlab.x.y`` without a folder ``tests/x/y/`` holding a ``test_*.py`` file (``tests/`` itself
    for the namespace root), the justified :data:`UNTESTED_PACKAGES` left out."""
    mods = modules if modules is not None else _modules()
    out = []
    for name, path in sorted(mods.items()):
        if path.name != "__init__.py" or name in UNTESTED_PACKAGES:
            continue
        folder = root.joinpath("tests", *name.split(".")[1:])
        if not any(folder.glob("test_*.py")):
            out.append(f"{name}: no test file in {folder.relative_to(root)}/")
    return out


def test_every_package_has_a_mirroring_test_folder():
    """Every package's tests live in its mirror folder (``initlab.realdata.lra`` -> ``tests/realdata/lra/``), which
    holds at least one test file; an exception holds nothing of its own to test."""
    bad = untested_packages()
    assert not bad, "packages without tests in their mirror folder:\n" + "\n".join(bad)
    mods = _modules()
    for name in UNTESTED_PACKAGES:
        own = [m for m in mods if m.startswith(name + ".") and m.count(".") == name.count(".") + 1
               and mods[m].name != "__init__.py"]
        assert name in mods and _docstring_only(mods[name]) and own == [], f"{name} is no longer a justified exception"


def test_the_check_catches_a_package_without_tests(tmp_path):
    fake = tmp_path / "__init__.py"
    fake.write_text('"""A new package."""\n')
    assert untested_packages({**_modules(), "initlab.nn.fresh": fake}) == ["initlab.nn.fresh: no test file in tests/nn/fresh/"]


def test_the_realdata_experiments_do_not_import_each_other(tmp_path):
    fake = tmp_path / "fake.py"
    fake.write_text("def f():\n    from initlab.realdata.lra.config import TOY\n")
    bad = [b for b in violations({**_modules(), "initlab.realdata.splade.fake": fake}) if "fake.py" in b]
    assert bad and "(initlab.realdata: lra is not below splade)" in bad[0], bad


def test_no_import_cycles():
    """Two modules that import each other (even lazily, inside a function) have no order to be read in."""
    assert import_cycles() == []


def test_the_cycle_check_catches_a_lazy_cycle(tmp_path):
    """Mutation: the phase runner imports the summary lazily; a summary importing the runner back is a cycle."""
    fake = tmp_path / "summary.py"
    fake.write_text("def f():\n    from initlab.synthetic.splade.phase.runner import plan\n")
    mods = {**_modules(), "initlab.synthetic.splade.phase.summary": fake}
    assert ["initlab.synthetic.splade.phase.runner", "initlab.synthetic.splade.phase.summary"] in import_cycles(mods)
