"""``python -m initlab.app.docgen.architecture``: docs/architecture.md rendered from the layer list and the package tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from initlab.app.docgen import architecture as A

ROOT = Path(__file__).resolve().parents[3]


def test_docs_architecture_md_is_generated_from_the_layer_list():
    """docs/architecture.md must equal the generator's output; regenerate with
    `python -m initlab.app.docgen.architecture --docs docs/architecture.md`."""
    committed = (ROOT / "docs" / "architecture.md").read_text()
    assert committed == A.render_docs((ROOT / "docs" / "architecture.template.md").read_text()), (
        "docs/architecture.md is stale: run `python -m initlab.app.docgen.architecture --docs docs/architecture.md`")


def test_every_layer_entry_and_sub_layer_is_described():
    assert {c for layer in A.LAYERS for c in layer} == set(A.LAYER_NOTES)
    assert set(A.SUBLAYERS) == set(A.SUBLAYER_NOTES)
    for pkg, levels in A.SUBLAYERS.items():
        assert len(A.SUBLAYER_NOTES[pkg]) == len(levels), pkg


def test_the_page_shows_every_package_with_its_summary():
    page = (ROOT / "docs" / "architecture.md").read_text()
    pkgs = [n for n, p in A.modules().items() if p.name == "__init__.py"]
    assert "initlab.synthetic.splade.ood" in pkgs and "initlab.theorycheck.verify" in pkgs
    for pkg in pkgs:
        assert f"| `{pkg}` |" in page, pkg
        assert A.summary(A.modules()[pkg]), f"{pkg}: its __init__.py needs a docstring (the page shows its first sentence)"


def test_a_new_package_appears_in_the_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools]\npackages = ["initlab", "initlab.fresh"]\n'
                                             '[tool.setuptools.package-dir]\ninitlab = "initlab"\n')
    (tmp_path / "initlab" / "fresh").mkdir(parents=True)
    (tmp_path / "initlab" / "__init__.py").write_text('"""The root."""\n')
    (tmp_path / "initlab" / "fresh" / "__init__.py").write_text('"""A new room, e.g. for ``x``. Second sentence."""\n')
    (tmp_path / "initlab" / "fresh" / "piece.py").write_text("")
    table = A.render_packages(tmp_path)
    assert "| `initlab.fresh` | `initlab/fresh/` | root | A new room, e.g. for `x`. |" in table


def test_a_template_without_a_placeholder_is_refused():
    with pytest.raises(ValueError, match="PACKAGES"):
        A.render_docs("<!-- LAYERS -->\n<!-- SUBLAYERS -->\n")
