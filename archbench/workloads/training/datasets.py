"""Real input data every framework reads alike: where ImageNet-layout TFRecords are
(``train-*-of-*`` files) and how their labels count, scikit-learn's bundled digits as
arrays, and the accuracy of a predictor on held-out images. Each framework's ``data``
module builds its input pipeline on these.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Callable

import numpy as np

TRAIN_PATTERN = "train-*-of-*"
LABEL_OFFSET = 1  # ImageNet TFRecords number classes 1..1000 (0 = background)
SHUFFLE_BUFFER = 1024
READ_BUFFER_BYTES = 8 << 20
DIGITS_TEST_FRACTION = 0.2
DIGITS_IMAGES = 1797  # scikit-learn's bundled digits (load_digits), known without loading them
# real dataset -> the images of its training split where the dataset fixes them (ImageNet's
# are those of the system's TFRecords: no count before a run reads them)
TRAIN_IMAGES = {"digits": DIGITS_IMAGES - int(round(DIGITS_IMAGES * DIGITS_TEST_FRACTION))}


class DataError(RuntimeError):
    """Real data that is missing or unusable (no TFRecords, bad directory, bad shard)."""



def tfrecord_files(data_dir: str | os.PathLike | None) -> list[str]:
    """The sorted ``train-*-of-*`` files of ``data_dir``; DataError if there are none."""
    if not data_dir:
        raise DataError("real data needs a data directory (--data-dir, or the system's "
                        "data_dir) holding ImageNet-layout train-*-of-* TFRecords")
    if not Path(data_dir).is_dir():
        raise DataError(f"data directory {data_dir} does not exist")
    files = sorted(glob.glob(os.path.join(str(data_dir), TRAIN_PATTERN)))
    if not files:
        raise DataError(f"no {TRAIN_PATTERN} TFRecord files in {data_dir}")
    return files


def batch_beyond_data(dataset: str, batch: int, processes: int = 1, *, split: int | None = None) -> str:
    """Why a batch of ``batch`` images per process cannot be drawn from each of
    ``processes`` shards of real ``dataset``'s training split ("" when it can, or when the
    dataset's size is its files', :data:`TRAIN_IMAGES`): the smallest shard holds
    split // processes images, and a batch never repeats an image. ``split``: the split's
    images as read (default: :data:`TRAIN_IMAGES`)."""
    size = TRAIN_IMAGES.get(dataset) if split is None else split
    if size is None or batch <= size // max(processes, 1):
        return ""
    per = f", {size // processes} per process over {processes} processes" if processes > 1 else ""
    return f"{batch} is larger than the {dataset} training split ({size} images{per})"


def digits_arrays(image_size: int = 8, data_format: str = "NHWC", seed: int = 0, *,
                  resize: Callable[[np.ndarray, int], np.ndarray] | None = None,
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's digits as (x_train, y_train, x_test, y_test): float32 in [0, 1],
    one grey channel, resized to ``image_size`` by ``resize(images_nhwc, size)`` (bilinear,
    the framework's own; needed when ``image_size`` is not 8); a fixed 20% test split."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[..., None]
    y = digits.target.astype(np.int32)
    if image_size != 8:
        if resize is None:
            raise ValueError(f"digits at {image_size} pixels need a resize (they are 8x8)")
        x = resize(x, image_size)
    if data_format == "NCHW":
        x = np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2)))
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * DIGITS_TEST_FRACTION))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def accuracy(predict, images: np.ndarray, labels: np.ndarray, *, batch_size: int = 256) -> float:
    """Fraction of ``images`` whose highest logit is the label; ``predict(images)`` gives the
    logits (e.g. a Keras model in eager mode)."""
    correct = 0
    for i in range(0, len(images), batch_size):
        logits = predict(images[i:i + batch_size])
        correct += int(np.sum(np.argmax(np.asarray(logits), axis=1) == labels[i:i + batch_size]))
    return correct / len(images)
