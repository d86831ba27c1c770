"""The device table (albert_tf/runtime/devices.py): slice names as Google spells them, their TensorFlow devices and
hosts, the refused generations, and the shell's view of it. Expectations are written out by hand from the
generations' facts (docs/tpu.md): v3 2 cores per chip and 4 chips per host, N counting cores; v4 and v5p one device
per chip (megacore), 4 chips per host, N counting cores; v5e one core per chip, up to 8 chips per host, N counting
chips."""
import subprocess
import sys

import pytest

from albert_tf.runtime import devices

GIB = 2 ** 30


@pytest.mark.parametrize("name, generation, devices_, hosts, chips", [
    ("v2-8", "v2", 8, 1, 4), ("v2-512", "v2", 512, 64, 256),
    ("v3-8", "v3", 8, 1, 4), ("v3-32", "v3", 32, 4, 16), ("v3-512", "v3", 512, 64, 256),
    ("v3-2048", "v3", 2048, 256, 1024),
    ("v4-8", "v4", 4, 1, 4), ("v4-32", "v4", 16, 4, 16), ("v4-128", "v4", 64, 16, 64), ("v4-1536", "v4", 768, 192, 768),
    ("v5litepod-1", "v5e", 1, 1, 1), ("v5litepod-4", "v5e", 4, 1, 4), ("v5litepod-8", "v5e", 8, 1, 8),
    ("v5litepod-16", "v5e", 16, 2, 16), ("v5litepod-256", "v5e", 256, 32, 256),
    ("v5p-8", "v5p", 4, 1, 4), ("v5p-128", "v5p", 64, 16, 64), ("v5p-12288", "v5p", 6144, 1536, 6144),
])
def test_a_slice_name_gives_devices_hosts_and_chips(name, generation, devices_, hosts, chips):
    found = devices.parse_topology(name)
    assert (found.generation.name, found.devices, found.hosts, found.chips) == (generation, devices_, hosts, chips)
    assert devices.topology_devices(name) == devices.topology_cores(name) == devices.TOPOLOGIES[name] == devices_
    assert devices.topology_hosts(name) == hosts


@pytest.mark.parametrize("generation, hbm_gib, peak_tflops", [
    ("v2", 8, 22.5), ("v3", 16, 61.5), ("v4", 32, 275), ("v5e", 16, 197), ("v5p", 95, 459)])
def test_memory_and_peak_per_tensorflow_device(generation, hbm_gib, peak_tflops):
    """Per device: a v2/v3 core has half its chip's HBM and peak; a v4/v5e/v5p device is the chip."""
    row = devices.GENERATIONS[generation]
    assert row.hbm_per_device == hbm_gib * GIB and row.peak_per_device == pytest.approx(peak_tflops * 1e12)


@pytest.mark.parametrize("name, line", [
    ("v5litepod-3", "v5litepod-3: not a TPU v5e slice: expected one of v5litepod-1, v5litepod-4, v5litepod-8, "
                    "v5litepod-16, v5litepod-32, v5litepod-64, v5litepod-128, v5litepod-256 (N counts chips)"),
    ("v4-12", "v4-12: not a TPU v4 slice: expected one of v4-8, v4-16, v4-32, v4-64, v4-128, v4-256, v4-512, "
              "v4-1024, v4-1536, v4-2048, v4-4096 (N counts cores)"),
    ("v3-x", "v3-x: not a TPU v3 slice: expected one of v3-8,"),
    ("", ": not a TPU slice; expected PREFIX-N: v2-N (N cores: 8, 32, 128, 256, 512); v3-N"),
])
def test_a_slice_that_does_not_exist_names_the_valid_sizes(name, line):
    with pytest.raises(ValueError) as raised:
        devices.parse_topology(name)
    assert str(raised.value).startswith(line) and "\n" not in str(raised.value)


