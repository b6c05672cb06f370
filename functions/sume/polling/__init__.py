"""The poller's slice: status polls, sweeps and registrations. For poller.py and the CLI."""
