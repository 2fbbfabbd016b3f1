"""Active tests that run inside distributed ranks, one process per GPU (or per CPU rank with gloo)."""
