"""TensorFlow's input data for the training benchmark (tf.data pipelines).

* ImageNet-layout TFRecords (``train-*-of-*`` files of ``tf.train.Example`` with a JPEG in
  ``image/encoded`` and a 1-based label in ``image/class/label``, as the ImageNet build
  scripts write them) read by a tf.data pipeline: files sharded per worker, parallel
  interleave, shuffle, parallel JPEG decode with a random crop and flip, batch, prefetch.
* scikit-learn's bundled digits (8x8 grey, 10 classes, shipped with the package, nothing
  downloaded) for the small real-data model ``digits_cnn`` (docs/experiments.md,
  experiment 8).
* A writer of a small real JPEG TFRecord set from scikit-learn's bundled sample photos,
  for tests and the embedded default campaign::

    python -m archbench.data make-tfrecords --out DIR --images 256 --image-size 64 --shards 4

Which real data a model reads is a property of the model (``models.ModelSpec.dataset``):
``--data real`` means TFRecords from the system's ``data_dir`` for the ImageNet models
and the digits for ``digits_cnn``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from archbench.workloads.training import datasets
from archbench.workloads.training.datasets import (
    LABEL_OFFSET,
    READ_BUFFER_BYTES,
    SHUFFLE_BUFFER,
    DataError,
    tfrecord_files,
)
from archbench.workloads.training.models import spec
from archbench.workloads.training.settings import TrainRun

# ---------------------------------------------------------------- TFRecord reading

def _preprocess(tf, *, image_size: int, num_classes: int, data_format: str, training: bool):
    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
    }

    def parse(serialized):
        example = tf.io.parse_single_example(serialized, features)
        encoded = example["image/encoded"]
        if training:  # Inception-style random crop: 8-100% of the area, aspect 3/4..4/3
            shape = tf.image.extract_jpeg_shape(encoded)
            begin, size, _ = tf.image.sample_distorted_bounding_box(
                shape, bounding_boxes=tf.zeros([1, 0, 4]), min_object_covered=0.1,
                aspect_ratio_range=(0.75, 1.33), area_range=(0.08, 1.0),
                max_attempts=10, use_image_if_no_bounding_boxes=True)
            window = tf.stack([begin[0], begin[1], size[0], size[1]])
            image = tf.image.decode_and_crop_jpeg(encoded, window, channels=3)
        else:
            image = tf.image.decode_jpeg(encoded, channels=3)
        image = tf.image.resize(image, [image_size, image_size], method="bilinear")
        if training:
            image = tf.image.random_flip_left_right(image)
        image = image / 127.5 - 1.0
        if data_format == "NCHW":
            image = tf.transpose(image, [2, 0, 1])
        label = tf.math.floormod(tf.cast(example["image/class/label"], tf.int32) - LABEL_OFFSET,
                                 num_classes)
        return image, label
    return parse


def imagenet_dataset(data_dir: str | os.PathLike, *, batch_size: int, image_size: int,
                     num_classes: int, shard_index: int = 0, num_shards: int = 1,
                     data_format: str = "NHWC", seed: int | None = None, threads: int = 0,
                     training: bool = True):
    """Infinite tf.data pipeline of (images float32 in [-1, 1], labels int32) batches.

    Worker ``shard_index`` of ``num_shards`` reads every num_shards-th file (or every
    num_shards-th record when there are fewer files than workers), so workers read
    disjoint data. ``threads`` > 0 caps the pipeline's private thread pool (processes x
    threads runs must not oversubscribe the node); labels are shifted to 0-based and
    folded into ``num_classes``.
    """
    import tensorflow as tf
    if not 0 <= shard_index < num_shards:
        raise DataError(f"shard {shard_index} is not in 0..{num_shards - 1}")
    files = tfrecord_files(data_dir)
    autotune = tf.data.AUTOTUNE
    by_file = len(files) >= num_shards
    ds = tf.data.Dataset.from_tensor_slices(files)
    if by_file:
        ds = ds.shard(num_shards, shard_index)
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
        ds = ds.interleave(lambda f: tf.data.TFRecordDataset(f, buffer_size=READ_BUFFER_BYTES),
                           cycle_length=min(8, max(1, len(files) // num_shards)),
                           block_length=1, num_parallel_calls=autotune, deterministic=False)
    else:  # fewer files than workers: a deterministic record stream, every n-th record
        ds = ds.flat_map(lambda f: tf.data.TFRecordDataset(f, buffer_size=READ_BUFFER_BYTES))
        ds = ds.shard(num_shards, shard_index).repeat()
    ds = ds.shuffle(SHUFFLE_BUFFER, seed=seed)
    ds = ds.map(_preprocess(tf, image_size=image_size, num_classes=num_classes,
                            data_format=data_format, training=training),
                num_parallel_calls=autotune, deterministic=False)
    ds = ds.batch(batch_size, drop_remainder=True).prefetch(autotune)
    return _with_threads(tf, ds, threads)


def _with_threads(tf, ds, threads: int):
    if threads > 0:
        options = tf.data.Options()
        options.threading.private_threadpool_size = threads
        ds = ds.with_options(options)
    return ds


# ---------------------------------------------------------------- digits

def digits_arrays(image_size: int = 8, data_format: str = "NHWC", seed: int = 0):
    """The digits (:func:`archbench.workloads.training.datasets.digits_arrays`), resized by
    TensorFlow's bilinear resize."""
    return datasets.digits_arrays(image_size, data_format, seed, resize=_resize)


def _resize(x, size: int):
    import tensorflow as tf
    return tf.image.resize(x, [size, size], method="bilinear").numpy()


