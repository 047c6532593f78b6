"""What every experiment package exposes to the roof: its record (:mod:`.record`: ``EXPERIMENT``, with its claims,
presets, commands, reproduce stages and figures) and the command-line options its commands share (:mod:`.options`)."""
