"""Adapter for a workflow rule: write a small real JPEG TFRecord set (ImageNet layout).

Expects ``snakemake.output[0]`` (directory), ``snakemake.params`` images, image_size,
shards (optional: classes, seed) and ``snakemake.log[0]``.
"""

import sys

from archbench.data import make_tfrecords

with open(snakemake.log[0], "w") as log:  # noqa: F821 - provided by Snakemake
    sys.stdout = sys.stderr = log
    params = snakemake.params  # noqa: F821
    paths = make_tfrecords(snakemake.output[0], images=params.images,  # noqa: F821
                           image_size=params.image_size, shards=params.shards,
                           classes=getattr(params, "classes", 8), seed=getattr(params, "seed", 0))
    print(f"wrote {params.images} images in {len(paths)} shards to {snakemake.output[0]}")  # noqa: F821
