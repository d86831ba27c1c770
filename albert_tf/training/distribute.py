"""Picking the tf.distribute strategy from the command line, and what a TPU run demands of its paths.

    --tpu NAME          check_tpu_support() → TPUClusterResolver(tpu=NAME) → connect → initialize the TPU system → TPUStrategy
                        (`--tpu local` on a TPU VM: no remote connection); connect_tpu tells a failure that may pass
                        (exit 76) from a bad name or setup (exit 2)
    TF_CONFIG set       MultiWorkerMirroredStrategy (GPU/CPU clusters), collectives bounded by
                        --collective-timeout-secs; with --cpu-replicas N each worker's CPU is split into N replicas
                        (CpuReplicasWorkerStrategy: a pod host's devices, as the pod rehearsal runs them)
    --cpu-replicas N    the CPU split into N logical devices + MirroredStrategy: the distributed path without
                        accelerators (must run before TensorFlow initializes its devices); one input pipeline for
                        all replicas, one per replica with ALBERT_TF_INPUT_PIPELINES=per-replica, or P pipelines of
                        N/P consecutive replicas each with ALBERT_TF_INPUT_PIPELINES=P (as P hosts of N/P devices
                        read: the pod rehearsal's reference, albert_tf.training.rehearsal)
    local GPUs          MirroredStrategy over all of them
    otherwise           the default (one-device) strategy
"""
import importlib.util
import json
import os
import re

import tensorflow as tf
from tensorflow.python.distribute import collective_all_reduce_strategy, device_util

from albert_tf.runtime import cluster, devices, host_xla, requirements
from albert_tf.runtime.exit_codes import RuntimeLost
from albert_tf.settings.runtime_options import check_cloud_paths  # noqa: F401  (finetuning's call)

# Where a TPU VM image or the `libtpu` package puts the TPU runtime, besides $TPU_LIBRARY_PATH.
LIBTPU_PATHS = ("/lib/libtpu.so", "/usr/lib/libtpu.so", "/usr/local/lib/libtpu.so")
INSTALL_FOR_TPU = (
    "on a TPU VM keep the image's TensorFlow (pip install albert_tf, without the [tf] extra, which would put the "
    "CPU tensorflow wheel over it), or pip install \"albert_tf[tpu]\" (tensorflow-tpu 2.20 with a libtpu "
    "older than 0.0.32)")


def create_strategy(tpu=None, cpu_replicas=None, environ=None, collective_timeout_secs=None, check_support=True):
    """Returns the tf.distribute.Strategy the flags ask for (see the module docstring for the order).
    `collective_timeout_secs` (multi-worker only; None or 0: no limit): a collective waiting longer than this for
    a peer fails with DeadlineExceededError (one of RUNTIME_ERRORS), where a hung peer would hold it forever.
    `check_support` False: the caller ran check_tpu_support already (pretraining does, before its output lock).
    Raises albert_tf.runtime.exit_codes.RuntimeLost when the TPU cannot be reached for a reason that may pass
    (connect_tpu)."""
    environ = os.environ if environ is None else environ
    if tpu and cpu_replicas:
        raise ValueError("--tpu and --cpu-replicas are exclusive")
    if tpu:
        if check_support:
            check_tpu_support(environ, tpu)
        return connect_tpu(tpu)
    if environ.get("TF_CONFIG"):
        try:
            json.loads(environ["TF_CONFIG"])
        except json.JSONDecodeError as e:
            raise ValueError(f"TF_CONFIG: not valid JSON ({e})") from None
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=collective_timeout_secs or None)
        if cpu_replicas and cpu_replicas > 1:
            split_cpu(cpu_replicas)
            return CpuReplicasWorkerStrategy(options)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if cpu_replicas:
        split_cpu(cpu_replicas)
        devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        pipelines = input_pipelines(environ.get(PIPELINES_ENV, "per-worker"), cpu_replicas)
        if pipelines == 1:
            return tf.distribute.MirroredStrategy(devices, cross_device_ops=cpu_replica_sums())
        return PipelinesInputStrategy(devices, pipelines, cross_device_ops=cpu_replica_sums())
    if tf.config.list_physical_devices("GPU"):
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