@pytest.mark.parametrize("name, reason, source", [
    ("v6e-64", "TPU v6e is refused: TensorFlow failed in every public attempt", "Prz00124/tpu-vm-examples-2025"),
    ("v6e-8", "TPU v6e is refused", "Prz00124"),
    ("tpu7x-64", "TPU7x is refused: Google: \"TensorFlow is not supported\"", "docs.cloud.google.com/tpu/docs/tpu7x"),
])
def test_refused_generations_say_why_and_the_keras_hub_route(name, reason, source):
    with pytest.raises(ValueError) as raised:
        devices.parse_topology(name)
    text = str(raised.value)
    assert text.startswith(f"{name}: {reason}") and source in text and "\n" not in text
    assert text.endswith("export the model with `albert-tf convert --to keras-hub` and train it with keras-hub on "
                         "its JAX backend")
    assert name not in devices.TOPOLOGIES


def test_every_row_has_a_status_and_the_supported_ones_a_slice_and_an_image_suffix():
    for row in devices.GENERATIONS.values():
        assert row.status and row.provisioning and row.zones
        assert bool(row.refused) == (row.name in ("v6e", "TPU7x"))
    for row in devices.SUPPORTED:
        assert row.status.startswith("tested here on CPU only") and row.sizes and row.image_suffixes
        assert row.counts in ("cores", "chips") and row.grammar in devices.TOPOLOGY_GRAMMAR


@pytest.mark.parametrize("kind, generation, peak", [
    ("TPU v3", "v3", 61.5e12), ("tpu v4", "v4", 275e12), ("tpu v5litepod", "v5e", 197e12),
    ("TPU v5 lite", "v5e", 197e12), ("tpu v5p", "v5p", 459e12), ("tpu v6e", "v6e", 918e12),
    ("TPU v4", "v4", 275e12), ("TPU v5", "v5p", 459e12), ("TPU v6 lite", "v6e", 918e12), ("TPU v2", "v2", 22.5e12),
    ("NVIDIA H100 80GB HBM3", None, 989e12), ("a CPU", None, None)])
def test_a_device_description_finds_its_row_and_peak(kind, generation, peak):
    """What distribute.local_device_kind reports ("tpu " + the accelerator type's prefix, or a GPU's name) and the
    device kinds TPU runtimes name ("TPU v5 lite" is v5e, "TPU v5" v5p: the longer name wins)."""
    found = devices.generation_for(kind)
    assert (found.name if found else None) == generation and devices.peak_flops_for(kind) == peak


@pytest.mark.parametrize("name, release, pod, api, hardware", [
    ("tpu-vm-tf-2.18.0-pjrt", (2, 18, 0), False, "pjrt", ""),
    ("tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6", (2, 18, 0), True, "pjrt", "-v5e-and-v6"),
    ("tpu-vm-tf-2.18.0-pjrt-v5p-and-below", (2, 18, 0), False, "pjrt", "-v5p-and-below"),
    ("tpu-vm-tf-2.10.0-pod-v4", (2, 10, 0), True, "se", "-v4"),
    ("tpu-vm-tf-2.19.0-pod-se", (2, 19, 0), True, "se", ""),
    ("tpu-vm-tf-nightly-pod", None, True, "se", "")])
def test_image_names_are_read_once(name, release, pod, api, hardware):
    image = devices.parse_image(name)
    assert (image.release, image.pod, image.api, image.hardware) == (release, pod, api, hardware)


@pytest.mark.parametrize("name", ["v2-alpha-tpuv5", "tpu-ubuntu2204-base", "tpu-vm-tf-x-pod", "", None])
def test_other_image_names_are_not_tensorflow_images(name):
    assert devices.parse_image(name) is None


