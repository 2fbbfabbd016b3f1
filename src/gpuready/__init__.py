"""gpuready: is this machine ready for multi-GPU PyTorch training?"""

__version__ = "0.1.0"
