"""Checkpoints: the Django mirror of checkpoints, intents, receipts, terms and events."""