PIPELINES_ENV = "ALBERT_TF_INPUT_PIPELINES"


@host_xla.jit_function(autograph=False)
def fixed_order_sum(values):
    """The sum of `values` (a list of tensors of one shape and dtype) as a reduction over their stacking: its order
    is fixed by the list's, whatever else holds the inputs (one kernel where the host has XLA)."""
    return tf.reduce_sum(tf.stack(values), axis=0)


def cpu_replica_sums():
    """The cross-device ops of `--cpu-replicas`: every replica's value gathered on one device and summed by
    `fixed_order_sum`. ReductionToOneDevice's default sum, TensorFlow's AddN, adds first whichever input buffer it
    can reuse, and which one that is depends on what other ops still hold: with three or more replicas the
    rounding of the gradient sums, and so the weights, could vary between identical runs (docs/numerics.md)."""
    return tf.distribute.ReductionToOneDevice(accumulation_fn=lambda values: fixed_order_sum(list(values)))


def split_cpu(replicas):
    """Splits this process's CPU into `replicas` logical devices (before TensorFlow initializes them; afterwards
    only if they are already split so). Initializes nothing: a multi-worker strategy must configure its collectives
    before TensorFlow starts."""
    if replicas < 1:
        raise ValueError(f"--cpu-replicas must be >= 1, got {replicas}")
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)])
    except RuntimeError:
        # Devices already initialized: fine if they are already split the same way.
        if len(tf.config.list_logical_devices("CPU")) != replicas:
            raise ValueError(
                f"--cpu-replicas {replicas}: TensorFlow already initialized its devices in this process; "
                f"run in a fresh process") from None


def input_pipelines(value, replicas):
    """The input pipelines of a `--cpu-replicas` run from $ALBERT_TF_INPUT_PIPELINES: per-worker (1), per-replica
    (`replicas`) or a number dividing `replicas`."""
    found = {"per-worker": 1, "per-replica": replicas}.get(value)
    if found is None and value.isdigit() and int(value) >= 1 and replicas % int(value) == 0:
        found = int(value)
    if found is None:
        raise ValueError(f"{PIPELINES_ENV}={value}: expected per-worker (the default), per-replica or a number of "
                         f"pipelines dividing --cpu-replicas {replicas}")
    return found

# What the runtime raises when a TPU host, the TPU runtime or a peer worker goes away under a running program (a
# preempted pod slice, a killed worker noticed by the coordination service's heartbeats, a collective timed out):
# the program cannot go on, a relaunch resumes from the last checkpoint (exit_codes.RUNTIME_LOST).
RUNTIME_ERRORS = (tf.errors.UnavailableError, tf.errors.InternalError, tf.errors.AbortedError,
                  tf.errors.DeadlineExceededError, tf.errors.CancelledError)
_TRACE_LINE = re.compile(r"^\s*$|^(Graph execution error|Detected at node)|^\s+File |^\s*\[\[")


def error_summary(error, limit=240):
    """The first line of a TensorFlow error that says what happened (its node trace and 'Graph execution error:'
    left out), prefixed with the error's class, at most `limit` characters."""
    text = getattr(error, "message", None) or str(error)
    line = next((x.strip() for x in text.splitlines() if not _TRACE_LINE.match(x)), text.strip())
    line = f"{type(error).__name__}: {line}"
    return line if len(line) <= limit else line[:limit - 3] + "..."


# The Cloud TPU API's answers that will not change on a retry (TensorFlow's TPU client wraps every failure of its
# `nodes.get` call in a ValueError "Could not lookup TPU metadata from name ... Exception: <HttpError 404 ...>"):
# a bad request, no permission, no such TPU. Any other failure (5xx, 429, a connection error or timeout, a TPU
# not READY yet) may pass.
_PERMANENT_HTTP = frozenset({400, 401, 403, 404})
_HTTP_STATUS = re.compile(r"HttpError (\d{3})")


