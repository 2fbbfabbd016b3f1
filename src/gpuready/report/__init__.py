"""Renderers of the report document: console (rich) and JSON."""
