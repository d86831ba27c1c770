"""The runtime image a slice is made with (albert_tf/cloud/images.py): the newest suitable TensorFlow image of the
zone's `versions list` per generation and kind, none suitable, forced; and no image the package picks by itself
carries a TensorFlow outside what CI tests (read from .ci/run and setup.py, not from the module)."""
import json
import os
import re

import pytest

from albert_tf.cloud import images
from albert_tf.runtime import devices
from tests import helpers

# What a zone might offer (names as Google spells them: Cloud TPU "TPU software versions" and public reports).
OFFERED = ["tpu-ubuntu2204-base", "v2-alpha-tpuv5-lite", "tpu-vm-tf-2.17.1-pjrt", "tpu-vm-tf-2.17.1-pod-pjrt",
           "tpu-vm-tf-2.18.0-pjrt", "tpu-vm-tf-2.18.0-pod-pjrt", "tpu-vm-tf-2.18.0-pjrt-v5e-and-v6",
           "tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6", "tpu-vm-tf-2.18.0-pjrt-v5p-and-below", "tpu-vm-tf-2.19.0-pod-se",
           "tpu-vm-tf-2.19.0-pod-pjrt", "tpu-vm-tf-2.19.0-pjrt-v5p-and-below", "tpu-vm-tf-2.21.0-pjrt",
           "tpu-vm-tf-2.21.0-pod-pjrt", "tpu-vm-tf-nightly-pod"]


def as_json(names, zone="us-west4-a"):
    """`gcloud compute tpus tpu-vm versions list --zone=Z --format=json`: the API's RuntimeVersion objects."""
    return json.dumps([{"name": f"projects/p/locations/{zone}/runtimeVersions/{n}", "version": n} for n in names])


# Worked by hand from OFFERED: in range (2.18-2.20), of the kind, of the generation's suffix or none; the newest
# release, then PJRT before StreamExecutor, then the generation's own suffix before none.
@pytest.mark.parametrize("generation, pod, expected", [
    ("v3", False, "tpu-vm-tf-2.19.0-pjrt-v5p-and-below"),  # 2.21.0-pjrt: outside the range
    ("v3", True, "tpu-vm-tf-2.19.0-pod-pjrt"),             # -pod-pjrt before -pod-se at 2.19
    ("v4", False, "tpu-vm-tf-2.19.0-pjrt-v5p-and-below"),
    ("v4", True, "tpu-vm-tf-2.19.0-pod-pjrt"),
    ("v5p", True, "tpu-vm-tf-2.19.0-pod-pjrt"),
    ("v2", False, "tpu-vm-tf-2.19.0-pjrt-v5p-and-below"),
    ("v5e", False, "tpu-vm-tf-2.18.0-pjrt-v5e-and-v6"),    # at 2.18, its own suffix before the unsuffixed one
    ("v5e", True, "tpu-vm-tf-2.19.0-pod-pjrt"),            # a newer unsuffixed image (for any generation) wins
])
def test_the_newest_suitable_image_of_the_zone(generation, pod, expected):
    row = devices.GENERATIONS[generation]
    assert images.choose_image(as_json(OFFERED), row, pod) == expected


@pytest.mark.parametrize("generation, pod, offered", [
    ("v3", True, ["tpu-ubuntu2204-base", "tpu-vm-tf-2.17.1-pod-pjrt", "tpu-vm-tf-2.21.0-pod-pjrt"]),
    ("v3", False, ["tpu-vm-tf-2.18.0-pod-pjrt", "tpu-vm-tf-2.18.0-pjrt-v5e-and-v6"]),
    ("v5e", False, ["tpu-vm-tf-2.19.0-pjrt-v5p-and-below", "v2-alpha-tpuv5-lite"]),
    ("v4", True, []),
])
def test_no_suitable_image_lists_what_the_zone_offers(generation, pod, offered):
    row = devices.GENERATIONS[generation]
    with pytest.raises(ValueError) as raised:
        images.choose_image(as_json(offered), row, pod)
    kind = "pod slice" if pod else "single host"
    text = str(raised.value)
    assert text.startswith(f"the zone offers no TensorFlow 2.18 to 2.20 image for a {row.label} {kind}: it offers "
                           f"{', '.join(offered) or 'none'}") and "--image" in text and "\n" not in text


@pytest.mark.parametrize("generation, pod, forced", [
    ("v3", True, "tpu-vm-tf-2.17.0-pod-pjrt"),      # not offered, outside the range: forced all the same
    ("v5e", False, "tpu-vm-tf-2.18.0-pjrt"), ("v4", True, "tpu-ubuntu2204-base")])
