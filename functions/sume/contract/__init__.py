"""Sume's wire contract: the ``sume-v1`` signature, the event envelope. For store and the slices."""
