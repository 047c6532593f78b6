"""``python -m initlab.app.docgen.architecture --docs docs/architecture.md``: the architecture page from the layer list.

:data:`LAYERS` and :data:`SUBLAYERS` are the one-way import rule of the package, the list that
``tests/test_architecture.py`` enforces on the source; :data:`LAYER_NOTES` and :data:`SUBLAYER_NOTES` say what each
entry holds. ``docs/architecture.md`` is ``docs/architecture.template.md`` with its ``<!-- LAYERS -->``,
``<!-- SUBLAYERS -->`` and ``<!-- PACKAGES -->`` lines replaced by tables rendered from these lists and from the
package tree itself (every package of the namespace, found through ``pyproject.toml``'s ``package-dir``, with its
folder, layer and the first sentence of its docstring). A test fails when the committed page differs from this
generator's output, so after adding a package or changing a layer, rerun the command.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path
from typing import Sequence

from initlab.app.docgen.template import render_page_main
from initlab.textio import read_text

__all__ = ["LAYERS", "SUBLAYERS", "LAYER_NOTES", "SUBLAYER_NOTES", "REPO", "package_dirs", "modules", "component",
           "layer_of", "summary", "render_layers", "render_sublayers", "render_packages", "render_docs", "main"]

#: the repository root (``pyproject.toml`` and the template live under it)
REPO = Path(__file__).resolve().parents[3]

#: lowest layer first; packages in one layer may not import each other
LAYERS: list[set[str]] = [
    {"initlab.textio"},
    {"initlab.config"},
    {"initlab.runfile"},
    {"initlab.runs"},
    {"initlab.executor"},
    {"initlab.theory"},
    {"initlab.nn", "initlab.mlmhead", "initlab.evidence"},
    {"initlab.paper_figs", "initlab.diagnose", "initlab.experiment"},
    {"initlab.synthetic", "initlab.realdata", "initlab.theorycheck"},
    {"initlab.app"},
]

#: what each entry of :data:`LAYERS` holds (one line each in the page's layer table)
LAYER_NOTES: dict[str, str] = {
    "initlab.textio": "the one reader of text files: UTF-8, a leading byte-order mark dropped, `TextDecodeError` "
                      "naming file, line and byte offset; imports nothing from initlab",
    "initlab.config": "frozen-dataclass configs: strict `from_dict`, presets as `derive` diffs, each numeric field's "
                      "range beside it (`ranged`, `check_ranges`), `to_dict` / "
                      "`load_config` (which reads through `textio`)",
    "initlab.runfile": "a run is a file: a named base plus the values it changes, each with its reason (TOML, "
                       "`tomllib`); an experiment's `runs/` folder of named, exploratory, archived and base run files",
    "initlab.runs": "run folders: atomic writes, the resolved config written next to results, the config guard, "
                    "resumable cells, the live-run lock, the non-finite and divergence guard, per-rank seeds, the "
                    "input/output path rules",
    "initlab.executor": "the cell executor: a sweep's independent cells in this process, a local pool or on a Dask "
                        "cluster; resume, one progress bar over work units, the cost-model estimate "
                        "([cluster.md](cluster.md))",
    "initlab.theory": "mathematics only: statements, closed forms, symbolic derivations, Monte Carlo, and the checks "
                      "of the statements",
    "initlab.nn": "shared neural code: the sequence encoder, pooling, masking, collapse detection, attention metrics",
    "initlab.mlmhead": "the MLM-head tooling: family detection, rescaling and untying, checkpoint I/O, inspect, the "
                       "fused SPLADE head, tiny-model builders",
    "initlab.evidence": "the statistics of the evidence: intervals, verdict rules, claim families (Holm) (each "
                        "claim's verdict function lives in its experiment's `claims` module)",
    "initlab.paper_figs": "figures: they only read saved results (JSON/CSV/NPZ) and draw",
    "initlab.diagnose": "`initlab diagnose`'s library: data readers, the model under diagnosis, the blind-share "
                        "measurements, probes, the preregistered rule, the report ([diagnose.md](diagnose.md))",
    "initlab.experiment": "what every experiment shares: the record it exposes to the roof (its claims, presets, "
                          "commands, reproduce stages, figures), the reproduce stage record and finished-folder rule, "
                          "its commands' command-line options, the words of a verdict and the claims-row record",
    "initlab.synthetic": "the synthetic experiments on CPU: SPT, SPLADE (phase diagram, out of domain), the "
                         "validation of `initlab diagnose`",
    "initlab.realdata": "the real-data experiments: LRA and SPLADE at scale, the GPU diagnostics",
    "initlab.theorycheck": "the two experiments that run the theory: the theorem checks and the score-scale analysis",
    "initlab.app": "the roof: everything that imports the experiments (the reproduce stages, the commands, the "
                   "console script, the generated documents)",
}

#: inside a package: its layers, lowest first; each layer a list of groups, each group the module prefixes
#: (relative to the package) that may import each other freely. A module imports groups of lower layers only.
SUBLAYERS: dict[str, list[list[tuple[str, ...]]]] = {
    "initlab.theory": [
        [("statements",), ("subspace",)],
        [("verify",)],
        [("attention",), ("score_scale",)],
    ],
    "initlab.synthetic": [
        [("spt",), ("splade",)],
        [("diagnose",)],
    ],
    "initlab.synthetic.splade": [
        [("config", "data", "domains", "model", "families", "train", "measure", "thresholds", "seed_rows", "claims")],
        [("phase",), ("calibration",), ("ood",)],
    ],
    "initlab.realdata": [
        [("timing",)],
        [("lra",), ("splade",)],
        [("gpu_smoke",)],
    ],
    "initlab.theorycheck": [
        [("verify",), ("score_scale",)],
    ],
    "initlab.runs": [
        [("errors",), ("guards",), ("atomic",), ("processes",)],
        [("lock",), ("inputs",)],
        [("paths",)],
        [("folder",)],
    ],
    "initlab.executor": [
        [("cells",)],
        [("cost",), ("worker",)],
        [("bar",)],
        [("report",)],
        [("core",)],
        [("local",), ("cluster",)],
    ],
    "initlab.app": [
        [("experiments",)],
        [("stages",)],
        [("commands",)],
        [("cli",)],
        [("testing",)],
        [("docgen",)],
    ],
    "initlab.app.docgen": [
        [("template",)],
        [("doc_examples",), ("tables",), ("theory_doc",), ("mlmhead_doc",), ("prediction_check",), ("architecture",),
         ("headline_figures",), ("reproduce_power",), ("runs_doc",)],
        [("claims",), ("cli_docs",)],
    ],
}

#: what each level of :data:`SUBLAYERS` holds, one note per level (lowest first)
SUBLAYER_NOTES: dict[str, list[str]] = {
    "initlab.theory": ["the statement registry; the blind subspace",
                       "the protocol every check reports in (`verify.base`: config, result record, tolerances, "
                       "test hook)",
                       "the topics, independent"],
    "initlab.synthetic": ["the two experiments, independent",
                          "the validation of `initlab diagnose`: both SPT arms with `spt`'s training code"],
    "initlab.synthetic.splade": ["the pieces the SPLADE experiments share",
                                 "the phase diagram, the collapse calibration (which reads the phase diagram's saved "
                                 "files only) and the out-of-domain experiment, independent"],
    "initlab.realdata": ["the GPU step timing loop",
                         "the two experiments, LRA and SPLADE at scale, independent",
                         "the GPU smoke test over both pipelines (LRA's GPU check and training, SPLADE's training "
                         "step and head)"],
    "initlab.theorycheck": ["the theorem checks and the score-scale analysis, independent"],
    "initlab.runs": ["the refusals (a finished run, another config, a live run), the non-finite and divergence guard, "
                     "atomic writes and the disk's one-line error, per-rank seeds and torch threads: independent",
                     "the live-run lock; the input fingerprints",
                     "the input and output path rules (they check the lock and the disk)",
                     "the run folder: the config guard and resumable cells"],
    "initlab.executor": ["cells, their progress and order",
                         "the machine and the cost model; what runs in a worker: independent",
                         "the one progress bar over work units",
                         "the execution report: finished, failed, resumed cells",
                         "the core: the executor described as a whole, every name of the modules below re-exported",
                         "this process or a local pool; the Dask bridge: independent"],
    "initlab.app": ["the list of every experiment's record, which the roof loops over",
                    "the reproduce run over the experiments' stages (each runs an experiment, then draws its figures from what it "
                    "saved): the stage loop, the report, the verdict lines",
                    "one module per CLI group, thin over the library and the stages; the bad-input rules",
                    "the console script: the command table (built from the records and the roof's own commands) and dispatch",
                    "the console script called in-process, its exit code and output captured (tests, notebooks)",
                    "the one home of generated documents (it reads the registry and runs commands' code)"],
    "initlab.app.docgen": ["the command line the template-rendered pages share",
                           "the pieces and pages that stand alone",
                           "the README's claims table (over its rows); the command table and page"],
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


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _markdown(rst: str) -> str:
    """Docstring markup as markdown: ``:role:`~x``` and double backquotes become single backquotes."""
    return re.sub(r"``([^`]+)``", r"`\1`", re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", rst))


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, in markdown ('' without a docstring)."""
    doc = ast.get_docstring(ast.parse(read_text(path), filename=str(path))) or ""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    m = re.search(r"(?<![.\w]\w)(?<!e\.g)(?<!i\.e)\.(\s|$)", para)
    return _markdown(para[: m.start() + 1] if m else para)


