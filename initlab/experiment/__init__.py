"""What every experiment package exposes to the roof: its record (:mod:`.record`: ``EXPERIMENT``, with its claims,
presets, commands, reproduce stages and figures), the record of one ``initlab reproduce`` stage and the rule for a
finished stage folder (:mod:`.stage`), the command-line options its commands share (:mod:`.options`), the words
of a verdict in every report and table (:mod:`.text`) and the record of a README claims row (:mod:`.rows`)."""
