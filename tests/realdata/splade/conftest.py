"""The helper module of this folder (``splade_loss_injection``: deterministic NaN/divergence injection into
the SPLADE loss) importable by name."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
