"""The load-dtype policy of initlab.mlmhead.precision: float32 master weights unless asked, and a warning."""

from __future__ import annotations

import types
import warnings

import pytest
import torch

from initlab.mlmhead.precision import dtype_kwargs, resolve_weights_dtype, stored_dtype


def _cfg(**kw):
    return types.SimpleNamespace(**kw)


def test_stored_dtype_reads_both_names_and_strings():
    assert stored_dtype(_cfg(dtype=torch.bfloat16)) == torch.bfloat16
    assert stored_dtype(_cfg(torch_dtype="float16")) == torch.float16
    assert stored_dtype(_cfg(dtype="torch.float32")) == torch.float32
    assert stored_dtype(_cfg()) is None and stored_dtype(_cfg(dtype="auto")) is None
    with pytest.raises(ValueError, match="not a torch dtype"):
        stored_dtype(_cfg(dtype="bf17"))
    with pytest.raises(ValueError, match="floating-point"):
        stored_dtype(_cfg(dtype=torch.int8))


def test_resolve_weights_dtype_defaults_to_float32_and_says_so():
    with pytest.warns(UserWarning, match=r"backbone: its checkpoint stores bfloat16 weights; loading them in float32"):
        assert resolve_weights_dtype(_cfg(dtype=torch.bfloat16)) == torch.float32
    with pytest.warns(UserWarning, match=r"training with float16 master weights \(--set weights_dtype=stored\)"):
        assert resolve_weights_dtype(_cfg(dtype=torch.float16), "stored") == torch.float16
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float32 stored, float32 loaded: nothing to say
        assert resolve_weights_dtype(_cfg(dtype=torch.float32)) == torch.float32
        assert resolve_weights_dtype(_cfg(), "stored") == torch.float32
    with pytest.raises(ValueError, match=r"--set weights_dtype 'fp8': expected one of"):
        resolve_weights_dtype(_cfg(), "fp8")


def test_dtype_kwargs_names_the_keyword_of_this_transformers():
    import transformers

    kw = dtype_kwargs(torch.float32)
    assert kw in ({"dtype": torch.float32}, {"torch_dtype": torch.float32})
    if int(transformers.__version__.split(".")[0]) >= 5:
        assert kw == {"dtype": torch.float32}