def test_image_forces_one(generation, pod, forced):
    assert images.choose_image(as_json(OFFERED), devices.GENERATIONS[generation], pod, forced=forced) == forced
    assert images.choose_image("not gcloud output", devices.GENERATIONS[generation], pod, forced=forced) == forced


@pytest.mark.parametrize("generation, pod, forced, message", [
    ("v3", True, "tpu-vm-tf-2.18.0-pjrt", "--image tpu-vm-tf-2.18.0-pjrt is a single-host image; a slice of 2 hosts"),
    ("v3", False, "tpu-vm-tf-2.18.0-pod-pjrt", "--image tpu-vm-tf-2.18.0-pod-pjrt is a pod image; a single host"),
    ("v3", False, "tpu-vm-tf-2.18.0-pjrt-v5e-and-v6",
     "--image tpu-vm-tf-2.18.0-pjrt-v5e-and-v6 is for other TPUs (-v5e-and-v6); TPU v3 images carry "
     "-v5p-and-below or no hardware suffix"),
    ("v5e", True, "tpu-vm-tf-2.19.0-pod-pjrt-v5p-and-below", "is for other TPUs (-v5p-and-below); TPU v5e images")])
def test_a_forced_image_of_the_wrong_kind_or_hardware_is_one_line(generation, pod, forced, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        images.choose_image(as_json(OFFERED), devices.GENERATIONS[generation], pod, forced=forced)


@pytest.mark.parametrize("listing", [
    as_json(OFFERED[:6]),
    "VERSION\n" + "\n".join(OFFERED[:6]) + "\n",                               # gcloud's table
    "".join(f"VERSION: {n}\n\n" for n in OFFERED[:6]),                          # its screen-reader form
    "NAME  VERSION\n" + "".join(f"projects/p/locations/z/runtimeVersions/{n}  {n}\n" for n in OFFERED[:6])])
def test_the_versions_list_is_read_as_json_or_text(listing):
    found = images.offered_versions(listing)
    assert sorted(set(found)) == sorted(OFFERED[:6])


def ci_tensorflow_releases():
    """The TensorFlow releases .ci/run installs for the TPU side: the CPU wheel standing in for the oldest image's
    (tensorflow==X.Y.Z) and tensorflow-tpu's (its `Version:` check)."""
    with open(os.path.join(helpers.REPO, ".ci", "run"), encoding="utf-8") as f:
        text = f.read()
    found = re.findall(r'"tensorflow==(\d+)\.(\d+)\.\d+"', text)
    found += re.findall(r'tensorflow-tpu \| grep -x "Version: (\d+)\.(\d+)\.\d+"', text)
    return sorted({(int(a), int(b)) for a, b in found})


def test_the_tpu_tensorflow_range_is_what_ci_tests():
    releases = ci_tensorflow_releases()
    assert releases == [(2, 18), (2, 20)]  # if CI changes, the range below follows it (and this line)
    assert images.TPU_TENSORFLOW == (releases[0], releases[-1])
    with open(os.path.join(helpers.REPO, "setup.py"), encoding="utf-8") as f:
        setup = f.read()
    assert '"tensorflow>=2.18,' in setup and '"tensorflow-tpu>=2.20,<2.21"' in setup


def test_no_image_the_package_picks_itself_is_outside_cis_tensorflow():
    """Every fixed image, and every default per generation and kind, carries a TensorFlow CI tests."""
    low, high = ci_tensorflow_releases()[0], ci_tensorflow_releases()[-1]
    picked = {image.name for image in images.IMAGES}
    picked |= {images.default_image(hosts, row) for row in devices.SUPPORTED for hosts in (1, 2)}
    picked |= {images.default_image(hosts) for hosts in (1, 2)}
    for name in picked:
        release = tuple(map(int, images.tensorflow_release(name).split(".")))
        assert low <= release <= high, name
    for row in devices.SUPPORTED:
        for pod in (False, True):
            chosen = devices.parse_image(images.choose_image(as_json(OFFERED), row, pod))
            assert low <= chosen.release[:2] <= high and chosen.pod == pod and chosen.fits(row)


@pytest.mark.parametrize("topology, image", [
    ("v3-8", "tpu-vm-tf-2.18.0-pjrt"), ("v3-512", "tpu-vm-tf-2.18.0-pod-pjrt"),
    ("v5litepod-8", "tpu-vm-tf-2.18.0-pjrt-v5e-and-v6"), ("v5litepod-16", "tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6"),
    ("v4-32", "tpu-vm-tf-2.18.0-pod-pjrt")])
def test_the_fixed_default_per_generation(topology, image):
    assert images.default_image_for(topology) == image
