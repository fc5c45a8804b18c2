"""The TensorFlow training loop (framework ``tensorflow``): models, data, the backend of
each strategy it runs, its CUDA-stack provenance and the loop, each its own module, laid
out as the other frameworks' packages. Nothing here imports TensorFlow at import time."""
