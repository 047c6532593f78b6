"""What every experiment package exposes to the roof: its command-line options (:mod:`.options`)."""
