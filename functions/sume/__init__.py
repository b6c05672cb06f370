"""Domain package for the Sume webhook receiver, worker and poller.

Everything here is deployed as part of the one Lambda asset (``functions/``).
"""
