"""Real input data for the PyTorch loop: the same bytes the TensorFlow pipeline reads.

* The ImageNet-layout TFRecord shards of the system's data directory
  (:func:`archbench.workloads.training.datasets.tfrecord_files`), read here without TensorFlow:
  :func:`tfrecord_records` walks the file format (length, CRC, payload, CRC) and
  :func:`example_features` the ``tf.train.Example`` protocol buffer. Each worker reads its
  shard as the tf.data pipeline does (every n-th file, or every n-th record when there are
  fewer files than workers); each of its DataLoader worker processes
  (``--loader-workers``) reads every m-th of those. JPEGs are decoded by torchvision with the
  same Inception-style random crop (8-100 % of the area, aspect 3/4-4/3), bilinear resize,
  random flip, scaling to [-1, 1] and 0-based labels folded into the classes.
* scikit-learn's digits for ``digits_cnn``, the same split as the TensorFlow loop.
"""

from __future__ import annotations

import random
import struct
from typing import Iterator

import numpy as np

from archbench.workloads.training.datasets import (
    LABEL_OFFSET,
    SHUFFLE_BUFFER,
    DataError,
    batch_beyond_data,
    digits_arrays,
    tfrecord_files,
)
from archbench.workloads.training.models import spec
from archbench.workloads.training.settings import TrainRun

ENCODED, LABEL = "image/encoded", "image/class/label"


def tfrecord_records(path: str) -> Iterator[bytes]:
    """The payloads of TFRecord file ``path`` in order (CRCs are not checked, as tf.data
    does not by default); DataError on a truncated file."""
    with open(path, "rb") as f:
        while True:
            header = f.read(12)
            if not header:
                return
            if len(header) < 12:
                raise DataError(f"{path}: truncated TFRecord header")
            (length,) = struct.unpack("<Q", header[:8])
            payload = f.read(length)
            if len(payload) < length or len(f.read(4)) < 4:
                raise DataError(f"{path}: truncated TFRecord of {length} bytes")
            yield payload


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of a protocol-buffer message: varints as int,
    length-delimited fields as bytes (fixed-width fields are skipped)."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire in (1, 5):
            pos, value = pos + (8 if wire == 1 else 4), None
        else:
            raise DataError(f"unsupported protocol-buffer wire type {wire}")
        yield number, wire, value


def _int64s(int64_list: bytes) -> list[int]:
    out = []
    for _, wire, value in _fields(int64_list):
        if wire == 2:  # packed
            pos = 0
            while pos < len(value):
                v, pos = _varint(value, pos)
                out.append(v)
        else:
            out.append(value)
    return [v - (1 << 64) if v >= 1 << 63 else v for v in out]


def example_features(payload: bytes) -> dict[str, list]:
    """A serialized ``tf.train.Example`` as {feature name: list of bytes or ints} (its
    bytes_list and int64_list features; float features are left out)."""
    out: dict[str, list] = {}
    for number, _, features in _fields(payload):
        if number != 1:
            continue
        for entry_number, _, entry in _fields(features):
            if entry_number != 1:
                continue
            name, feature = "", b""
            for n, _, v in _fields(entry):
                if n == 1:
                    name = v.decode()
                elif n == 2:
                    feature = v
            for kind, _, values in _fields(feature):
                if kind == 1:
                    out[name] = [v for n, _, v in _fields(values) if n == 1]
                elif kind == 3:
                    out[name] = _int64s(values)
    return out


