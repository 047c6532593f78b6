"""Deterministic loss injection for the SPLADE training guards (a guard test must not depend on whether a CPU
rounds a diverging run to NaN or to a large finite loss).

``multiply_loss(factor, at_step)`` wraps :func:`initlab.realdata.splade.train.make_loss` so that every loss
term of optimisation step ``at_step`` (1-based) and later is multiplied by ``factor`` (NaN, or a large
number for the divergence rule); the gradients see it too. Run as a script
(``python tests/realdata/splade/splade_loss_injection.py FACTOR AT_STEP initlab-arguments...``, e.g. under torchrun)
it applies the wrapper and then runs the ``initlab`` command line.

``record_dropout_probe(path)`` instead writes, at the first loss of each process, a probe dropout mask drawn
from the process's random state (without consuming it) to ``path.<rank>`` (script form:
``... splade_loss_injection.py probe PATH initlab-arguments...``).
"""

from __future__ import annotations

import sys


def multiply_loss(factor: float, at_step: int, setattr_=setattr) -> None:
    from initlab.realdata.splade import train as splade_train

    real = splade_train.make_loss

    def make_loss(*args, **kwargs):
        loss, callback = real(*args, **kwargs)
        forward, calls = loss.forward, {"n": 0}

        def injected(*fa, **fk):
            out = forward(*fa, **fk)
            calls["n"] += 1
            if calls["n"] >= at_step:
                out = {k: v * factor for k, v in out.items()} if isinstance(out, dict) else out * factor
            return out

        loss.forward = injected
        return loss, callback

    setattr_(splade_train, "make_loss", make_loss)


def record_dropout_probe(path: str) -> None:
    import os

    import torch

    from initlab.realdata.splade import train as splade_train

    real = splade_train.make_loss

    def make_loss(*args, **kwargs):
        loss, callback = real(*args, **kwargs)
        forward, seen = loss.forward, {"done": False}

        def probed(*fa, **fk):
            if not seen["done"]:
                seen["done"] = True
                with torch.random.fork_rng(devices=[]):
                    mask = torch.bernoulli(torch.full((256,), 0.9))
                torch.save(mask, f"{path}.{os.environ.get('RANK', '0')}")
            return forward(*fa, **fk)

        loss.forward = probed
        return loss, callback

    splade_train.make_loss = make_loss


if __name__ == "__main__":
    if sys.argv[1] == "probe":
        record_dropout_probe(sys.argv[2])
    else:
        multiply_loss(float(sys.argv[1]), int(sys.argv[2]))
    from initlab.app import cli

    sys.exit(cli.main(sys.argv[3:]))
