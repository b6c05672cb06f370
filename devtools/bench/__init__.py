"""``make bench``: what one Sume delivery costs, against the floor and the usual alternative.

Dev-only (never deployed, never imported by ``functions/``) and offline: AWS is
answered by moto in-process or by botocore's ``Stubber``, and the local stack
listens on loopback. Each module measures one thing; ``__main__`` runs them side
by side and prints the tables the README quotes.
"""
