"""--dtype auto (albert_tf.runtime.precision): the decision as a pure function of device, capability and measured
rates; the explicit flag wins; a CPU's probe is measured once per machine and size, then read from the cache."""
import json

import pytest

from albert_tf.runtime import precision


def test_tpu_is_bfloat16_and_gpus_by_compute_capability():
    assert precision.decide("tpu").dtype == "bfloat16"
    assert precision.decide("gpu", (8, 0)).dtype == "bfloat16"
    assert precision.decide("gpu", (9, 0)).dtype == "bfloat16"
    assert precision.decide("gpu", (7, 5)).dtype == "float32"
    assert precision.decide("gpu", None).dtype == "float32"
    assert "7.5" in precision.decide("gpu", (7, 5)).reason


@pytest.mark.parametrize("rates, want", [
    ({"float32": 401.0, "bfloat16": 812.0}, "bfloat16"),  # an AMD EPYC with AVX512-BF16: about 2x
    ({"float32": 500.0, "bfloat16": 310.0}, "float32"),   # a Xeon with AVX512-BF16, no AMX: 0.62x
    ({"float32": 100.0, "bfloat16": 100.0}, "float32"),   # a tie keeps float32
])
def test_cpu_takes_the_faster_measured_rate(rates, want):
    choice = precision.decide("cpu", rates=rates)
    assert choice.dtype == want and choice.rates == rates
    assert f"{rates['bfloat16']:.0f}" in choice.reason and f"{rates['float32']:.0f}" in choice.reason


def test_bad_decisions_are_refused():
    with pytest.raises(ValueError, match="device 'npu'"):
        precision.decide("npu")
    with pytest.raises(ValueError, match="both measured matmul rates"):
        precision.decide("cpu", rates={"float32": 1.0})
    with pytest.raises(ValueError, match="--dtype 'half'"):
        precision.choose("half", on_tpu=False, use_gpu=False, shape=(16, 8, 8))


def _no_probe(*shape):
    raise AssertionError(f"probed {shape}")


def test_an_explicit_dtype_wins_and_tpu_needs_no_probe(tmp_path, monkeypatch):
    monkeypatch.delenv(precision.AUTO_ENV, raising=False)
    for flag in ("float32", "bfloat16"):
        choice = precision.choose(flag, on_tpu=False, use_gpu=False, shape=(16, 8, 8), directory=tmp_path,
                                  probe=_no_probe)
        assert choice.dtype == flag and choice.reason == "--dtype"
    assert precision.choose("float32", on_tpu=True, use_gpu=False, shape=(16, 8, 8), probe=_no_probe).dtype == "float32"
    assert precision.choose("auto", on_tpu=True, use_gpu=False, shape=(16, 8, 8), probe=_no_probe).dtype == "bfloat16"
    assert not list(tmp_path.iterdir())  # nothing probed, nothing cached


def test_the_auto_dtype_can_be_fixed_for_every_machine(monkeypatch):
    monkeypatch.setenv(precision.AUTO_ENV, "bfloat16")
    choice = precision.choose("auto", on_tpu=False, use_gpu=False, shape=(16, 8, 8), probe=_no_probe)
    assert choice.dtype == "bfloat16" and precision.AUTO_ENV in choice.reason
    assert precision.choose("float32", on_tpu=False, use_gpu=False, shape=(16, 8, 8)).dtype == "float32"
    monkeypatch.setenv(precision.AUTO_ENV, "fp16")
    with pytest.raises(ValueError, match="ALBERT_TF_AUTO_DTYPE='fp16'"):
        precision.choose("auto", on_tpu=False, use_gpu=False, shape=(16, 8, 8))


def test_the_cpu_probe_is_measured_once_then_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(precision.AUTO_ENV, raising=False)
    calls = []

    def probe(m, k, n):
        calls.append((m, k, n))
        return {"float32": 300.0, "bfloat16": 600.0}

    first = precision.choose("auto", on_tpu=False, use_gpu=False, shape=(256, 64, 128), directory=tmp_path,
                             probe=probe)
    second = precision.choose("auto", on_tpu=False, use_gpu=False, shape=(256, 64, 128), directory=tmp_path,
                              probe=probe)
    assert (first.dtype, first.cached, second.dtype, second.cached) == ("bfloat16", False, "bfloat16", True)
    assert calls == [(256, 64, 128)]
    precision.choose("auto", on_tpu=False, use_gpu=False, shape=(512, 64, 128), directory=tmp_path, probe=probe)
    assert calls[-1] == (512, 64, 128)  # another size: probed again
    (tmp_path / precision.PROBE_FILE).write_text("{not json")
    precision.choose("auto", on_tpu=False, use_gpu=False, shape=(256, 64, 128), directory=tmp_path, probe=probe)
    assert len(calls) == 3  # an unreadable cache: probed, and the cache rewritten
    assert len(json.loads((tmp_path / precision.PROBE_FILE).read_text())) == 1


def test_probe_shape_is_the_feed_forward_matmul_bounded_in_work():
    assert precision.probe_shape(8, 128, 768, 3072) == (1024, 768, 3072)
    assert precision.probe_shape(1, 8, 16, 32) == (256, 16, 32)  # at least 256 rows
    m, k, n = precision.probe_shape(64, 512, 4096, 16384)
    assert (k, n) == (4096, 16384) and 2 * m * k * n <= 1e10 and m >= 16


def test_the_real_probe_measures_both_dtypes():
    rates = precision.probe_rates(64, 32, 48, rounds=1)
    assert set(rates) == {"float32", "bfloat16"} and all(r > 0 for r in rates.values())
    assert precision.decide("cpu", rates=rates).dtype in precision.DTYPES
