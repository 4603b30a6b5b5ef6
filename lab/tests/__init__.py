"""Tests of the lab: run apart from the product's suite (`python -m pytest
lab/tests`, and `-m slow` for the slow ones)."""