def tpu_connect_error(tpu, error):
    """What a failure to reach the TPU `--tpu` names means: RuntimeLost (relaunch later) when it may pass, a
    ValueError (a bad flag or setup) when it will not, None when `error` is something else."""
    text = str(error)
    if isinstance(error, ValueError) and "Could not lookup TPU metadata" in text:
        status = _HTTP_STATUS.search(text)
        detail = text.split("Exception: ", 1)[-1].strip()
        if status and int(status.group(1)) in _PERMANENT_HTTP:
            return ValueError(f"--tpu {tpu}: the Cloud TPU API refused: {detail}")
        return RuntimeLost(f"--tpu {tpu}: the Cloud TPU API did not answer ({detail}); the TPU may be back later: "
                           "relaunch the same command")
    if isinstance(error, RuntimeError) and "Missing runtime dependency" in text:
        return ValueError(f"--tpu {tpu}: TensorFlow's TPU cluster resolver needs the Google API client "
                          "(googleapiclient, oauth2client): pip install \"albert_tf[cloud-tpu]\"")
    if isinstance(error, RuntimeError) and ("is not yet ready" in text or "Failed to connect to master" in text):
        return RuntimeLost(f"--tpu {tpu}: {text}; relaunch the same command when the TPU is READY")
    if isinstance(error, (*RUNTIME_ERRORS, OSError)):  # OSError: the VM's metadata server (project, zone)
        return RuntimeLost(f"--tpu {tpu}: the TPU could not be reached ({error_summary(error)}); relaunch the "
                           "same command")
    return None


def connect_tpu(tpu, make_resolver=None):
    """TPUStrategy on the TPU `tpu` names: its cluster resolver, the connection (a pod slice) and the TPU system's
    initialization. `make_resolver` (default TPUClusterResolver) takes the name. Failures are told apart by
    tpu_connect_error: those that may pass raise RuntimeLost (exit 76), a bad name or setup a ValueError (exit 2)."""
    make_resolver = make_resolver or tf.distribute.cluster_resolver.TPUClusterResolver
    try:
        resolver = make_resolver(tpu=tpu)
        if tpu != "local":  # a TPU VM's own chips need no remote connection
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except Exception as e:  # pylint: disable=broad-except  # sorted out by tpu_connect_error, else raised as is
        mapped = tpu_connect_error(tpu, e)
        if mapped is None:
            raise
        raise mapped from None


class PipelinesInputStrategy(tf.distribute.MirroredStrategy):
    """A MirroredStrategy whose distribute_datasets_from_function runs `pipelines` input pipelines, pipeline i
    feeding replicas i*K .. i*K+K-1 (K = replicas / pipelines; InputContext(num_input_pipelines=pipelines,
    input_pipeline_id=i)): one process feeding its replicas as that many hosts of K devices feed theirs, so that it
    computes what they compute. One pipeline: MirroredStrategy's own input."""

    def __init__(self, devices, pipelines=1, **kwargs):
        super().__init__(devices, **kwargs)
        self._pipelines = pipelines

    def distribute_datasets_from_function(self, dataset_fn, options=None):
        if self._pipelines > 1 and options is None:  # each group of replicas its own "host", all on this CPU
            extended, host = self.extended, device_util.canonicalize("/device:CPU:0")
            each = len(extended.worker_devices) // self._pipelines
            extended._input_workers_devices = tuple(  # pylint: disable=protected-access
                (host, tuple(extended.worker_devices[i:i + each]))
                for i in range(0, len(extended.worker_devices), each))
        return super().distribute_datasets_from_function(dataset_fn, options)


class _CpuReplicasExtended(collective_all_reduce_strategy.CollectiveAllReduceExtended):
    """MultiWorkerMirroredStrategy's workings with this worker's logical CPU devices as its replicas (TensorFlow's
    own takes one CPU per worker: it counts GPUs and TPUs only)."""

    def _initialize_local_devices(self, cluster_resolver, worker_device):
        cpu = tf.config.list_physical_devices("CPU")[0]
        local = len(tf.config.get_logical_device_configuration(cpu) or [cpu])  # this process's, not its peers'
        return tuple(f"{worker_device}/device:CPU:{i}" for i in range(local)), "CPU"


