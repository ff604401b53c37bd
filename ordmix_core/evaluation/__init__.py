"""Scoring against gold: the metrics, the comparison table, the paper's
experiments."""
