from gpuready.cli import entry

entry()