def render_layers() -> str:
    """The layer table: one row per layer, highest first, each package with its note."""
    rows = ["| layer | packages | holds |", "| --- | --- | --- |"]
    for i in range(len(LAYERS), 0, -1):
        comps = sorted(LAYERS[i - 1])
        rows.append(f"| {i} | {', '.join(f'`{c}`' for c in comps)} | "
                    + "; ".join(_cell(f"`{c.rsplit('.', 1)[1]}`: {LAYER_NOTES[c]}") if len(comps) > 1 else _cell(LAYER_NOTES[c])
                                for c in comps) + " |")
    return "\n".join(rows)


def render_sublayers() -> str:
    """The sub-layer table: per package, its levels lowest first (groups of one level do not import each other)."""
    rows = ["| package | level | groups | holds |", "| --- | --- | --- | --- |"]
    for pkg, levels in SUBLAYERS.items():
        for i, (groups, note) in enumerate(zip(levels, SUBLAYER_NOTES[pkg]), 1):
            names = ", ".join("`" + "`/`".join(g) + "`" for g in groups)
            rows.append(f"| `{pkg}` | {i} | {names} | {_cell(note)} |")
    return "\n".join(rows)


def render_packages(root: Path = REPO) -> str:
    """Every package of the namespace: its folder, layer and the first sentence of its docstring (the modules are
    left out: the page changes when a package is added or described anew, not with every module)."""
    mods = modules(root)
    pkgs = sorted(n for n, p in mods.items() if p.name == "__init__.py")
    rows = ["| package | folder | layer | what it is |", "| --- | --- | --- | --- |"]
    for pkg in pkgs:
        path = mods[pkg]
        comp = component(pkg)
        layer = str(layer_of(comp)) if comp else "root"
        folder = path.parent.relative_to(root).as_posix() + "/"
        rows.append(f"| `{pkg}` | `{folder}` | {layer} | {_cell(summary(path))} |")
    return "\n".join(rows)


