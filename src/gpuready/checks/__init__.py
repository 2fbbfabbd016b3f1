"""Checks: pure functions from facts to findings, registered by stable id (registry.py `check`, `log_check`).

The machine's facts (facts.types) and what diagnose's log readers saw (facts.log_facts) are judged here alike; the
modules, in the order a report lists their findings, are registry.CHECK_MODULES."""
