"""``make bench``: what one Sume delivery costs, what copying its artifacts and polling
for it cost, each against its floor (and the usual alternative where there is one).

Dev-only (never deployed, never imported by ``functions/``) and offline: AWS is
answered by moto (in-process or its server on loopback) or by botocore's
``Stubber``, and every server listens on loopback. Each module measures one
thing; ``__main__`` runs them side by side and prints the tables docs/bench.md quotes.
"""
