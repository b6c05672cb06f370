"""Sume's wire contract: the ``sume-v1`` signature and the event envelope. Imports only core."""
