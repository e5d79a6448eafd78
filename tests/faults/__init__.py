"""Fault tests: each reproduces one fault a probe found (issue 11), so the next has a home."""