class ImageNetShards:
    """An endless iterable of (image CHW float32 in [-1, 1], label) of one worker's shard;
    a ``torch.utils.data.IterableDataset`` is made of it by :func:`loader`."""

    def __init__(self, files: list[str], *, shard: int, shards: int, image_size: int,
                 num_classes: int, seed: int):
        self.files, self.shard, self.shards = files, shard, shards
        self.image_size, self.num_classes, self.seed = image_size, num_classes, seed

    def _records(self, part: int, parts: int) -> Iterator[bytes]:
        """This worker's records, endlessly: its files in an order shuffled per pass (the
        same order in each of its loader processes, which take every ``parts``-th record)."""
        by_file = len(self.files) >= self.shards
        mine = self.files[self.shard::self.shards] if by_file else list(self.files)
        order_rng = random.Random(self.seed * 1000 + self.shard)
        while True:
            order = list(mine)
            if by_file:
                order_rng.shuffle(order)
            kept = 0
            for n, payload in enumerate(p for path in order for p in tfrecord_records(path)):
                if not by_file and n % self.shards != self.shard:
                    continue
                if kept % parts == part:
                    yield payload
                kept += 1

    def __iter__(self):
        import torch
        from torchvision.io import decode_jpeg
        from torchvision.transforms import v2
        info = torch.utils.data.get_worker_info()
        part, parts = (info.id, info.num_workers) if info else (0, 1)
        rng = random.Random(self.seed * 1000 + self.shard * 100 + part)
        torch.manual_seed(self.seed * 1000 + self.shard * 100 + part)
        crop = v2.RandomResizedCrop(self.image_size, scale=(0.08, 1.0), ratio=(0.75, 1.33),
                                    interpolation=v2.InterpolationMode.BILINEAR, antialias=False)
        flip = v2.RandomHorizontalFlip()
        buffer: list[bytes] = []
        for payload in self._records(part, parts):
            buffer.append(payload)
            if len(buffer) < SHUFFLE_BUFFER:
                continue
            chosen = buffer.pop(rng.randrange(len(buffer)))
            features = example_features(chosen)
            if ENCODED not in features:
                raise DataError(f"a TFRecord example has no {ENCODED}")
            jpeg = torch.frombuffer(bytearray(features[ENCODED][0]), dtype=torch.uint8)
            image = flip(crop(decode_jpeg(jpeg, mode=torchvision_rgb())))
            label = (int(features.get(LABEL, [-1])[0]) - LABEL_OFFSET) % self.num_classes
            yield image.float() / 127.5 - 1.0, label


def torchvision_rgb():
    """torchvision's "decode as RGB" mode (three channels, as TensorFlow's channels=3)."""
    from torchvision.io import ImageReadMode
    return ImageReadMode.RGB


def loader(config: TrainRun, *, shard: int, shards: int, workers: int):
    """Endless (images, labels) batches of this worker's shard of the run's real data:
    digits for digits models, else the TFRecords of ``config.data_dir``, through a
    DataLoader with ``workers`` worker processes (0: in this process)."""
    import torch
    if spec(config.model).dataset == "digits":
        return digits_batches(config, shard=shard, shards=shards)
    dataset = _Iterable(ImageNetShards(tfrecord_files(config.data_dir), shard=shard, shards=shards,
                                       image_size=config.image_size, num_classes=config.num_classes,
                                       seed=config.seed))
    options = dict(prefetch_factor=4, persistent_workers=True) if workers else {}
    return iter(torch.utils.data.DataLoader(dataset, batch_size=config.batch_per_process, num_workers=workers,
                                            drop_last=True, **options))


def _Iterable(shards: ImageNetShards):
    import torch

    class Dataset(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(shards)
    return Dataset()


def digits_tensors(image_size: int):
    """The digits split of the TensorFlow loop as tensors (N, 1, H, W), resized bilinearly."""
    import torch
    x_train, y_train, x_test, y_test = digits_arrays(8, "NCHW")
    def prepared(x: np.ndarray):
        t = torch.from_numpy(np.ascontiguousarray(x))
        if image_size != 8:
            t = torch.nn.functional.interpolate(t, size=(image_size, image_size), mode="bilinear",
                                                align_corners=False)
        return t
    return prepared(x_train), torch.from_numpy(y_train).long(), prepared(x_test), torch.from_numpy(y_test).long()


def digits_batches(config: TrainRun, *, shard: int, shards: int) -> Iterator:
    """Endless shuffled batches of this worker's shard of the digits training split."""
    import torch
    if config.num_classes < 10:
        raise DataError("the digits have 10 classes; --num-classes must be >= 10")
    x, y, _, _ = digits_tensors(config.image_size)
    if why := batch_beyond_data("digits", config.batch_per_process, shards, split=len(x)):
        raise DataError(f"--batch-per-process {why}")  # else the loop below draws no batch, ever
    x, y = x[shard::shards], y[shard::shards]
    generator = torch.Generator().manual_seed(config.seed + shard)
    while True:
        order = torch.randperm(len(x), generator=generator)
        for i in range(0, len(order) - config.batch_per_process + 1, config.batch_per_process):
            take = order[i:i + config.batch_per_process]
            yield x[take], y[take]
