"""`TPUClusterResolver(tpu=NAME)` on a pod slice asks the Cloud TPU API for the slice's hosts: its client needs the
Google API client (`googleapiclient`, `oauth2client`), which the `[tpu]` and `[cloud-tpu]` extras bring. Checked
without a network: the resolver is built, and the API request it would send first is built and read, not sent.

Where a TPU TensorFlow (the tensorflow-tpu wheel, as `pip install ".[tpu]"` installs it) is present the client must
be importable: a missing one fails. Elsewhere (a CPU TensorFlow, installed without [tpu]) the resolver test skips."""
import importlib.util
import os

import pytest

from albert_tf.runtime import requirements

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


# TensorFlow's fallback client (tensorflow/python/tpu/client/client.py) imports these two modules.
CLIENT_MODULES = {"googleapiclient": "google-api-python-client", "oauth2client": "oauth2client"}
SLICE, ZONE, PROJECT = "a-slice", "us-central2-b", "p"


def _client_missing():
    return [m for m in CLIENT_MODULES if importlib.util.find_spec(m) is None]


def test_resolver_builds_the_first_cloud_tpu_api_request():
    missing = _client_missing()
    on_tpu_wheel = (requirements.installed_tensorflow() or ("",))[0] == "tensorflow-tpu"
    if missing and on_tpu_wheel:
        pytest.fail(f"tensorflow-tpu is installed without {', '.join(CLIENT_MODULES[m] for m in missing)}: "
                    f"TPUClusterResolver(tpu=NAME) cannot reach the Cloud TPU API (pip install \".[tpu]\")")
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (a CPU TensorFlow without the [tpu] extra)")
    os.environ.setdefault("TPU_LOAD_LIBRARY", "0")
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from oauth2client import client as oauth  # pylint: disable=import-outside-toplevel
    from tensorflow.python.distribute.cluster_resolver.tpu import \
        tpu_cluster_resolver  # pylint: disable=import-outside-toplevel

    api_client = tpu_cluster_resolver.client
    if api_client.__name__ == "tensorflow.python.tpu.client.client":  # not the cloud-tpu-client package
        assert api_client._GOOGLE_API_CLIENT_INSTALLED  # pylint: disable=protected-access
    # Explicit credentials: the default ones would be looked up on the machine (and on the GCE metadata server).
    credentials = oauth.AccessTokenCredentials("not-a-token", "albert_tf-test")
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=SLICE, zone=ZONE, project=PROJECT,
                                                                 credentials=credentials)
    # What cluster_spec() would do first: build the API service (the discovery document the client library ships)
    # and ask for the node; the request is built here, not executed.
    cloud = resolver._cloud_tpu_client  # pylint: disable=protected-access
    service = cloud._tpu_service()  # pylint: disable=protected-access
    request = service.projects().locations().nodes().get(name=cloud._full_name())  # pylint: disable=protected-access
    assert request.method == "GET"
    node = f"projects/{PROJECT}/locations/{ZONE}/nodes/{SLICE}"
    assert request.uri.split("?")[0] == f"https://tpu.googleapis.com/v1/{node}"