PLACEHOLDERS = {"<!-- LAYERS -->": render_layers, "<!-- SUBLAYERS -->": render_sublayers,
                "<!-- PACKAGES -->": render_packages}
HEADER = ("<!-- generated by `python -m initlab.app.docgen.architecture --docs docs/architecture.md` from "
          "docs/architecture.template.md; do not edit -->\n")


def render_docs(template: str) -> str:
    """``template`` with each placeholder line (:data:`PLACEHOLDERS`) replaced by its table.

    Raises:
        ValueError: a placeholder is missing from the template.
    """
    lines = template.splitlines()
    for mark, fn in PLACEHOLDERS.items():
        if mark not in lines:
            raise ValueError(f"template: expected a line {mark!r}")
        lines[lines.index(mark)] = fn()
    return HEADER + "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m initlab.app.docgen.architecture --docs docs/architecture.md [--template PATH]``."""
    return render_page_main(argv, module="initlab.app.docgen.architecture",
                            description="render docs/architecture.md from the layer list and the package tree",
                            docs="docs/architecture.md", template=REPO / "docs" / "architecture.template.md",
                            template_help="template with the lines '<!-- LAYERS -->', '<!-- SUBLAYERS -->' and "
                                          "'<!-- PACKAGES -->'", render=render_docs)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
