"""Long Range Arena vocabularies and tokenisers: ListOps symbols, UTF-8 bytes, grayscale pixel levels.

Role: text or pixels -> token ids. Every vocabulary starts with two special tokens, ``PAD_ID = 0`` and
``MASK_ID = 1`` (the masked-reconstruction mask token), so a symbol, byte or gray level ``x`` has id
``x + N_SPECIAL``. Sources: Tay et al., "Long Range Arena", ICLR 2021 (the tasks' vocabularies); the
grayscale conversion of LRA's image pipeline (``tf.image.rgb_to_grayscale``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["PAD_ID", "MASK_ID", "N_SPECIAL", "LISTOPS_TOKENS", "BYTE_VOCAB", "LISTOPS_VOCAB", "encode_listops",
           "encode_bytes", "grayscale"]


PAD_ID = 0


MASK_ID = 1


N_SPECIAL = 2


LISTOPS_TOKENS = tuple(str(i) for i in range(10)) + ("[MIN", "[MAX", "[MED", "[SM", "]", "(", ")")


_LISTOPS_ID = {t: i + N_SPECIAL for i, t in enumerate(LISTOPS_TOKENS)}


BYTE_VOCAB = N_SPECIAL + 256


LISTOPS_VOCAB = N_SPECIAL + len(LISTOPS_TOKENS)


def encode_listops(source: str, keep_parens: bool = False, where: str = "ListOps source") -> list[int]:
    """Whitespace tokens of a ListOps ``Source`` string -> ids. Parentheses are dropped unless
    ``keep_parens`` (the S4 loader drops them; they carry no information beyond ``]``).

    Raises:
        ValueError: a token outside :data:`LISTOPS_TOKENS` (``where`` names the file and line).
    """
    ids = []
    for tok in source.split():
        if not keep_parens and tok in ("(", ")"):
            continue
        try:
            ids.append(_LISTOPS_ID[tok])
        except KeyError:
            raise ValueError(f"{where}: unknown ListOps token {tok!r}; expected one of {list(LISTOPS_TOKENS)}") from None
    return ids


def encode_bytes(text: str | bytes, max_len: int) -> list[int]:
    """Character-level (UTF-8 byte) ids ``byte + 2``, truncated to ``max_len`` (LRA Text/Retrieval)."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return [b + N_SPECIAL for b in data[:max_len]]


def grayscale(rgb: np.ndarray) -> np.ndarray:
    """(..., 3) uint8 RGB -> (...) uint8 gray exactly as ``tf.image.rgb_to_grayscale`` (used by LRA's image
    pipeline) computes it on uint8 input: ``x / 255`` in float32, weights ``0.2989 R + 0.5870 G + 0.1140 B``,
    back to uint8 by ``convert_image_dtype``, i.e. truncation of ``gray * 255.5`` (not rounding).

    Raises:
        ValueError: last dimension is not 3.
    """
    rgb = np.asarray(rgb)
    if rgb.shape[-1] != 3:
        raise ValueError(f"rgb: expected last dimension 3, got shape {rgb.shape}")
    flt = rgb.astype(np.float32) * np.float32(1.0 / 255.0)
    g = flt @ np.array([0.2989, 0.5870, 0.1140], dtype=np.float32)
    return np.clip(np.trunc(g * np.float32(255.5)), 0, 255).astype(np.uint8)