def digits_dataset(batch_size: int, *, image_size: int = 8, shard_index: int = 0,
                   num_shards: int = 1, data_format: str = "NHWC", seed: int = 0,
                   threads: int = 0):
    """Infinite, shuffled batches of the digits training split, sharded per worker."""
    import tensorflow as tf
    x, y, _, _ = digits_arrays(image_size, data_format)
    if why := datasets.batch_beyond_data("digits", batch_size, num_shards, split=len(x)):
        raise DataError(f"--batch-per-process {why}")  # else a batch repeats images of its shard
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shard(num_shards, shard_index)
    ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    return _with_threads(tf, ds, threads)


# ---------------------------------------------------------------- train.py entry point

def real_dataset(config: TrainRun, *, shard_index: int = 0, num_shards: int = 1):
    """The real-data tf.data pipeline of a training run: digits for models whose dataset
    is digits, else the TFRecords of ``config.data_dir``; this worker's shard."""
    common = dict(image_size=config.image_size, shard_index=shard_index, num_shards=num_shards,
                  data_format=config.data_format, seed=config.seed, threads=config.intra_threads)
    if spec(config.model).dataset == "digits":
        if config.num_classes < 10:
            raise DataError("the digits have 10 classes; --num-classes must be >= 10")
        return digits_dataset(config.batch_per_process, **common)
    return imagenet_dataset(config.data_dir, batch_size=config.batch_per_process,
                            num_classes=config.num_classes, **common)


# ---------------------------------------------------------------- TFRecord writing

def _sample_photos() -> list[np.ndarray]:
    from sklearn.datasets import load_sample_images
    return [np.asarray(img) for img in load_sample_images().images]


def _example(tf, jpeg: bytes, *, label: int, size: int, name: str):
    def b(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    def i(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))
    return tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": b(jpeg), "image/format": b(b"JPEG"), "image/class/label": i(label),
        "image/class/text": b(f"class{label}".encode()), "image/height": i(size),
        "image/width": i(size), "image/channels": i(3), "image/colorspace": b(b"RGB"),
        "image/filename": b(name.encode()),
    }))


def make_tfrecords(out: str | os.PathLike, *, images: int, image_size: int, shards: int,
                   classes: int = 8, seed: int = 0, quality: int = 90) -> list[Path]:
    """Write ``images`` real JPEG examples as ImageNet-layout ``train-XXXXX-of-YYYYY`` shards.

    Each image is a random square crop (30-100% of the short side) of one of
    scikit-learn's bundled photos, resized to ``image_size``, sometimes mirrored; its
    label (1-based, as ImageNet) is 1 + (photo * 4 + quadrant of the crop centre) mod
    ``classes``. Returns the shard paths.
    """
    if images < 1 or shards < 1 or image_size < 8 or classes < 1:
        raise ValueError("images and shards must be >= 1, image_size >= 8, classes >= 1")
    shards = min(shards, images)
    import tensorflow as tf
    photos = _sample_photos()
    rng = np.random.default_rng(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"train-{s:05d}-of-{shards:05d}" for s in range(shards)]
    writers = [tf.io.TFRecordWriter(str(p)) for p in paths]
    try:
        for n in range(images):
            which = int(rng.integers(len(photos)))
            photo = photos[which]
            h, w = photo.shape[:2]
            side = int(rng.uniform(0.3, 1.0) * min(h, w))
            top, left = int(rng.integers(h - side + 1)), int(rng.integers(w - side + 1))
            crop = photo[top:top + side, left:left + side]
            if rng.random() < 0.5:
                crop = crop[:, ::-1]
            resized = tf.image.resize(crop, [image_size, image_size], antialias=True)
            pixels = tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8)
            jpeg = tf.io.encode_jpeg(pixels, quality=quality).numpy()
            quadrant = 2 * int(top + side / 2 >= h / 2) + int(left + side / 2 >= w / 2)
            label = 1 + (which * 4 + quadrant) % classes
            writers[n % shards].write(
                _example(tf, jpeg, label=label, size=image_size, name=f"img{n:06d}.JPEG")
                .SerializeToString())
    finally:
        for writer in writers:
            writer.close()
    return paths


def count_records(data_dir: str | os.PathLike) -> int:
    """Number of examples in the ``train-*-of-*`` files of ``data_dir``."""
    import tensorflow as tf
    return sum(1 for f in tfrecord_files(data_dir) for _ in tf.data.TFRecordDataset(f))


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``make-tfrecords`` writes a small real JPEG TFRecord set; ``count`` counts one."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    p = argparse.ArgumentParser(prog="python -m archbench.data", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    make = sub.add_parser("make-tfrecords", help="write ImageNet-layout JPEG TFRecords")
    make.add_argument("--out", required=True, help="output directory")
    make.add_argument("--images", type=int, required=True, help="number of examples")
    make.add_argument("--image-size", type=int, default=64, help="JPEG height and width")
    make.add_argument("--shards", type=int, default=4, help="number of train-*-of-* files")
    make.add_argument("--classes", type=int, default=8, help="distinct labels (1..classes)")
    make.add_argument("--seed", type=int, default=0)
    count = sub.add_parser("count", help="count the examples of a TFRecord directory")
    count.add_argument("data_dir")
    args = p.parse_args(argv)
    try:
        if args.command == "make-tfrecords":
            paths = make_tfrecords(args.out, images=args.images, image_size=args.image_size,
                                   shards=args.shards, classes=args.classes, seed=args.seed)
            print(f"wrote {args.images} images in {len(paths)} shards to {args.out}")
        else:
            print(count_records(args.data_dir))
    except (DataError, ValueError) as exc:
        print(f"archbench.data: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
