"""Checks: pure functions from facts to findings, registered by stable id."""