@pytest.mark.parametrize("image, generation, fits", [
    ("tpu-vm-tf-2.18.0-pjrt-v5e-and-v6", "v5e", True), ("tpu-vm-tf-2.18.0-pjrt-v5e-and-v6", "v3", False),
    ("tpu-vm-tf-2.18.0-pjrt-v5p-and-below", "v4", True), ("tpu-vm-tf-2.18.0-pjrt-v5p-and-below", "v5e", False),
    ("tpu-vm-tf-2.18.0-pjrt", "v5e", True), ("tpu-vm-tf-2.10.0-pod-v4", "v4", True),
    ("tpu-vm-tf-2.10.0-pod-v4", "v3", False)])
def test_an_image_fits_the_generations_its_suffix_names(image, generation, fits):
    assert devices.parse_image(image).fits(devices.GENERATIONS[generation]) is fits


def test_the_module_prints_devices_and_hosts_for_the_shell():
    """tpu/lib.sh asks `python -m albert_tf.runtime.devices TYPE` (a second process, as the shell runs it)."""
    run = lambda name: subprocess.run([sys.executable, "-m", "albert_tf.runtime.devices", name],  # noqa: E731
                                      capture_output=True, text=True, check=False)
    ok = run("v4-32")
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "16 4\n", "")
    bad = run("v5litepod-3")
    assert bad.returncode == 2 and not bad.stdout
    assert bad.stderr.startswith("error: v5litepod-3: not a TPU v5e slice: expected one of v5litepod-1")


@pytest.mark.parametrize("accelerator, replicas, generation, hbm_gib, peak_tflops, hosts", [
    ("v3-32", 32, "v3", 16, 61.5, 4),            # a device is a TensorCore: half a chip
    ("v4-32", 16, "v4", 32, 275, 4),             # a device is a chip (megacore)
    ("v5litepod-16", 16, "v5e", 16, 197, 2),
    ("v5p-16", 8, "v5p", 95, 459, 2),
    ("v5p-16", 16, "v5p", 47.5, 229.5, 2),       # were TensorFlow to see both cores: the chip shared by two
])
def test_a_running_slice_takes_its_figures_per_device_from_the_table(accelerator, replicas, generation, hbm_gib,
                                                                      peak_tflops, hosts):
    running = devices.running_tpu(accelerator, replicas)
    assert running.generation.name == generation and running.slice.hosts == hosts
    assert running.hbm_per_device == int(hbm_gib * GIB) and running.peak_per_device == pytest.approx(peak_tflops * 1e12)
    assert running.line.startswith(f"TPU: {accelerator}, TPU {generation}:") and "\n" not in running.line
    assert ("the device table says" in running.line) == (replicas != devices.parse_topology(accelerator).devices)


@pytest.mark.parametrize("kind, image, generation, hbm_gib", [
    ("TPU v5 lite", None, "v5e", 16), ("TPU v4", None, "v4", 32), ("TPU v3", None, "v3", 16),
    (None, "tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6", "v5e", 16),   # v6e, the suffix's other generation, is refused
    (None, "tpu-vm-tf-2.18.0-pjrt-v5p-and-below", None, None),    # v2 .. v5p: no one generation
    (None, "tpu-vm-tf-2.18.0-pjrt", None, None), (None, None, None, None)])
def test_without_an_accelerator_type_the_device_kind_or_the_image_suffix_says_the_generation(kind, image,
                                                                                            generation, hbm_gib):
    running = devices.running_tpu(None, 8, device_kind=kind, image=image)
    assert (running.generation.name if running.generation else None) == generation and running.slice is None
    assert running.hbm_per_device == (hbm_gib * GIB if hbm_gib else None)
    if generation is None:
        assert running.peak_per_device is None and "TPU_ACCELERATOR_TYPE" in running.line


def test_the_accelerator_type_wins_over_the_device_kind_and_image():
    running = devices.running_tpu("v4-8", 4, device_kind="TPU v3", image="tpu-vm-tf-2.18.0-pjrt-v5e-and-v6")
    assert running.generation.name == "v4" and running.hbm_per_device == 32 * GIB
