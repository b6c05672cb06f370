"""The whole system on a laptop: a local stack on moto, the Sume simulator, the demo.

Dev-only, never deployed: ``functions/`` never imports it. ``python -m devstack``
(``make run``) starts the local stack; ``python -m devstack.simulator`` plays Sume;
``python -m devstack.demo`` (``make demo``) runs a scenario and checks the invariants.
"""