class CpuReplicasWorkerStrategy(tf.distribute.MultiWorkerMirroredStrategy):
    """MultiWorkerMirroredStrategy over TF_CONFIG's workers, each with its CPU split into replicas (split_cpu first):
    one input pipeline per worker feeding its replicas, one all-reduce over all of them, as a TPU pod's hosts feed
    theirs. The pod rehearsal's shape of a slice (hosts x devices per host)."""

    def __init__(self, communication_options=None):  # pylint: disable=super-init-not-called
        tf.distribute.Strategy.__init__(self, _CpuReplicasExtended(
            self, cluster_resolver=None,
            communication_options=communication_options or tf.distribute.experimental.CommunicationOptions()))


def is_tpu_strategy(strategy):
    return isinstance(strategy, (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy))


def is_chief(strategy):
    """True on the worker that writes checkpoints, summaries and the model dir's files (albert_tf.runtime.cluster's
    rule; a TPU client is always its own chief)."""
    if is_tpu_strategy(strategy):
        return True
    return cluster.is_chief_of_resolver(getattr(strategy, "cluster_resolver", None))


# ---------------------------------------------------------------------------------------------- can this TF drive a TPU
def has_tpu_kernels():
    """True when this TensorFlow build has TPU kernels (TPUCompile): the TPU wheel and TPU VM images' builds do,
    the CPU/GPU `tensorflow` wheel does not."""
    from tensorflow.python.framework import kernels  # pylint: disable=import-outside-toplevel

    return bool(kernels.get_registered_kernels_for_op("TPUCompile").kernel)


def libtpu_path(environ=None):
    """The TPU runtime library this TensorFlow would load: $TPU_LIBRARY_PATH, the `libtpu` package's libtpu.so or
    the image's /lib/libtpu.so (or /usr/lib, /usr/local/lib); None when there is none."""
    environ = os.environ if environ is None else environ
    candidates = [environ.get("TPU_LIBRARY_PATH")]
    spec = importlib.util.find_spec("libtpu")  # the package is not imported
    if spec is not None and spec.submodule_search_locations:
        candidates += [os.path.join(d, "libtpu.so") for d in spec.submodule_search_locations]
    return next((p for p in candidates + list(LIBTPU_PATHS) if p and os.path.isfile(p)), None)


# ---------------------------------------------------------------------------------------------- the TPU runtime
# What Google's own TF-on-TPU tests set (docs/tpu_runtime.md has the sources): a single-host VM runs the client with
# `--tpu local` (TPU_NAME=local), on PJRT images with the two PJRT variables; a pod slice runs it on worker 0 only
# with TPU_NAME=<slice> and TPU_LOAD_LIBRARY=0 (the slice's workers run the TPU runtime; the client connects to them).
IMAGE_ENV = "ALBERT_TF_TPU_IMAGE"  # the slice's runtime version, as tpu/launch_pretrain.sh exports it
PJRT_VARIABLES = ("NEXT_PLUGGABLE_DEVICE_USE_C_API", "TF_PLUGGABLE_DEVICE_LIBRARY_PATH")


def image_kind(image):
    """The kind of a TensorFlow TPU VM runtime image: 'pjrt' or 'se' (one host), 'pod-pjrt' or 'pod-se' (a pod
    slice), from `tpu-vm-tf-X.Y.Z[-pod][-pjrt|-se][-...]` (e.g. -v4, -pjrt-v5p-and-below); older names without a
    device API are StreamExecutor ('se'). None for None, '' or another image (e.g. a base image with a
    pip-installed TensorFlow): the kind then follows from --tpu."""
    found = devices.parse_image(image)  # the image-name grammar's one home
    return None if found is None else ("pod-" if found.pod else "") + found.api


def _truthy(value):
    return (value or "").strip().lower() in ("true", "1")


