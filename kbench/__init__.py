"""kbench: judge GPU kernels against PyTorch references."""

__version__ = "0.1.0"
