from gpuready.cli.main import entry

entry()
