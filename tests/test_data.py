"""Real data: the TFRecord writer, the tf.data pipeline (sharding, shapes) and the digits."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

from archbench.workloads.training.tensorflow import data


@pytest.fixture(scope="module")
def tfrecords(tmp_path_factory):
    out = tmp_path_factory.mktemp("tfrecords")
    data.make_tfrecords(out, images=24, image_size=32, shards=4, classes=5)
    return out


def _labelled_shards(directory, files: int, per_file: int):
    """TFRecords whose every record's label is 1 + its file index * 100 + its position."""
    import tensorflow as tf
    jpeg = tf.io.encode_jpeg(tf.zeros((8, 8, 3), tf.uint8)).numpy()
    for f in range(files):
        with tf.io.TFRecordWriter(str(directory / f"train-{f:05d}-of-{files:05d}")) as w:
            for i in range(per_file):
                w.write(data._example(tf, jpeg, label=1 + f * 100 + i, size=8, name="x").SerializeToString())


def _labels(ds, batches: int) -> set[int]:
    return {int(v) for _, y in ds.take(batches) for v in y.numpy()}


def test_writer_makes_imagenet_layout_jpeg_shards(tfrecords):
    import tensorflow as tf
    files = sorted(glob.glob(str(tfrecords / "train-*-of-*")))
    assert [os.path.basename(f) for f in files] == [f"train-0000{i}-of-00004" for i in range(4)]
    assert data.count_records(tfrecords) == 24
    raw = next(iter(tf.data.TFRecordDataset(files[0])))
    example = tf.train.Example.FromString(raw.numpy())
    feature = example.features.feature
    image = tf.io.decode_jpeg(feature["image/encoded"].bytes_list.value[0])
    assert image.shape == (32, 32, 3)
    assert float(tf.math.reduce_std(tf.cast(image, tf.float32))) > 5  # real pixels, not flat
    assert 1 <= feature["image/class/label"].int64_list.value[0] <= 5
    assert feature["image/format"].bytes_list.value[0] == b"JPEG"


def test_pipeline_yields_normalised_batches(tfrecords):
    ds = data.imagenet_dataset(tfrecords, batch_size=4, image_size=16, num_classes=5, seed=1)
    images, labels = next(iter(ds))
    assert images.shape == (4, 16, 16, 3) and images.dtype.name == "float32"
    assert -1.0 <= float(np.min(images)) and float(np.max(images)) <= 1.0
    assert labels.dtype.name == "int32" and set(labels.numpy()) <= set(range(5))
    nchw = data.imagenet_dataset(tfrecords, batch_size=2, image_size=16, num_classes=5,
                                  data_format="NCHW")
    assert next(iter(nchw))[0].shape == (2, 3, 16, 16)


def test_pipeline_repeats_past_the_end(tfrecords):
    ds = data.imagenet_dataset(tfrecords, batch_size=8, image_size=8, num_classes=5)
    assert sum(1 for _ in ds.take(10)) == 10  # 80 images from 24 records


def test_workers_read_disjoint_files(tmp_path):
    _labelled_shards(tmp_path, files=4, per_file=3)
    seen = []
    for shard in range(2):
        ds = data.imagenet_dataset(tmp_path, batch_size=2, image_size=8, num_classes=1000,
                                   shard_index=shard, num_shards=2, training=False)
        seen.append({(label + 1) // 100 for label in _labels(ds, 20)})
    assert seen == [{0, 2}, {1, 3}]


def test_fewer_files_than_workers_shards_records(tmp_path):
    _labelled_shards(tmp_path, files=1, per_file=6)
    def shard(index):
        return data.imagenet_dataset(tmp_path, batch_size=1, image_size=8, num_classes=1000,
                                     shard_index=index, num_shards=2, training=False)
    first, second = _labels(shard(0), 40), _labels(shard(1), 40)
    assert first == {0, 2, 4} and second == {1, 3, 5}


def test_missing_data_is_a_clear_error(tmp_path):
    with pytest.raises(data.DataError, match="data directory"):
        data.tfrecord_files(None)
    with pytest.raises(data.DataError, match="does not exist"):
        data.tfrecord_files(tmp_path / "nope")
    with pytest.raises(data.DataError, match="no train-"):
        data.tfrecord_files(tmp_path)
    with pytest.raises(data.DataError, match="shard"):
        data.imagenet_dataset(tmp_path, batch_size=1, image_size=8, num_classes=10, shard_index=2,
                              num_shards=2)


def test_digits_split_and_batches():
    x_train, y_train, x_test, y_test = data.digits_arrays()
    assert x_train.shape[1:] == (8, 8, 1) and len(x_train) + len(x_test) == 1797
    assert len(x_test) == round(1797 * 0.2)
    assert 0.0 <= x_train.min() and x_train.max() <= 1.0
    assert set(y_test) == set(range(10))
    images, labels = next(iter(data.digits_dataset(16, image_size=12, data_format="NCHW")))
    assert images.shape == (16, 1, 12, 12) and labels.shape == (16,)


def test_cli_writes_and_counts(tmp_path, capsys):
    assert data.main(["make-tfrecords", "--out", str(tmp_path), "--images", "5",
                      "--image-size", "16", "--shards", "2"]) == 0
    assert data.main(["count", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().endswith("5")
    assert data.main(["count", str(tmp_path / "missing")]) == 2
