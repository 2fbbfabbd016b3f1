"""Spawning ranks (locally, or under torchrun), their progress posts, the watchdog, and partial results."""
