"""Support bundles: the raw outputs of standard tools as files in a folder (or a .tar.gz)."""
