"""The synthetic SPLADE phase diagram: four backbone families x head scale s x MLM-head rescaling k.

What is run is fixed in :mod:`.config` (grid, recipe, analysis thresholds, presets); one cell is trained,
evaluated and inspected by :mod:`.cell`; the sweep around the cells is :mod:`.runner` (whose docstring states
the design); the tables, claim verdicts and theory comparison read the saved cells in :mod:`.report`, and
:mod:`.summary` writes them as files.
"""
