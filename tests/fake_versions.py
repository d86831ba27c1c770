"""What the fake clouds (tests/fake_gcloud.py in process, tests/fake_cloud.py as a real `gcloud`) answer to
`gcloud compute tpus tpu-vm versions list --zone=Z --format=json`: per zone, a listing of the form the Cloud TPU
API's RuntimeVersion has ({"name": "projects/P/locations/Z/runtimeVersions/V", "version": "V"}), with the kinds of
names a zone offers: TensorFlow images of several releases, single-host and pod, PJRT and StreamExecutor, with and
without a hardware suffix, a nightly, and base images without TensorFlow. Which zone offers which image is made up
here (in the shape Google names them, docs/tpu.md "Images"); only the choice among them is under test.

Stdlib only: tests/fake_cloud.py runs it without the package."""
import json

BASE = ("tpu-ubuntu2204-base", "tpu-vm-base", "v2-alpha", "v2-alpha-tpuv5-lite", "tpu-vm-tf-nightly-pjrt")
ZONE_VERSIONS = {
    # v3 pods: a 2.19 image would be chosen over 2.18 here if it were offered; it is not
    "europe-west4-a": ("tpu-vm-tf-2.15.0-pod-se", "tpu-vm-tf-2.16.1-pjrt", "tpu-vm-tf-2.16.1-pod-pjrt",
                       "tpu-vm-tf-2.17.0-pjrt", "tpu-vm-tf-2.17.0-pod-pjrt", "tpu-vm-tf-2.17.1-pjrt",
                       "tpu-vm-tf-2.17.1-pod-pjrt", "tpu-vm-tf-2.18.0-se", "tpu-vm-tf-2.18.0-pjrt",
                       "tpu-vm-tf-2.18.0-pod-pjrt", *BASE),
    # v5e: its own suffix, and an image for other TPUs
    "us-west4-a": ("tpu-vm-tf-2.17.0-pjrt", "tpu-vm-tf-2.17.1-pod-pjrt", "tpu-vm-tf-2.18.0-pjrt-v5e-and-v6",
                   "tpu-vm-tf-2.18.0-pod-pjrt-v5e-and-v6", "tpu-vm-tf-2.18.0-pod-pjrt-v5p-and-below",
                   "tpu-vm-tf-2.19.0-pjrt-v5e-and-v6", *BASE),
    # v4: a 2.19 pod image with a suffix for v5p and below (v4 included), and one for v5e
    "us-central2-b": ("tpu-vm-tf-2.16.1-pod-pjrt", "tpu-vm-tf-2.17.1-pod-pjrt", "tpu-vm-tf-2.18.0-pjrt-v5p-and-below",
                      "tpu-vm-tf-2.18.0-pod-pjrt-v5p-and-below", "tpu-vm-tf-2.19.0-pod-pjrt-v5p-and-below",
                      "tpu-vm-tf-2.19.0-pod-pjrt-v5e-and-v6", *BASE),
    # v5p: its own suffix and an unsuffixed image at 2.18, a newer one for v5e only, one too new
    "us-east5-a": ("tpu-vm-tf-2.17.1-pod-pjrt", "tpu-vm-tf-2.18.0-pjrt", "tpu-vm-tf-2.18.0-pjrt-v5p-and-below",
                   "tpu-vm-tf-2.18.0-pod-pjrt", "tpu-vm-tf-2.18.0-pod-pjrt-v5p-and-below",
                   "tpu-vm-tf-2.19.0-pod-pjrt-v5e-and-v6", "tpu-vm-tf-2.21.0-pjrt", *BASE),
    # nothing TensorFlow 2.18 to 2.20 (an old zone)
    "us-central1-b": ("tpu-vm-tf-2.16.1-pjrt", "tpu-vm-tf-2.17.0-pod-pjrt", "tpu-vm-tf-2.17.1-pjrt", *BASE),
}


def listing(zone, project="p1", versions=None):
    """The JSON text `versions list --format=json` prints for `zone` (its ZONE_VERSIONS, or `versions`)."""
    offered = ZONE_VERSIONS.get(zone, BASE) if versions is None else versions
    return json.dumps([{"name": f"projects/{project}/locations/{zone}/runtimeVersions/{v}", "version": v}
                       for v in offered], indent=2)
