"""The device table: every accelerator generation the package knows, in one place. The plan, pretrain's MFU, the
keeper, tpu/*.sh and docs/tpu.md ask it; nothing else spells a generation. No TensorFlow.

A Cloud TPU slice is named as Google spells its accelerator type, PREFIX-N: `v3-512` and `v4-128` count
TensorCores, `v5litepod-256` counts chips. TensorFlow sees one device per TensorCore up to v3 and one per chip from
v4 on (v4's two TensorCores form one "megacore" device). Sources: Google's page of each generation (cloud.google.com/
tpu/docs/v2 ... /v5p, /tpu7x), "TPU regions and zones" (/tpu/docs/regions-zones) and "TPU software versions"
(/tpu/docs/runtimes); what others report about TensorFlow on each is in its row's status, with the link.

    python -m albert_tf.runtime.devices TOPOLOGY    prints "DEVICES HOSTS" (tpu/lib.sh asks this, never re-types it)
"""
import dataclasses
import math
import re
import sys

GIB = 2 ** 30
KERAS_HUB_ROUTE = ("export the model with `albert-tf convert --to keras-hub` and train it with keras-hub on its JAX "
                   "backend")
TESTED_HERE = "tested here on CPU only (a rehearsal of the slice's shape)"
EXAMPLES_2025 = "github.com/Prz00124/tpu-vm-examples-2025"  # TensorFlow on v3-8, v5e and v6e VMs, July 2025


@dataclasses.dataclass(frozen=True)
class Generation:  # pylint: disable=too-many-instance-attributes
    """One TPU generation: how its slices are named, what TensorFlow sees of them, and what is known of TensorFlow
    on it (`status`, with its public sources). `refused` (not empty) says why the package does not run on it."""
    name: str               # Google's name of the generation: "v5e"
    prefix: str             # the accelerator type is PREFIX-N: "v5litepod"
    counts: str             # what N counts: "cores" (TensorCores) or "chips"
    sizes: tuple            # the N Google lists
    cores_per_chip: int     # TensorCores per chip
    devices_per_chip: int   # TensorFlow devices per chip (the replicas of TPUStrategy)
    chips_per_host: int     # chips per TPU VM host (the smallest slices have fewer)
    hbm_per_chip: int       # bytes of HBM per chip: Google's "GB" read as GiB (below)
    peak_per_chip: float    # dense bf16 FLOP/s per chip
    image_suffixes: tuple   # hardware suffixes of its TensorFlow images (unsuffixed images are for any generation)
    provisioning: str       # how a slice is made
    zones: tuple            # where Google lists it (not every zone; `accelerator-types list --zone Z` is the truth)
    status: str
    refused: str = ""
    kinds: tuple = ()       # other names a device of it reports (matched by peak_flops_for)
    pod_reports: str = ""   # what others report of its pods ("reported broken by others on ..."): plan and the
                            # keeper say it of a pod slice in one line (a note, not a refusal)

    @property
    def label(self):
        """"TPU v5e", "TPU7x"."""
        return self.name if self.name.startswith("TPU") else f"TPU {self.name}"

    @property
    def hbm_per_device(self):
        return self.hbm_per_chip // self.devices_per_chip

    @property
    def peak_per_device(self):
        return self.peak_per_chip / self.devices_per_chip

    @property
    def grammar(self):
        """"v5litepod-N (N chips: 1, 4, ..., 256)"."""
        return f"{self.prefix}-N (N {self.counts}: {', '.join(map(str, self.sizes))})"

    def slice_names(self):
        """The accelerator types of the generation, smallest first: ["v3-8", "v3-32", ...]."""
        return [f"{self.prefix}-{n}" for n in self.sizes]


# Google's pages give HBM in "GB" (v5e 16 GB, v5p 95 GB); the table reads them as GiB, as the chips report themselves:
# Google's tpu-info and XLA's out-of-memory messages give 15.75 GiB (v5e) and 95.74 GiB (v5p) per chip free to XLA,
# more than 16e9 and 95e9 bytes (14.9 and 88.5 GiB) would allow.

# What others report of v4 pods: its row's status and the one line plan and the keeper print for a v4 pod slice.
V4_PODS = ("on the tf-2.18 images (a segfault at import, github.com/tensorflow/tensorflow/issues/82208) and tf-2.19 "
           "(the TPU system does not start, github.com/tensorflow/tensorflow/issues/93618)")
