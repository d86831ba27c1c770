"""Pretraining: ALBERT's LAMB, learning-rate schedules, distribution strategies and the training loop."""
