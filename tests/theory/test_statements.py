"""The statement registry (initlab.theory.statements) and the generated docs/theory.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from initlab.theory import statements as S
from initlab.theory.verify import base as verify_base
from initlab.theory.verify import runner as verify

ROOT = Path(S.__file__).resolve().parents[1]


def test_registry_ids_and_every_link_resolves():
    assert [s.id for s in S.REGISTRY] == ["T1", "T1'", "T2", "T3", "T3'", "T4", "T5", "T6", "T7"]
    for s in S.REGISTRY:
        assert s.summary and s.text and s.scope and s.source
        for name in (*s.closed_form, s.derivation, s.check):
            assert callable(S.resolve(name)), name
        for t in s.tests:
            label, href = S.source_link(t)
            assert href.startswith("tests/theory/") and "#L" in href
    assert list(verify.checkers()) == [s.id for s in S.REGISTRY]
    assert verify_base.STATEMENTS == {s.id: s.summary for s in S.REGISTRY}  # verify's descriptions render from the registry


def test_docs_theory_md_is_generated_from_the_registry():
    """docs/theory.md must equal the generator's output; regenerate with
    `python -m initlab.theory.statements --docs docs/theory.md`."""
    committed = (ROOT / "docs" / "theory.md").read_text()
    assert committed == S.render_docs((ROOT / "docs" / "theory.template.md").read_text()), (
        "docs/theory.md is stale: run `python -m initlab.theory.statements --docs docs/theory.md`")


def test_links_point_at_the_named_definition():
    label, href = S.source_link("initlab.theory.attention.gradient.t1_closed_form")
    path, line = href.split("#L")
    assert (ROOT / path).read_text().splitlines()[int(line) - 1].startswith("def t1_closed_form(")
    with pytest.raises(ValueError, match="no test function"):
        S.source_link("tests/theory/test_statements.py::test_missing")
    with pytest.raises(ValueError, match="STATEMENTS"):
        S.render_docs("no placeholder")