TPU_VM_CREATE = "gcloud compute tpus tpu-vm create (Spot: queued resources)"
QUEUED_RESOURCES = "gcloud compute tpus queued-resources create"
GENERATIONS = {g.name: g for g in (
    Generation("v2", "v2", "cores", (8, 32, 128, 256, 512), 2, 2, 4, 16 * GIB, 45e12, ("-v5p-and-below",),
               TPU_VM_CREATE, ("us-central1-b", "us-central1-c", "us-central1-a (pods)"),
               f"{TESTED_HERE}; no public TensorFlow 2.18+ run found"),
    Generation("v3", "v3", "cores", (8, 32, 64, 128, 256, 512, 1024, 2048), 2, 2, 4, 32 * GIB, 123e12,
               ("-v5p-and-below",), TPU_VM_CREATE,
               ("us-central1-a (v3-8)", "us-central1-b (v3-8)", "europe-west4-a (pods)"),
               f"{TESTED_HERE}; reported working by others: v3-8 on TensorFlow 2.16.1 and 2.18.0 ({EXAMPLES_2025})"),
    Generation("v4", "v4", "cores", (8, 16, 32, 64, 128, 256, 512, 1024, 1536, 2048, 4096), 2, 1, 4, 32 * GIB,
               275e12, ("-v5p-and-below", "-v4"), TPU_VM_CREATE, ("us-central2-b",),
               f"{TESTED_HERE}; reported broken by others: pods {V4_PODS}",
               pod_reports=f"reported broken by others {V4_PODS}"),
    Generation("v5e", "v5litepod", "chips", (1, 4, 8, 16, 32, 64, 128, 256), 1, 1, 8, 16 * GIB, 197e12,
               ("-v5e-and-v6",), QUEUED_RESOURCES, ("us-central1-a", "us-south1-a", "us-west1-c", "us-west4-a"),
               f"{TESTED_HERE}; reported working by others: TensorFlow 2.16.1 and 2.18.0 on v5litepod-4, -8 and -16 "
               f"({EXAMPLES_2025})", kinds=("tpu v5 lite", "tpu v5litepod")),
    Generation("v5p", "v5p", "cores", (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288), 2, 1, 4,
               95 * GIB, 459e12, ("-v5p-and-below",), QUEUED_RESOURCES, ("us-central1-a", "us-east5-a"),
               f"{TESTED_HERE}; no public TensorFlow run found (one TensorFlow device per chip assumed, as on v4)",
               kinds=("tpu v5",)),  # JAX's name of a v5p device; "tpu v5 lite" (v5e) is matched first, as longer
    Generation("v6e", "v6e", "chips", (1, 4, 8, 16, 32, 64, 128, 256), 1, 1, 4, 32 * GIB, 918e12,
               ("-v5e-and-v6",), QUEUED_RESOURCES, ("us-central1-b", "us-east1-d", "us-east5-a", "us-east5-b"),
               "reported broken by others", kinds=("tpu v6 lite",),
               refused=("TensorFlow failed in every public attempt: no TPU device on 2.16.1, a crash starting "
                        f"TPUStrategy on 2.18.0, a multi-host failure on 2.19.0 ({EXAMPLES_2025})")),
    Generation("TPU7x", "tpu7x", "chips", (), 2, 1, 4, 192 * GIB, 2307e12, (), QUEUED_RESOURCES, ("us-central1-c",),
               "not supported by Google", refused=("Google: \"TensorFlow is not supported\" on TPU7x "
                                                   "(docs.cloud.google.com/tpu/docs/tpu7x)")),
)}
SUPPORTED = tuple(g for g in GENERATIONS.values() if not g.refused)
# The ALBERT paper trained on Cloud TPU v3: the generation a plan assumes when it is given no topology.
PAPER_GENERATION = GENERATIONS["v3"]
TOPOLOGY_GRAMMAR = "; ".join(g.grammar for g in SUPPORTED)


@dataclasses.dataclass(frozen=True)
class Slice:
    """A slice of a generation: its name, TensorFlow devices (replicas), hosts and chips."""
    name: str
    generation: Generation
    devices: int
    hosts: int
    chips: int

    @property
    def devices_per_host(self):
        return self.devices // self.hosts


def pod_note(found):
    """The one line a pod slice (a Slice of more than one host) of a generation with reports about its pods gets from
    plan and the keeper, naming them (a note: nothing refuses the slice); "" otherwise."""
    if found.hosts == 1 or not found.generation.pod_reports:
        return ""
    label = found.generation.label
    return (f"note: {found.name} is a {label} pod slice ({found.hosts} hosts), and {label} pods are "
            f"{found.generation.pod_reports}; nothing refuses it: a short run shows whether this one starts")


