"""Figures only, one module per figure family: each reads saved results (JSON/CSV/NPZ) and draws."""