def tpu_runtime_problem(tpu, environ, image=None, libtpu=None, isfile=os.path.isfile):
    """Whether this process may drive the TPU as Google's TF-on-TPU tests do. Pure: no TensorFlow, no device.

    Args:
      tpu: --tpu's value: "local" (a single-host VM) or the slice's name (a pod slice, from worker 0).
      environ: the environment (a mapping).
      image: image_kind() of the slice's runtime image, or None (unknown: a name means a pod slice, `local` a
        single-host VM, PJRT when the PJRT variables are set).
      libtpu: the TPU runtime a single-host StreamExecutor client would load (libtpu_path()), or None.
      isfile: checks that TF_PLUGGABLE_DEVICE_LIBRARY_PATH exists.
    Returns:
      None when the configuration is one Google's tests run, else one line saying what to set.
    """
    name = environ.get("TPU_NAME", "").strip()
    pod = image.startswith("pod") if image else tpu != "local"
    on_image = f" (image kind {image}, from ${IMAGE_ENV})" if image else ""
    if name and name != tpu:
        return f"--tpu {tpu}: TPU_NAME={name} names another TPU; export TPU_NAME={tpu} or unset it"
    if pod and tpu == "local":
        return (f"--tpu local on a pod slice{on_image}: run on worker 0 with --tpu <the slice's name> and "
                f"TPU_LOAD_LIBRARY=0")
    if not pod and tpu != "local":
        return f"--tpu {tpu} on a single-host TPU VM{on_image}: use --tpu local"
    pjrt_set = [v for v in PJRT_VARIABLES if environ.get(v, "").strip()]
    if pod:
        if environ.get("TPU_LOAD_LIBRARY", "").strip() != "0":
            return (f"--tpu {tpu} (a pod slice): export TPU_LOAD_LIBRARY=0 (the client on worker 0 must not load "
                    f"the local TPU runtime: it connects to the slice's workers, which run it)")
        if pjrt_set:
            return (f"--tpu {tpu} (a pod slice): unset {' and '.join(pjrt_set)} (the client on worker 0 loads no "
                    f"TPU runtime; Google's pod tests set only TPU_NAME and TPU_LOAD_LIBRARY=0)")
        return None
    if environ.get("TPU_LOAD_LIBRARY", "").strip() == "0":
        return ("--tpu local: unset TPU_LOAD_LIBRARY (=0 keeps TensorFlow from loading the TPU runtime this "
                "single-host client needs; on a pod slice use --tpu <the slice's name> from worker 0)")
    if image == "se" or (image is None and not pjrt_set):
        if pjrt_set:
            return f"--tpu local{on_image}: unset {' and '.join(pjrt_set)} (a StreamExecutor image, not PJRT)"
        if libtpu is None:
            return (f"--tpu local: no TPU runtime to load (libtpu.so: none in $TPU_LIBRARY_PATH, the libtpu "
                    f"package or {', '.join(LIBTPU_PATHS)}); pip install \"libtpu>=0.0.14,<0.0.32\" or set "
                    f"TPU_LIBRARY_PATH")
        return None
    library = environ.get("TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "").strip()
    path = library or libtpu or LIBTPU_PATHS[0]
    want = f"export NEXT_PLUGGABLE_DEVICE_USE_C_API=true TF_PLUGGABLE_DEVICE_LIBRARY_PATH={path}"
    if not _truthy(environ.get("NEXT_PLUGGABLE_DEVICE_USE_C_API")) or not library:
        return f"--tpu local on a PJRT image{on_image}: {want}"
    if not isfile(library):
        return (f"--tpu local: TF_PLUGGABLE_DEVICE_LIBRARY_PATH={library}: no such file; point it at the TPU "
                f"runtime (the image's {LIBTPU_PATHS[0]}, or the libtpu package's libtpu.so)")
    return None


def check_tpu_support(environ=None, tpu="local"):
    """Refuses (ValueError, one line saying what to install or set) what cannot drive the TPU `--tpu` names: a
    TensorFlow build without TPU kernels, or a runtime configuration Google's tests do not run
    (tpu_runtime_problem: the image kind comes from $ALBERT_TF_TPU_IMAGE when set)."""
    environ = os.environ if environ is None else environ
    found = requirements.installed_tensorflow()
    this = f"{found[0]} {found[1]}" if found else f"TensorFlow {tf.__version__}"
    if not has_tpu_kernels():
        raise ValueError(f"--tpu: this TensorFlow ({this}) is not a TPU build (no TPU kernels); {INSTALL_FOR_TPU}")
    problem = tpu_runtime_problem(tpu, environ, image_kind(environ.get(IMAGE_ENV)), libtpu_path(environ))
    if problem:
        raise ValueError(problem)


def use_xla(flag, on_tpu, use_gpu):
    """Whether the train step's forward/backward is jit-compiled: `--xla` auto (GPU only), on or off; never on a
    TPU (the whole loop is compiled for it); never where this TensorFlow has no XLA for the host (the TPU wheel on
    a CPU machine), where `--xla on` is refused."""
    if on_tpu or flag == "off":
        return False
    if not host_xla.available():
        if flag == "on":
            raise ValueError("--xla on: this TensorFlow cannot XLA-compile for this machine (no host XLA: the "
                             "tensorflow-tpu wheel); use --xla off, or the tensorflow wheel (pip install "
                             "\"albert_tf[tf]\")")
        return False
    return flag == "on" or use_gpu


def local_device_kind():
    """A description of this machine's accelerator: the first GPU's name, the TPU VM's accelerator type, or None
    (what runtime.devices.peak_flops_for reads)."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return tf.config.experimental.get_device_details(gpus[0]).get("device_name")
    accelerator = _accelerator_env(os.environ)
    if accelerator:  # e.g. "v3-8", "v4-32"
        return "tpu " + accelerator.split("-")[0]
    return None


def _accelerator_env(environ):
    return (environ.get("TPU_ACCELERATOR_TYPE") or environ.get("ACCELERATOR_TYPE") or "").strip()


# The TPU VM's own description (the GCE metadata server, as TensorFlow's Cloud TPU client and JAX read it): the
# accelerator type of the whole slice on every one of its hosts.
METADATA_ACCELERATOR = "computeMetadata/v1/instance/attributes/accelerator-type"


def vm_metadata(path, environ=None, timeout=2.0):
    """The GCE metadata server's answer at `path` (its text), or None (not on a Google VM, no answer in `timeout`
    s); GCE_METADATA_HOST names another server, as TensorFlow's Cloud TPU client allows."""
    import urllib.request  # pylint: disable=import-outside-toplevel

    host = (environ if environ is not None else os.environ).get("GCE_METADATA_HOST") or "metadata.google.internal"
    request = urllib.request.Request(f"http://{host}/{path}", headers={"Metadata-Flavor": "Google"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310  (a fixed http URL)
            return answer.read().decode().strip() or None
    except (OSError, ValueError):
        return None


def tpu_accelerator_type(strategy, environ=None, metadata=vm_metadata):
    """The accelerator type of the TPU a TPUStrategy runs on ("v4-32"), or None: $TPU_ACCELERATOR_TYPE (or
    $ACCELERATOR_TYPE) when set, else the Cloud TPU API's answer for the slice `--tpu NAME` names (TensorFlow's TPU
    client, which the resolver holds), else the VM's metadata (`metadata(path)`: a TPU VM's `--tpu local`)."""
    environ = os.environ if environ is None else environ
    found = _accelerator_env(environ)
    if not found:
        client = getattr(getattr(strategy, "cluster_resolver", None), "_cloud_tpu_client", None)
        try:  # a remote TPU's client asks the API; a local one (`--tpu local`) has no accelerator_type
            found = client.accelerator_type() if hasattr(client, "accelerator_type") else None
        except Exception:  # pylint: disable=broad-except  # the API did not answer: the metadata may
            found = None
    return found or metadata(METADATA_ACCELERATOR) or None


def running_tpu(strategy, environ=None, metadata=vm_metadata):
    """devices.running_tpu of a TPUStrategy: its accelerator type (tpu_accelerator_type), its TensorFlow devices
    and the image the launch names ($ALBERT_TF_TPU_IMAGE)."""
    environ = os.environ if environ is None else environ
    return devices.running_tpu(tpu_accelerator_type(strategy, environ, metadata), strategy.num_replicas_in_sync,
                               image=environ.get(IMAGE_ENV))
