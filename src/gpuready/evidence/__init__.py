"""Evidence: one reader for what gpuready is given (folders, archives and the archives in them, compressed files, one
pasted tool output) within one set of limits (limits.py, stream.py, reader.py, walk.py, folders.py), the one walk over
folders anyone names (folders.py), and `collect` / `redact` for the bundles gpuready writes."""
