"""Safe networking: SSRF-safe HTTP for URLs from outside, and URLs made safe to write down."""
