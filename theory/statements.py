"""One registry of the theory statements T1, T1', T2, T3, T3', T4, T5, T6, T7.

Each :class:`Statement` holds its id, a one-line summary (the description column of
``initlab theory verify``), the full statement text, its scope limits, its source, and the dotted names
of its closed form(s), sympy derivation, verify check and tests. The module docstrings of
:mod:`initlab.theory.attention.gradient`, :mod:`~initlab.theory.attention.masked_reconstruction`,
:mod:`~initlab.theory.attention.rowidentical`, :mod:`~initlab.theory.attention.padding_dropout` and
:mod:`~initlab.theory.attention.depth` hold the derivations; ``docs/theory.md`` is rendered from this
registry and ``docs/theory.template.md`` by :mod:`initlab.app.docgen.theory_doc`,

    python -m initlab.app.docgen.theory_doc --docs docs/theory.md

(a test fails when the committed page differs from the generator's output).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["Statement", "REGISTRY", "BY_ID", "resolve"]

SRC_AMOS = 'Amos et al., "Never Train from Scratch: Fair Comparison of Long-Sequence Models Requires Data-Driven Priors", arXiv:2310.02980 (phenomenon)'


@dataclass(frozen=True)
class Statement:
    """One theorem: text and the dotted names of each step that establishes it.

    Attributes:
        id: ``"T1"``, ``"T1'"``, ...; summary: one line (verify's description); text: the full
        statement; scope: where it stops holding (with measured numbers); source: where the formula
        comes from; closed_form, derivation, check: dotted names (``initlab.theory.<module>.<name>``);
        tests: pytest node ids (``tests/theory/<file>.py::<test>``).
    """

    id: str
    title: str
    summary: str
    text: str
    scope: str
    source: str
    closed_form: tuple[str, ...]
    derivation: str
    check: str
    tests: tuple[str, ...]


_AG = "initlab.theory.attention.gradient"
_AM = "initlab.theory.attention.masked_reconstruction"
_AR = "initlab.theory.attention.rowidentical"
_A6 = "initlab.theory.attention.padding_dropout"
_A7 = "initlab.theory.attention.depth"
_SY = "initlab.theory.attention.symbolic"
_CK = "initlab.theory.attention.checks"

REGISTRY: tuple[Statement, ...] = (
    Statement(
        "T1", "query blindness",
        "mean pooling, uniform attention: grad_S L = 1 g^T, g ⟂ 1 (per head, any f, loss, W_O)",
        "One attention layer, mean pooling, no residual, a position-wise f and any differentiable loss, at uniform "
        "attention A_h = 11ᵀ/T: grad_{S_h} L = 1 g_hᵀ with g_h = (1/T) Π V_h r_h, g_hᵀ1 = 0, "
        "r_h = (1/T)[W_O J_f(ȳ)ᵀ ∇_p L]_h. Every query row gets the same gradient (per head, with or without W_O, every T ≥ 2).",
        "Needs identical output-gradient rows: a residual before a non-linear f, CLS pooling or non-uniform attention break it (T5); "
        "row-identical non-uniform attention keeps blindness but changes g (T1').",
        SRC_AMOS + "; the formula is derived from the softmax Jacobian dA_ij/dS_ik = A_ij(δ_jk − A_ik).",
        (f"{_AG}.t1_closed_form", f"{_AG}.uniform_score_gradient_from_R"),
        f"{_SY}.derive_t1", f"{_CK}.check_t1",
        ("tests/theory/attention/test_gradient.py::test_attention_t1_rank_one_equal_rows_closed_form",
         "tests/theory/attention/test_gradient.py::test_attention_t1_pinned_regression"),
    ),
    Statement(
        "T1'", "row-identical attention",
        "any A with identical rows a: grad_S L = 1 g^T, g = diag(a)(I - 1 a^T) V r (blind; T1's g is the case a = 1/T)",
        "If every row of A_h is the same probability vector a_h (S_h,ij = c_i + s_j, e.g. nn.Linear biases with W_Q W_Kᵀ = 0), "
        "then, with mean pooling, no residual, any f and loss: grad_{S_h} L = 1 g_hᵀ, g_h = diag(a_h)(I − 1a_hᵀ) V_h r_h, g_hᵀ1 = 0, "
        "r_h = (1/T)[W_O J_f(ȳ)ᵀ ∇_p L]_h at ȳ = (concat_h V_hᵀ a_h)ᵀ W_O. The gradient lies in Q, blind to every pattern in B.",
        "T1's uniform closed form g = (1/T)ΠVr is wrong on such layers: relative error 0.04 / 0.40 / 4.8 (min / median / max "
        "over the 20 random biased cases of `initlab theory verify`, T1' row, measured 2026-11-30); blindness is not.",
        "Derived here from the softmax Jacobian at A = 1aᵀ. " + SRC_AMOS,
        (f"{_AR}.t1p_closed_form",), f"{_SY}.derive_t1p", f"{_CK}.check_t1p",
        ("tests/theory/attention/test_rowidentical.py::test_t1p_row_identical_closed_form_blind",),
    ),
    Statement(
        "T2", "blind subspace",
        "<grad_S L, P> = 0 for constant-column-sum P; band |i-j|<=w bounded by edge columns",
        "For G = 1gᵀ with g ⟂ 1 and any P: ⟨G, P⟩ = Σ_j g_j (Pᵀ1)_j, which is 0 whenever P has constant column sums "
        "(identity, permutations, circulant bands). For the band |i−j| ≤ w: ⟨G, P⟩ = −Σ_{j∈E} g_j d_j (edge deficits d), "
        "|⟨G, P⟩| ≤ ‖g_E‖‖d‖ ≤ ‖G‖_F ‖d‖/√T, ‖d‖² = w(w+1)(2w+1)/3 (T ≥ 2w); the exact supremum over g ⟂ 1 is ‖Πd‖/√T.",
        "A statement about the blind directions, not about what one step does: see T3's band sentence.",
        "Derived here. " + SRC_AMOS,
        (f"{_AG}.band_edge_deficit", f"{_AG}.band_relative_bound", f"{_AG}.band_sharp_relative_bound"),
        f"{_SY}.derive_t2", f"{_CK}.check_t2",
        ("tests/theory/attention/test_gradient.py::test_attention_t2_blind_patterns_and_band_bound",
         "tests/theory/attention/test_gradient.py::test_attention_t2_bound_is_attained_up_to_centering"),
    ),
    Statement(
        "T3", "parameter gradients (no biases)",
        "grad_M L = T xbar (C W_V r)^T rank one; grad_WQ, grad_WK closed forms",
        "With S_h = X M_h Xᵀ, M_h = W_Q W_Kᵀ/√d_k, at uniform attention: grad_{M_h} L = T x̄ (C W_V[h] r_h)ᵀ (rank one), "
        "x̄ = Xᵀ1/T, C = XᵀΠX/T; grad_{W_Q} = grad_M W_K/√d_k (every column ∥ x̄), grad_{W_K} = grad_Mᵀ W_Q/√d_k. One step in M "
        "changes S by the rank-one −ηT(Xx̄)(XCW_V r)ᵀ, a step in (W_Q, W_K) by a rank ≤ 2 matrix. So one step cannot create a "
        "band-shaped (high-rank) score matrix; it can still concentrate attention near the diagonal (see scope). "
        "Without biases and with centred tokens (x̄ = 0) all three gradients vanish.",
        "'Cannot create a band' is about band-shaped S only: the rank-2 S_ij = β(2ij − j²) = β(i² − (i−j)²) puts 0.99 of the "
        "attention on |i−j| ≤ 2 at T = 30, β = 0.5 (a row constant plus −β(i−j)²). With Q/K biases the centred-token "
        "statement fails (T3').",
        "Derived here. " + SRC_AMOS,
        (f"{_AG}.t3_closed_form", f"{_AG}.qk_closed_form"), f"{_SY}.derive_t3", f"{_CK}.check_t3",
        ("tests/theory/attention/test_gradient.py::test_attention_t3_bilinear_gradient_rank_one",
         "tests/theory/attention/test_rowidentical.py::test_t3_rank2_scores_concentrate_near_diagonal"),
    ),
    Statement(
        "T3'", "parameter gradients with Q/K biases",
        "nn.Linear Q/K with biases, W_Q W_K^T = 0: closed forms of grad W_Q, b_Q, W_K, b_K; centred tokens: grad W_K != 0",
        "S_h = (XW_Q + 1b_Qᵀ)(XW_K + 1b_Kᵀ)ᵀ/√d_k with W_Q[h]W_K[h]ᵀ = 0: attention is row-identical, a = softmax(XW_K b_Q/√d_k), "
        "and with C_a = Σ_j a_j (x_j − x̄_a)(x_j − x̄_a)ᵀ, u = W_Kᵀ C_a W_V r: grad W_Q = (T/√d_k) x̄ uᵀ, grad b_Q = (T/√d_k) u, "
        "grad W_K = (T/√d_k)(C_a W_V r)(W_Qᵀx̄ + b_Q)ᵀ, grad b_K = 0. With centred tokens grad W_Q = 0 but "
        "grad W_K = (T/√d_k) C_a W_V r b_Qᵀ ≠ 0 (b_Q ≠ 0) and grad b_Q ≠ 0 (W_K ≠ 0). The row-centred first-order score step "
        "(dS)Π lies in Q (query-independent) when W_Q = W_K = 0, and when W_Q = 0 with centred tokens.",
        "Otherwise (W_Q ≠ 0, or uncentred tokens with W_K ≠ 0) the first-order step has rank ≤ 2 and a blind component.",
        "Derived here from T1' and the chain rule through the nn.Linear layout. " + SRC_AMOS,
        (f"{_AR}.qk_bias_closed_form", f"{_AR}.first_order_score_step"), f"{_SY}.derive_t3p", f"{_CK}.check_t3p",
        ("tests/theory/attention/test_rowidentical.py::test_t3p_bias_gradients_closed_form",
         "tests/theory/attention/test_rowidentical.py::test_t3p_centred_tokens_and_query_independent_step"),
    ),
    Statement(
        "T4", "masked reconstruction sees the blind subspace",
        "masked reconstruction: blind component != 0; E<D,P> = kappa(C) Psi(P) (Monte Carlo)",
        "Loss (1/T)Σ_i m_i ℓ(z_i, x_i) on masked positions: rows of R differ and the blind component (1/T)(R − 1r̄ᵀ)VᵀΠ is non-zero "
        "for generic data. Markov tokens (repeat w.p. p), Bernoulli(q) masks, path C = W_V W_D, logit-linear loss: "
        "E⟨D, P⟩ = κ(C)Ψ(P), κ = (tr C − 1ᵀC1/K)/K, Ψ = q(1−q)/T² Σ_{i≠j} p^|i−j| (P_ij − P̄_i); entry-wise "
        "E D_ij = κ q(1−q)/T² (h_ij − mean_k h_ik), h_ij = p^|i−j|[i≠j]. Copy path C = βI: κ > 0 and Ψ(off-diagonal band) > 0.",
        "Entry-wise, descent raises key j for query i only where p^|i−j| exceeds the row mean of h: at small p only the nearest keys "
        "rise (p = 0.1, T = 8 or 16: E⟨D, P_{|i−j|=2}⟩ < 0, the |i−j| = 2 keys are lowered; verify checks T = 8, q = 0.5 by Monte Carlo). At a random init κ has a symmetric law "
        "(mean 0); for κ(C) = 0 the expected projection vanishes while per-sequence blind components do not.",
        "Derived here; checked exactly by enumeration. " + SRC_AMOS,
        (f"{_AM}.expected_projection", f"{_AM}.expected_descent"), f"{_SY}.derive_t4", f"{_CK}.check_t4",
        ("tests/theory/attention/test_masked_reconstruction.py::test_attention_t4_generic_data_rows_differ_and_blind_component_nonzero",
         "tests/theory/attention/test_masked_reconstruction.py::test_t4_small_p_lowers_distance_two_keys"),
    ),
    Statement(
        "T5", "boundaries of T1",
        "residual+nonlinear f, CLS pooling, non-uniform A: blind component closed forms",
        "At uniform attention P_B(grad_{S_h} L) = (1/T)(R_h − 1r̄_hᵀ)V_hᵀΠ exactly: a residual X + OW_O before a non-linear f "
        "makes it non-zero (linear f: T1 holds); CLS pooling gives blind fraction exactly √(1 − 1/T); at S = εS_1 with an affine f "
        "the blind component is of first order in ε with a closed-form coefficient (zero at T = 2).",
        "The affine-f precondition of the first-order formula is tested on m + 2 random points (a midpoint test let "
        "f(y) = [y, (u·y)²] through; for that f the formula is 2.4% off finite differences in "
        "tests/theory/attention/test_validation_gaps.py).",
        "Derived here. " + SRC_AMOS,
        (f"{_AG}.blind_component_closed_form", f"{_AG}.cls_blind_fraction", f"{_AG}.nonuniform_first_order"),
        f"{_SY}.derive_t5", f"{_CK}.check_t5",
        ("tests/theory/attention/test_gradient.py::test_attention_t5_cls_pooling_blind_fraction",
         "tests/theory/attention/test_gradient.py::test_attention_t5_nonuniform_first_order",
         "tests/theory/attention/test_validation_gaps.py::test_nonuniform_first_order_rejects_quadratic_f"),
    ),
    Statement(
        "T6", "padding masks and dropout",
        "key padding + length-aware pooling: 1_valid g^T on the valid block; dropout: blind in expectation over masks",
        "(a) Key padding (L valid positions), padded keys at −∞, pooling over valid rows: grad_S L = 1_valid gᵀ with T1's g for "
        "the L valid tokens (T → L), 0 outside the valid block. Projecting the full T×T matrix without the mask reports "
        "√(1 − L/T); with key_padding_mask the projections report 0. (b) Attention or output dropout: one mask gives a blind "
        "component; for any mask law invariant under query permutations (i.i.d. dropout), E_M[grad_S L] = 1ḡᵀ, ḡ ⟂ 1, exactly; "
        "a Monte Carlo mean over n masks has blind fraction ∝ n^(−1/2).",
        "Needs mean pooling without residual; with a residual the query-permutation symmetry, and (b), fail.",
        "Derived here (symmetry of mean pooling under query permutations). Dropout: Srivastava et al., JMLR 2014. " + SRC_AMOS,
        (f"{_A6}.padded_closed_form", f"{_A6}.unmasked_padding_blind_fraction", f"{_A6}.exact_dropout_expectation"),
        f"{_SY}.derive_t6", f"{_CK}.check_t6",
        ("tests/theory/attention/test_padding_dropout.py::test_t6_padding_closed_form_and_masked_projection",
         "tests/theory/attention/test_padding_dropout.py::test_t6_dropout_exact_expectation_is_blind"),
    ),
    Statement(
        "T7", "depth and residuals",
        "L-layer stacks: no residual -> first layer blind (any later layers); residual + linear uniform -> blind; else measured",
        "First layer at uniform attention in a stack of pre-norm blocks, mean pooling: (a) without residuals the network after "
        "O_1 is permutation-invariant, so grad_{S_1} L = 1gᵀ, g = (1/T)ΠV_1 r, r = (1/T)∇_ō Φ(1ōᵀ), for any later attention "
        "(uniform or random), FFN and LayerNorm; (b) with residuals and later layers that are uniform-attention and linear, "
        "r = (1/T) W_O[1] Π_l (I + W_V[l]W_O[l]) W_head ∇L (blind); (c) residual with a random-attention later layer, an FFN or "
        "LayerNorm: blind component ≠ 0 (measured table).",
        "Case (c) is the experiment model: one pre-norm block with residual, FFN, LayerNorm and random W_Q, W_K (see the table).",
        "Derived here (permutation symmetry; identity (G)). Pre-norm: Xiong et al., arXiv:2002.04745. " + SRC_AMOS,
        (f"{_A7}.no_residual_closed_form", f"{_A7}.residual_linear_closed_form"), f"{_SY}.derive_t7", f"{_CK}.check_t7",
        ("tests/theory/attention/test_depth.py::test_t7_no_residual_closed_form_any_later_layers",
         "tests/theory/attention/test_depth.py::test_t7_residual_cases"),
    ),
)

BY_ID = {s.id: s for s in REGISTRY}


def resolve(dotted: str):
    """The object a registry entry names, e.g. ``initlab.theory.attention.gradient.t1_closed_form``.

    Raises:
        ImportError: the module does not exist; AttributeError: the module has no such name.
    """
    mod, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(mod), name)