def generation_of_type(name):
    """The Generation of an accelerator type's prefix ("v4-32" → v4, "v6e-8" → v6e, refused ones included), or
    None."""
    prefix = (name or "").rpartition("-")[0].lower()
    return next((g for g in GENERATIONS.values() if g.prefix == prefix), None)


def parse_topology(name):
    """The Slice of an accelerator type ("v5litepod-256" → 256 devices on 32 hosts); one-line ValueError (naming the
    valid sizes, or why a generation is refused and the way forward) otherwise."""
    size = (name or "").rpartition("-")[2]
    generation = generation_of_type(name)
    if generation is None:
        raise ValueError(f"{name}: not a TPU slice; expected PREFIX-N: {TOPOLOGY_GRAMMAR}")
    if generation.refused:
        raise ValueError(f"{name}: {generation.label} is refused: {generation.refused}; instead, "
                         f"{KERAS_HUB_ROUTE}")
    if not size.isdigit() or int(size) not in generation.sizes:
        raise ValueError(f"{name}: not a {generation.label} slice: expected one of "
                         f"{', '.join(generation.slice_names())} (N counts {generation.counts})")
    n = int(size)
    chips = n // generation.cores_per_chip if generation.counts == "cores" else n
    return Slice(name, generation, chips * generation.devices_per_chip,
                 math.ceil(chips / generation.chips_per_host), chips)


# TensorFlow's TPU VM runtime images (Cloud TPU "TPU software versions"): tpu-vm-tf-X.Y.Z[-pod][-pjrt|-se][-HARDWARE]
# (a nightly has no version); HARDWARE, since 2.18, names the generations an image is for (a table row's
# image_suffixes); an image without one is for any generation. Older names without a device API are StreamExecutor.
_TPU_IMAGE = re.compile(r"^tpu-vm-tf-(?:(\d+)\.(\d+)\.(\d+)|nightly)(-pod)?(-pjrt|-se)?(-[a-z0-9-]+)?$")


@dataclasses.dataclass(frozen=True)
class TpuImage:
    """A TensorFlow TPU VM image name, read: release (2, 18, 0) or None (a nightly), pod (a multi-host slice's), api
    ("pjrt" or "se"), hardware (its suffix, "" when it has none)."""
    name: str
    release: tuple | None
    pod: bool
    api: str
    hardware: str

    def fits(self, generation):
        """Whether the image is for `generation` (a Generation): no hardware suffix, or one of the row's."""
        return not self.hardware or self.hardware in generation.image_suffixes


def parse_image(name):
    """The TpuImage of a TensorFlow runtime image name, or None for another name (a base image, None, "")."""
    match = _TPU_IMAGE.match(name or "")
    if not match:
        return None
    release = tuple(int(match.group(i)) for i in (1, 2, 3)) if match.group(1) else None
    return TpuImage(name, release, bool(match.group(4)), "pjrt" if match.group(5) == "-pjrt" else "se",
                    match.group(6) or "")


def topology_devices(topology):
    """TensorFlow devices (replicas) of a slice ("v3-512" → 512, "v4-128" → 64); ValueError as parse_topology."""
    return parse_topology(topology).devices


def topology_hosts(topology):
    """TPU VM hosts of a slice ("v3-512" → 64); 1 is a single TPU VM, more a pod slice."""
    return parse_topology(topology).hosts


# Earlier names, kept for their callers: the TensorFlow devices of a slice are v3's cores.
topology_cores = topology_devices
TOPOLOGIES = {name: topology_devices(name) for g in SUPPORTED for name in g.slice_names()}  # name → devices
# The share of a device's memory the plan may take: the rest is left to XLA's temporaries and the runtime.
HBM_USABLE_FRACTION = 0.9
CPU_TOPOLOGY = "cpu"  # `plan --topology cpu`: this machine

def _kinds(generation):
    """The lower-case names a device of `generation` may report: "tpu v5e", "tpu v5litepod", "tpu v5 lite"."""
    return {f"tpu {generation.name.lower()}", f"tpu {generation.prefix}", *generation.kinds}


# Dense bf16 matmul peaks in FLOP/s per device as TensorFlow sees it: a TPU's from the table above ("tpu v3": per
# core; "tpu v4": per chip), a GPU's from its vendor's spec sheet.
PEAK_BF16_FLOPS = {
    **{kind: g.peak_per_device for g in GENERATIONS.values() for kind in _kinds(g)},
    "nvidia a100": 312e12,
    "nvidia h100": 989e12,  # SXM, dense
    "nvidia h200": 989e12,
    "nvidia l4": 121e12,
    "nvidia a10": 125e12,
    "tesla v100": 125e12,   # fp16 tensor cores (no bf16 on V100)
    "tesla t4": 65e12,      # fp16 tensor cores
}


