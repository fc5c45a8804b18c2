"""archbench: benchmark TensorFlow training and HPC kernels across CPU architectures."""

from archbench.core import llvm_order

llvm_order.install()

__version__ = "0.1.0"
