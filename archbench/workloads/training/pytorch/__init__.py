"""The PyTorch training loop (framework ``pytorch``): models, data, distributed backends
and the loop, each its own module. Nothing here imports torch at import time."""
