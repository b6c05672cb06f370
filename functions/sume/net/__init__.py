"""Safe networking for URLs from outside: SSRF-safe HTTP, the URL policy. For worker and poller."""
