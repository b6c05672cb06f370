"""The stack's three Lambda functions: one module each owns its environment and grants."""
