"""The TPU runtime image a slice is made with: chosen from what the zone offers, within the TensorFlow the package is
tested on. No TensorFlow.

Image names are read by albert_tf/runtime/devices.py (`parse_image`: tpu-vm-tf-X.Y.Z[-pod][-pjrt|-se][-HARDWARE]).
Guessing a name is what fails first in a new zone, so the keeper asks the zone:

    gcloud compute tpus tpu-vm versions list --zone=ZONE --format=json
        [{"name": "projects/P/locations/ZONE/runtimeVersions/tpu-vm-tf-2.18.0-pjrt",
          "version": "tpu-vm-tf-2.18.0-pjrt"}, ...]      (the Cloud TPU API's RuntimeVersion: name, version)

and `choose_image(listing, generation, pod)` (`zone_image(listing, "v5litepod-16")`) takes the newest TensorFlow image for that generation and kind within
TPU_TENSORFLOW; `--image` forces one. `default_image` names a fixed image, with its source, for what cannot ask the
zone (tpu/create_tpu.sh).
"""
import dataclasses
import json

from albert_tf.runtime import devices

# The TensorFlow releases a TPU image may carry: from the oldest the package is tested with (CI's tensorflow 2.18.1,
# the tpu-vm-tf-2.18.0 images' release) to the last tensorflow-tpu (2.20: setup.py's [tpu] extra, CI's .venv-tpu).
# tests/test_images.py reads both from .ci/run and setup.py.
TPU_TENSORFLOW = ((2, 18), (2, 20))


@dataclasses.dataclass(frozen=True)
class Image:
    name: str
    source: str


# Fixed images, each with the public source that names it: for what cannot list the zone's versions. The first that
# fits a slice's generation and kind is its default (a hardware-suffixed image before one without a suffix).
IMAGES = (
    Image("tpu-vm-tf-2.18.0-pjrt-v5e-and-v6",
          "a v5litepod-8 VM running TensorFlow 2.18.0 (github.com/Prz00124/tpu-vm-examples-2025)"),
    Image("tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6",
          "a v5litepod-16 slice running TensorFlow 2.18.0 (github.com/Prz00124/tpu-vm-examples-2025)"),
    Image("tpu-vm-tf-2.18.0-pjrt",
          "Cloud TPU docs, \"Preemptible TPUs\" (cloud.google.com/tpu/docs/preemptible): the create example (v3-8)"),
    Image("tpu-vm-tf-2.18.0-pod-pjrt",
          "the image of a v4 pod in github.com/tensorflow/tensorflow/issues/82208 (where import tensorflow "
          "segfaulted, as on tpu-vm-tf-2.17.1); no Google page names a TensorFlow 2.18 pod image"),
)
IMAGE_BY_NAME = {image.name: image for image in IMAGES}


def _kind(pod):
    return "pod slice" if pod else "single host"


def _release_text(release):
    return ".".join(map(str, release))


def in_range(image):
    """Whether a TpuImage's TensorFlow release is within TPU_TENSORFLOW (a nightly is not)."""
    return image.release is not None and TPU_TENSORFLOW[0] <= image.release[:2] <= TPU_TENSORFLOW[1]


def default_image(hosts, generation=None):
    """The fixed image for a slice of `hosts` hosts of `generation` (a devices.Generation; None: any)."""
    fitting = [devices.parse_image(i.name) for i in IMAGES]
    fitting = [i for i in fitting if i.pod == (hosts > 1) and (generation is None or i.fits(generation))]
    # a generation's own images before unsuffixed ones; with no generation, the unsuffixed ones (for any)
    fitting.sort(key=lambda i: bool(i.hardware) != (generation is not None))
    return fitting[0].name


def default_image_for(topology):
    """default_image of a slice name ("v5litepod-16" → tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6)."""
    found = devices.parse_topology(topology)
    return default_image(found.hosts, found.generation)


def offered_versions(listing):
    """The runtime versions in `gcloud compute tpus tpu-vm versions list` output: its JSON (--format=json: a list
    of {"name": ".../runtimeVersions/V", "version": "V"}) or its text (a table, or "KEY: value" lines)."""
    try:
        rows = json.loads(listing)
    except ValueError:
        rows = None
    if isinstance(rows, list):
        return [row.get("version") or row.get("name", "").rpartition("/")[2] for row in rows if isinstance(row, dict)]
    words = (word.rpartition("/")[2] for line in (listing or "").splitlines()
             for word in line.rpartition(": ")[2].split())
    return [word for word in words if word and word == word.lower() and word[0].isalnum()]


def check_image(name, hosts, generation=None):
    """One line (ValueError) when the TensorFlow image `name` does not fit a slice of `hosts` hosts of
    `generation` (a devices.Generation; None: not checked); any other name (a base image) passes."""
    image = devices.parse_image(name)
    if image is None:
        return
    if hosts > 1 and not image.pod:
        raise ValueError(f"--image {name} is a single-host image; a slice of {hosts} hosts needs a pod image "
                         f"(tpu-vm-tf-X.Y.Z-pod-...)")
    if hosts == 1 and image.pod:
        raise ValueError(f"--image {name} is a pod image; a single host needs one without -pod")
    if generation is not None and not image.fits(generation):
        raise ValueError(f"--image {name} is for other TPUs ({image.hardware}); {generation.label} images carry "
                         f"{' or '.join(generation.image_suffixes)} or no hardware suffix")


def choose_image(listing, generation, pod, forced=None):
    """The image a slice is made with: `forced` (--image) when given, checked against the slice's kind and
    generation; else the newest TensorFlow image in `listing` (the zone's versions list, offered_versions) for
    `generation` and for a pod slice or a single host, within TPU_TENSORFLOW; at one release a PJRT image before a
    StreamExecutor one, and the generation's own hardware suffix before none. One-line ValueError listing what the
    zone offers when nothing fits."""
    if forced:
        check_image(forced, 2 if pod else 1, generation)
        return forced
    offered = offered_versions(listing)
    suitable = [image for image in map(devices.parse_image, offered)
                if image and image.pod == pod and image.fits(generation) and in_range(image)]
    if not suitable:
        low, high = (_release_text(r) for r in TPU_TENSORFLOW)
        raise ValueError(f"the zone offers no TensorFlow {low} to {high} image for a {generation.label} "
                         f"{_kind(pod)}: it offers {', '.join(offered) or 'none'}; give --image to force one")
    return max(suitable, key=lambda i: (i.release, i.api == "pjrt", bool(i.hardware))).name


def zone_image(listing, accelerator_type, forced=None):
    """choose_image for a slice named as Google spells it ("v5litepod-16": a v5e pod slice of 2 hosts)."""
    found = devices.parse_topology(accelerator_type)
    return choose_image(listing, found.generation, found.hosts > 1, forced)


def is_pod_image(name):
    """Whether `name` is a pod-slice image (named "-pod" by Google: tpu-vm-tf-X.Y.Z-pod[-pjrt])."""
    image = devices.parse_image(name)
    return image.pod if image else "-pod" in (name or "")


def tensorflow_release(name):
    """"2.18" for tpu-vm-tf-2.18.0-pjrt; None for an image without TensorFlow (or a name not of that form)."""
    image = devices.parse_image(name)
    return _release_text(image.release[:2]) if image and image.release else None


__all__ = ["Image", "IMAGES", "IMAGE_BY_NAME", "TPU_TENSORFLOW", "default_image", "default_image_for", "offered_versions",
           "choose_image", "zone_image", "check_image", "in_range", "is_pod_image", "tensorflow_release"]
