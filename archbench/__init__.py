"""archbench: benchmark TensorFlow training and HPC kernels across CPU architectures."""

__version__ = "0.1.0"
