"""The roof's own commands, one module per group: ``reproduce``, ``diagnose``, ``mlmhead``. The experiments' commands
live in their packages; the rules every command follows are :mod:`initlab.experiment.options`."""
