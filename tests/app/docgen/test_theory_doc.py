"""``python -m initlab.app.docgen.theory_doc``: docs/theory.md rendered from the statement registry, with line links."""

from __future__ import annotations

from pathlib import Path

import pytest

from initlab.app.docgen import theory_doc as D
from initlab.theory.statements import REGISTRY

ROOT = Path(__file__).resolve().parents[3]


def test_every_test_link_resolves():
    for s in REGISTRY:
        for t in s.tests:
            label, href = D.source_link(t)
            assert href.startswith("tests/theory/") and "#L" in href


def test_docs_theory_md_is_generated_from_the_registry():
    """docs/theory.md must equal the generator's output; regenerate with
    `python -m initlab.app.docgen.theory_doc --docs docs/theory.md`."""
    committed = (ROOT / "docs" / "theory.md").read_text()
    assert committed == D.render_docs((ROOT / "docs" / "theory.template.md").read_text()), (
        "docs/theory.md is stale: run `python -m initlab.app.docgen.theory_doc --docs docs/theory.md`")


def test_links_point_at_the_named_definition():
    label, href = D.source_link("initlab.theory.attention.gradient.t1_closed_form")
    assert label == "gradient.t1_closed_form"
    path, line = href.split("#L")
    assert (ROOT / path).read_text().splitlines()[int(line) - 1].startswith("def t1_closed_form(")
    with pytest.raises(ValueError, match="no test function"):
        D.source_link("tests/theory/test_statements.py::test_missing")
    with pytest.raises(ValueError, match="STATEMENTS"):
        D.render_docs("no placeholder")


def test_command_writes_the_page_and_names_a_missing_template(tmp_path, capsys):
    out = tmp_path / "theory.md"
    assert D.main(["--docs", str(out)]) == 0
    assert out.read_text() == D.render_docs((ROOT / "docs" / "theory.template.md").read_text())
    with pytest.raises(SystemExit) as exc:
        D.main(["--docs", str(out), "--template", str(tmp_path / "missing.md")])
    assert exc.value.code == 2 and "argument --template" in capsys.readouterr().err