def generation_for(device_kind):
    """The Generation of a device description ("TPU v5 lite", "tpu v5litepod", "TPU v3"), or None."""
    kind = (device_kind or "").lower()
    names = sorted(((k, g) for g in GENERATIONS.values() for k in _kinds(g)), key=lambda kg: -len(kg[0]))
    return next((g for k, g in names if k in kind), None)


def generation_of_image(image):
    """The one supported Generation a TensorFlow TPU image's hardware suffix names ("...-pjrt-v5e-and-v6" → v5e: v6e
    is refused), or None (no suffix, a suffix several generations share such as -v5p-and-below, another name)."""
    found = parse_image(image)
    named = [g for g in SUPPORTED if found is not None and found.hardware and found.fits(g)]
    return named[0] if len(named) == 1 else None


@dataclasses.dataclass(frozen=True)
class RunningTpu:
    """What a run on a TPU takes from the table: its generation and slice (None where unknown) and the HBM and bf16
    peak of one TensorFlow device (None: no memory check, no MFU); `line` says which and from where."""
    generation: Generation | None
    slice: Slice | None
    hbm_per_device: int | None
    peak_per_device: float | None
    line: str


def running_tpu(accelerator_type, replicas, device_kind=None, image=None):
    """The RunningTpu of a TPU run over `replicas` TensorFlow devices. The generation comes from the accelerator type
    ("v4-32": the slice's, from the Cloud TPU API, the VM's metadata or $TPU_ACCELERATOR_TYPE), else from a device
    description ("TPU v4", "TPU v5 lite"), else from the image's hardware suffix. With the slice known, per-device
    figures are the slice's chips shared by the devices TensorFlow sees (the table's devices per chip is an
    assumption for v5p: a difference is said, and TensorFlow's count wins)."""
    source = f"accelerator type {accelerator_type}" if accelerator_type else None
    generation = generation_of_type(accelerator_type)
    try:
        found = parse_topology(accelerator_type) if generation is not None and not generation.refused else None
    except ValueError:
        found = None
    if generation is None and device_kind:
        generation, source = generation_for(device_kind), f"device kind {device_kind!r}"
    if generation is None and image:
        generation, source = generation_of_image(image), f"image {image}"
    if generation is None:
        return RunningTpu(None, None, None, None, (
            f"TPU generation unknown ({replicas} TensorFlow devices; no accelerator type from the Cloud TPU API, the "
            "VM's metadata or $TPU_ACCELERATOR_TYPE): no memory check, no MFU; export TPU_ACCELERATOR_TYPE=TYPE "
            "(e.g. v4-32) to give it"))
    if found is None:
        line = (f"TPU: {generation.label} (from the {source}), {replicas} TensorFlow devices of "
                f"{generation.hbm_per_device / GIB:g} GiB HBM each")
        return RunningTpu(generation, None, generation.hbm_per_device, generation.peak_per_device, line)
    line = (f"TPU: {found.name}, {generation.label}: {found.chips} chips on {found.hosts} host(s), {replicas} "
            f"TensorFlow devices of {found.chips * generation.hbm_per_chip / replicas / GIB:g} GiB HBM each")
    if found.devices != replicas:
        line += (f" (the device table says {found.devices}: {generation.devices_per_chip} per chip; the figures per "
                 "device follow TensorFlow's count)")
    return RunningTpu(generation, found, found.chips * generation.hbm_per_chip // replicas,
                      found.chips * generation.peak_per_chip / replicas, line)


def peak_flops_for(device_kind):
    """The known bf16 peak for a device description ("NVIDIA H100 80GB HBM3", "TPU v3"), or None."""
    kind = (device_kind or "").lower()
    for name in sorted(PEAK_BF16_FLOPS, key=len, reverse=True):
        if name in kind:
            return PEAK_BF16_FLOPS[name]
    return None


def main(argv=None):
    """`python -m albert_tf.runtime.devices TOPOLOGY`: prints "DEVICES HOSTS"; exit 2 with one line if refused."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        if len(argv) != 1:
            raise ValueError("usage: python -m albert_tf.runtime.devices TOPOLOGY")
        found = parse_topology(argv[0])
        print(found.devices, found.hosts)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
