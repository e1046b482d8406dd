"""Callbacks of the chaos soak (bench/chaos.py); autodiscovered from ``schedules.py``."""
