"""The statement registry (initlab.theory.statements): ids, texts, and the names each statement gives."""

from __future__ import annotations

from initlab.theory import statements as S
from initlab.theory.verify import base as verify_base
from initlab.theorycheck.verify import runner as verify


def test_registry_ids_and_every_name_resolves():
    assert [s.id for s in S.REGISTRY] == ["T1", "T1'", "T2", "T3", "T3'", "T4", "T5", "T6", "T7"]
    for s in S.REGISTRY:
        assert s.summary and s.text and s.scope and s.source
        for name in (*s.closed_form, s.derivation, s.check):
            assert callable(S.resolve(name)), name
        assert s.tests and all(t.startswith("tests/theory/") and "::" in t for t in s.tests), s.tests
    assert S.BY_ID == {s.id: s for s in S.REGISTRY}
    assert list(verify.checkers()) == [s.id for s in S.REGISTRY]
    assert verify_base.STATEMENTS == {s.id: s.summary for s in S.REGISTRY}  # verify's descriptions render from the registry
