"""initlab diagnose (placeholder, filled below)."""
