"""The TPU runtime images the keeper may choose by itself, each with the Google source that names it. No TensorFlow.

A default must have a source: a name that is not here is used only when the user gives it (`--image`). Which
images a zone offers: `gcloud compute tpus versions list --zone=ZONE`.
"""
import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class Image:
    name: str
    pod: bool  # a multi-host slice image ("-pod"): the client on worker 0 loads no TPU runtime
    source: str


IMAGES = (
    Image("tpu-vm-tf-2.18.0-pjrt", False,
          "Cloud TPU docs, \"Preemptible TPUs\" (cloud.google.com/tpu/docs/preemptible): the create example (v3-8)"),
    Image("tpu-vm-tf-2.17.1-pod-pjrt", True,
          "Cloud TPU docs, \"Manage TPU Spot VMs\" (cloud.google.com/tpu/docs/spot): the queued-resources example"),
    Image("tpu-vm-tf-2.17.0-pod-pjrt", True, "Google's Cloud TPU v2/v3 pod-slice TensorFlow sample"),
)
IMAGE_BY_NAME = {image.name: image for image in IMAGES}
# The defaults: the first image of each kind above. No Google source found names a TensorFlow 2.18 pod image
# (tpu-vm-tf-2.18.0-pod-pjrt is unconfirmed), so a slice gets 2.17.1: older than the oldest TensorFlow this package
# is tested with (2.18); give --image for another.
DEFAULT_SINGLE_HOST = next(i.name for i in IMAGES if not i.pod)
DEFAULT_POD = next(i.name for i in IMAGES if i.pod)


def default_image(hosts):
    """The image the keeper creates a slice of `hosts` hosts with when no --image is given."""
    return DEFAULT_POD if hosts > 1 else DEFAULT_SINGLE_HOST


def is_pod_image(name):
    """Whether `name` is a pod-slice image (named "-pod" by Google: tpu-vm-tf-X.Y.Z-pod[-pjrt])."""
    return name in IMAGE_BY_NAME and IMAGE_BY_NAME[name].pod or "-pod" in name


def tensorflow_release(name):
    """"2.18" for tpu-vm-tf-2.18.0-pjrt; None for an image without TensorFlow (or a name not of that form)."""
    match = re.match(r"tpu-vm-tf-(\d+)\.(\d+)\.", name)
    return f"{match.group(1)}.{match.group(2)}" if match else None


def check_image(name, hosts):
    """One line (ValueError) when `name` does not fit a slice of `hosts` hosts."""
    if hosts > 1 and name.startswith("tpu-vm-tf-") and not is_pod_image(name):
        raise ValueError(f"--image {name} is a single-host image; a slice of {hosts} hosts needs a pod image "
                         f"(e.g. {DEFAULT_POD})")
    if hosts == 1 and is_pod_image(name):
        raise ValueError(f"--image {name} is a pod image; a single host needs e.g. {DEFAULT_SINGLE_HOST}")


__all__ = ["Image", "IMAGES", "IMAGE_BY_NAME", "DEFAULT_SINGLE_HOST", "DEFAULT_POD", "default_image", "is_pod_image",
           "tensorflow_release", "check_image"]
