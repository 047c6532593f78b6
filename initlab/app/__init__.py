"""The roof: everything that imports the experiments.

* :mod:`initlab.app.stages` -- ``initlab reproduce``'s run over the stages (each defined with its experiment: run
  it, draw its figures), its report and verdict lines;
* :mod:`initlab.app.commands` -- one module per ``initlab`` command group, each ``main()`` thin over library code;
* :mod:`initlab.app.cli` -- the ``initlab`` console script: the command registry and dispatch;
* :mod:`initlab.app.docgen` -- the one home of generated documents (command tables, claims and result tables,
  docs/theory.md, docs/mlmhead.md's example, the documented-commands check).

Imports flow one way inside it too (``docs/architecture.md``): stages, then commands, then cli, then docgen.
"""
