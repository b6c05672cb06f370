"""The receiver's slice: one Sume delivery checked, recorded and queued. For receiver.py."""
