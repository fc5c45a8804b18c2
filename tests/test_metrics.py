"""Every metric formula of docs/metrics.md, on small hand-checked cases."""

import math

import pytest

from archbench.core import metrics


def test_training_throughput_counts_global_images_over_window():
    # 2 ranks x batch 8 = 16 images per step, 4 steps in 2 s -> 32 img/s
    assert metrics.training_throughput(16, [0.5, 0.5, 0.5, 0.5]) == pytest.approx(32.0)
    assert metrics.window_throughput(64, 2.0) == pytest.approx(32.0)


def test_throughput_rejects_empty_window():
    with pytest.raises(ValueError):
        metrics.training_throughput(8, [])
    with pytest.raises(ValueError):
        metrics.window_throughput(8, 0.0)


def test_thread_efficiency_and_speedups():
    assert metrics.thread_efficiency(p_t=30.0, threads=2, p_1=20.0) == pytest.approx(0.75)
    assert metrics.speedup(150.0, 50.0) == pytest.approx(3.0)
    assert metrics.parallel_efficiency(150.0, 4, 50.0) == pytest.approx(0.75)
    assert metrics.vendor_speedup(32.1, 19.9) == pytest.approx(32.1 / 19.9)


def test_io_overhead_percent():
    assert metrics.io_overhead_percent(100.0, 85.0) == pytest.approx(15.0)
    assert metrics.io_overhead_percent(100.0, 100.0) == 0.0


def test_kernel_flop_counts():
    assert metrics.matmul_flops(2) == 2 * 8 - 4
    assert metrics.matmul_flops(4096) == 2 * 4096**3 - 4096**2
    assert metrics.cg_flops(100, 500) == 500 * 2 * 100**2
    assert metrics.fft_flops(1024) == 5 * 1024 * 10
    assert metrics.gflops(2e9, 2.0) == pytest.approx(1.0)
    assert metrics.fraction_of_peak(43.0, 86.0) == pytest.approx(0.5)


@pytest.mark.parametrize("values, flagged", [
    ([100, 105, 109], False),   # spread 9 < 10% of 104.7
    ([100, 105, 112], True),    # spread 12 > 10% of 105.7
    ([0.0, 0.0], False),
])
def test_spread_flag(values, flagged):
    assert metrics.spread(values) == max(values) - min(values)
    assert metrics.spread_flag(values) is flagged


def test_fft_flops_is_5nlog2n():
    n = 2**20
    assert metrics.fft_flops(n) == pytest.approx(5 * n * math.log2(n))
