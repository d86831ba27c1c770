"""The cost model of a pretraining run: parameters, per-device memory, FLOPs and time (what `albert-tf plan` prints,
albert_tf/jobs/plan.py, and what `pretrain` checks a CPU run's memory and measures MFU with).

No TensorFlow is imported (the config is read with the standard library), so a plan runs anywhere in a second.
The devices' figures (TensorFlow devices per slice, hosts, HBM, peaks) are the device table's,
albert_tf/runtime/devices.py. A device is what TensorFlow replicates over: a TensorCore up to v3, a chip from v4
on; the plan's "per_core" keys are per device.

    albert-tf plan --config albert_xxlarge --topology v3-512 --batch-size 4096 --max-seq-length 512
    albert-tf plan --config albert_base --set vocab_size=8000 --topology cpu --batch-size 64 --max-seq-length 128

Its flags are `albert-tf pretrain`'s (the same PretrainConfig fields: --batch-size, --max-seq-length, --recipe,
--set, ...), so a plan's command line pastes into pretrain's and back. `--topology cpu` plans a run on this machine:
its memory holds every replica (`--cpu-replicas`), with the overhead and slack `pretrain` checks it against
(HOST_OVERHEAD_BYTES, HOST_SLACK).

**Parameters** are counted from the config exactly as `AlbertPretrainer` builds them (shared and tied variables
once): embeddings V·E + P·E + T·E + LayerNorm 2E (+ the E→H projection E·H + H when E ≠ H); each distinct attention
set 4(H² + H) + 2H and FFN set 2·H·I + I + H + 2H, as many sets as the `sharing` mode keeps (G·inner_group_num
shared, num_hidden_layers·inner_group_num per layer); pooler H² + H; MLM head H·E + E + 2E + V (the decoder is the
word-embedding table, tied); SOP head 2H + 2.

**FLOPs per step** = 3 × forward (the backward pass costs twice the forward), forward = 2 × the multiply-accumulates
of every matmul, per example of L tokens with P masked positions, H hidden, E embedding, I FFN, V vocabulary:
the embedding projection L·E·H (when E ≠ H); per applied block Q/K/V 3·L·H², attention output L·H², attention
scores L²·H, attention context L²·H, FFN in and out 2·L·H·I; the pooler H²; the MLM head on the masked positions
only, P·H·E (dense H→E) + P·E·V (decoder E→V); SOP 2·H. Softmax, LayerNorm, GELU, the embedding gathers and the
optimizer update are not counted (they are not matmuls). This is the count pretrain's MFU uses (`training_flops_per_example`).

**Memory per core** (TPUStrategy is data parallel: every core holds a full replica and its optimizer state):
  - weights float32 (4 bytes per parameter), LAMB slots m and v float32 (8), gradients float32 (4), with bf16
    compute the bf16 copies of the weights that the step casts once (2), and with `--gradient-accumulation-steps`
    the float32 sum of the micro-batches' gradients (4);
  - activations kept for the backward pass by the encoder's training path (albert_tf/modeling: what each op's
    gradient reads), for one micro-batch of b examples (the per-core batch / accumulation steps), at the compute
    dtype's size (bf16: 2 bytes, float32: 4), per applied block (num_hidden_layers × inner_group_num blocks):
      8 tensors [b, L, H]: the block input, q, k, v, the attention context, the attention output (pre-LN), the
        attention LayerNorm output (the FFN's input) and the FFN output (pre-LN); the fused LayerNorms keep no
        statistics (their backward recomputes them);
      2 tensors [b, L, I]: the FFN pre-activation (for GELU's gradient) and its output;
      2 tensors [b, heads, L, L]: the attention scores (the fused softmax's backward recomputes the softmax from
        them) and the probabilities (for the context matmul's gradient);
      with dropout (config rate > 0), the masks at the compute dtype: one [b, heads, L, L] and two [b, L, H];
    plus the embeddings (the sum and its LayerNorm output, 2 × [b, L, E]) and the heads (the gathered [b, P, H],
    3 × [b, P, E] in the MLM transform, and the float32 logits and their softmax [b, P, V], 8 bytes per element);
  - with `--remat` (rematerialization: each block's activations recomputed in the backward pass) only each block's
    input [b, L, H] is kept, plus the working set of two blocks (the one being recomputed and differentiated, and
    the next one, which a dataflow executor starts as soon as its input gradient exists); the recomputation costs
    one more forward of the blocks per step.
The activation model is measured against real steps on CPU (benchmarks/plan_memory.py, docs/benchmarks.md). XLA's
own temporaries, the program and the infeed buffers are not modelled: the plan calls a run
"fits" when the estimate is at most 90% of the device's HBM (the table's: 16 GiB per v3 core, 32 GiB per v4
chip, ...), and names what to change when it
is not: first what keeps the run's recipe (`--gradient-accumulation-steps`, `--remat`), then what changes it (a
smaller global batch, a shorter sequence), and ends with the `albert-tf pretrain` flags of a configuration that fits.

**Time**: step time = executed FLOPs / (MFU × peak), with the peak of the topology (the table's bf16 peak per chip
times its chips; on `--topology cpu` this machine's float32 matmul rate, measured when the plan is made:
`host_matmul_flops`); the executed FLOPs are the step's FLOPs plus, with `--remat`, the recomputed
forward of the blocks. `--mfu` is thus the fraction of the peak that the matrix units sustain (a CPU's step
sustained 0.59 to 0.83 of TensorFlow's float32 matmul rate in docs/benchmarks.md, so the default 0.5 errs long).

**Learning rate for other batch sizes**: the plan keeps the run's learning rate (the recipe's, the one given, or
pretrain's default) and prints the scaled one beside it as a note: square-root scaling from the paper's 0.00176 at batch 4096,
lr(B) = 0.00176 · √(B / 4096). LAMB normalizes each layer's update by its trust ratio, so the step size does not grow
with the gradient's scale as SGD's does; the LAMB paper (You et al., 2020) scales its learning rate with the square
root of the batch size in its BERT batch-size experiments. Linear scaling would give 16× the rate at batch 65536,
where LAMB's authors needed far less. It is a starting point, not a tuned value.
"""
import math
import os
import time

from albert_tf import run_config
from albert_tf.runtime.devices import (CPU_TOPOLOGY, GENERATIONS, HBM_USABLE_FRACTION, PAPER_GENERATION,
                                       parse_topology)
from albert_tf.settings.defaults import MFU, PAPER
from albert_tf.settings.plan_config import PlanConfig, check_fraction, check_split

# What a CPU run needs besides the host estimate (which matches TensorFlow's allocator statistics:
# benchmarks/plan_memory.py): TensorFlow's runtime, the program and the input pipeline (1 GiB), and the slack of
# the allocator's bins over the bytes in use (25%: albert_tiny at batch 4096 peaked at 14.7 GiB RSS where the
# estimate is 11.7 GiB).
HOST_OVERHEAD_BYTES = 2**30
HOST_SLACK = 1.25

LEARNING_RATE_RULE = "square-root scaling: lr(B) = 0.00176 * sqrt(B / 4096) (paper: 0.00176 at batch 4096)"
FLOPS_RULE = ("FLOPs per step = 3 x forward (backward = 2 x forward); forward = 2 x the multiply-accumulates of "
              "every matmul: embedding projection E->H, per applied block Q/K/V/output, attention scores and context, "
              "FFN in and out; pooler; MLM head (dense H->E and decoder E->V) on the masked positions only; SOP. "
              "Softmax, LayerNorm, GELU, gathers and the optimizer are not counted.")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2}
GIB = 2 ** 30
YEAR_SECONDS = 365.25 * 86400


# ---------------------------------------------------------------------------------------------- parameters
def parameter_sets(config):
    """(attention sets, FFN sets): how many distinct parameter sets the blocks use, as `AlbertEncoder` builds them
    (sharing "all"/"attention" share attention within a group, "all"/"ffn" share the FFN)."""
    shared = config.num_hidden_groups * config.inner_group_num
    own = config.num_hidden_layers * config.inner_group_num
    attention = shared if config.sharing in ("all", "attention") else own
    ffn = shared if config.sharing in ("all", "ffn") else own
    return attention, ffn


def parameter_counts(config):
    """The parameters of `AlbertPretrainer(config)` by part (shared and tied variables counted once).

    Returns a dict: embeddings, attention, ffn, pooler (the encoder's parts), encoder (their sum), mlm_head,
    sop_head, total.
    """
    c = config
    V, E, H, I = c.vocab_size, c.embedding_size, c.hidden_size, c.intermediate_size
    attention_sets, ffn_sets = parameter_sets(c)
    embeddings = (V + c.max_position_embeddings + c.type_vocab_size) * E + 2 * E
    if E != H:
        embeddings += E * H + H
    counts = {
        "embeddings": embeddings,
        "attention": attention_sets * (4 * (H * H + H) + 2 * H),
        "ffn": ffn_sets * (H * I + I + I * H + H + 2 * H),
        "pooler": H * H + H,
    }
    counts["encoder"] = sum(counts.values())
    counts["mlm_head"] = H * E + E + 2 * E + V
    counts["sop_head"] = 2 * H + 2
    counts["total"] = counts["encoder"] + counts["mlm_head"] + counts["sop_head"]
    return counts


# ---------------------------------------------------------------------------------------------- FLOPs
def forward_macs(config, seq_length, max_predictions):
    """Multiply-accumulates of every matmul in the forward pass of ONE example, by term (see the module docstring).

    Returns a dict of ints; `blocks` is the sum of the per-block terms over all applied blocks, `total` the sum of
    everything.
    """
    c, L, P = config, seq_length, max_predictions
    H, E, I, V = c.hidden_size, c.embedding_size, c.intermediate_size, c.vocab_size
    blocks = c.num_hidden_layers * c.inner_group_num
    macs = {
        "embedding_projection": L * E * H if E != H else 0,
        "attention_qkv": blocks * 3 * L * H * H,
        "attention_output": blocks * L * H * H,
        "attention_scores": blocks * L * L * H,   # heads × L × L × head_size
        "attention_context": blocks * L * L * H,
        "ffn_in": blocks * L * H * I,
        "ffn_out": blocks * L * I * H,
        "pooler": H * H,
        "mlm_transform": P * H * E,
        "mlm_decoder": P * E * V,
        "sop": H * 2,
    }
    macs["blocks"] = sum(macs[k] for k in ("attention_qkv", "attention_output", "attention_scores",
                                           "attention_context", "ffn_in", "ffn_out"))
    macs["total"] = sum(v for k, v in macs.items() if k != "blocks")
    return macs


def training_flops_per_example(config, seq_length, max_predictions):
    """Training FLOPs of one example: 3 × forward, forward = 2 × MACs."""
    return 3 * 2 * forward_macs(config, seq_length, max_predictions)["total"]


# ---------------------------------------------------------------------------------------------- memory
def state_bytes(parameters, dtype, accumulation_steps=1):
    """Bytes of the per-replica training state: weights, LAMB m and v, gradients (float32), the bf16 weight
    copies under bf16 compute, and with gradient accumulation the float32 sum of the micro-batches' gradients."""
    per_parameter = 4 + 8 + 4 + (2 if dtype == "bfloat16" else 0) + (4 if accumulation_steps > 1 else 0)
    return parameters * per_parameter


def activation_bytes(config, batch, seq_length, max_predictions, dtype, remat=False):
    """Bytes of the activations kept for the backward pass for `batch` examples (the activation model of the
    module docstring). Returns a dict: per_block, blocks (all applied blocks, or with remat the kept inputs plus
    two blocks' working set), embeddings, heads, total."""
    c, b, L, P = config, batch, seq_length, max_predictions
    H, E, I, N, V = c.hidden_size, c.embedding_size, c.intermediate_size, c.num_attention_heads, c.vocab_size
    a = DTYPE_BYTES[dtype]
    per_block = a * b * (8 * L * H + 2 * L * I + 2 * N * L * L)
    if c.attention_probs_dropout_prob > 0:
        per_block += a * b * N * L * L
    if c.hidden_dropout_prob > 0:
        per_block += a * b * 2 * L * H
    blocks = c.num_hidden_layers * c.inner_group_num
    kept = blocks * a * b * L * H + min(2, blocks) * per_block if remat else blocks * per_block
    embeddings = a * b * 2 * L * E
    heads = a * b * (P * H + 3 * P * E + 2 * H) + 8 * b * P * V
    return {"per_block": per_block, "blocks": kept, "embeddings": embeddings, "heads": heads,
            "total": kept + embeddings + heads}


def host_memory_bytes(config, global_batch, seq_length, max_predictions=PAPER["max_predictions"], replicas=1, dtype="float32",
                      remat=False, accumulation_steps=1):
    """The memory a CPU run of `albert-tf pretrain` needs for the model (the same model as the TPU plan, every
    replica on this host): per replica the training state and the activations of its share of the batch.
    The input pipeline, TensorFlow's runtime and the unfused graph's extra intermediates come on top.

    Args:
      config: AlbertConfig. global_batch: examples per step over all replicas. replicas: MirroredStrategy
        replicas on this host (`--cpu-replicas`, 1 otherwise). dtype: "float32" or "bfloat16" (compute).
      remat, accumulation_steps: `--remat`, `--gradient-accumulation-steps` (activations of one micro-batch).
    Returns:
      int bytes.
    """
    _check_positive(batch_size=global_batch, max_seq_length=seq_length, max_predictions=max_predictions,
                    replicas=replicas, gradient_accumulation_steps=accumulation_steps)
    micro = -(-global_batch // (replicas * accumulation_steps))
    state = state_bytes(parameter_counts(config)["total"], dtype, accumulation_steps)
    activations = activation_bytes(config, micro, seq_length, max_predictions, dtype, remat)["total"]
    return replicas * (state + activations)


def host_total_bytes():
    """This machine's physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def host_need_bytes(config, global_batch, seq_length, max_predictions=PAPER["max_predictions"], replicas=1, dtype="float32",
                    remat=False, accumulation_steps=1):
    """What a CPU run of `albert-tf pretrain` needs of the machine's memory: `host_memory_bytes` with HOST_SLACK
    and HOST_OVERHEAD_BYTES (the rule pretrain refuses a run by and `plan --topology cpu` plans with)."""
    return HOST_OVERHEAD_BYTES + HOST_SLACK * host_memory_bytes(
        config, global_batch, seq_length, max_predictions, replicas=replicas, dtype=dtype, remat=remat,
        accumulation_steps=accumulation_steps)


def host_matmul_flops(size=1024, seconds=0.25):
    """This machine's float32 matmul rate in FLOP/s, all its cores: the fastest of back-to-back `size`³ NumPy
    matmuls over about `seconds` (at least three), the peak a `plan --topology cpu` times a step against. NumPy's
    BLAS and TensorFlow's oneDNN ran a float32 2048³ matmul within 25 % of each other on the project's CPUs; a bf16
    rate (AMX) is not measured. A busy machine measures low: its plan's times are its own."""
    import numpy as np  # pylint: disable=import-outside-toplevel  (the plan imports no NumPy for a TPU slice)

    a = np.full((size, size), 0.5, np.float32)
    b = np.full((size, size), 0.25, np.float32)
    best, start, runs = float("inf"), time.perf_counter(), 0
    while runs < 3 or time.perf_counter() - start < seconds:
        began = time.perf_counter()
        np.matmul(a, b)
        best, runs = min(best, time.perf_counter() - began), runs + 1
    return 2 * size ** 3 / best


def host_usable_fraction(total):
    """The share of a machine of `total` bytes that the model's estimate may take (the rest: the overhead, and the
    allocator's slack over the bytes in use), as `estimate`'s usable_fraction for --topology cpu."""
    return max(0.0, (total - HOST_OVERHEAD_BYTES) / (HOST_SLACK * total))


def host_batch_that_fits(config, seq_length, max_predictions=PAPER["max_predictions"], total=None, dtype="float32", largest=256):
    """The largest power-of-two global batch, at most `largest`, whose CPU run on one replica fits a machine of
    `total` bytes (default: this one's), or 0 when not even one example fits."""
    total = host_total_bytes() if total is None else total
    batch = largest
    while batch >= 1 and host_need_bytes(config, batch, seq_length, max_predictions, dtype=dtype) > total:
        batch //= 2
    return batch


# ---------------------------------------------------------------------------------------------- the plan
def learning_rate_for(batch_size):
    """The paper's 0.00176 at batch 4096, square-root scaled to `batch_size`."""
    return PAPER["learning_rate"] * math.sqrt(batch_size / PAPER["batch_size"])


def _check_positive(**values):
    """Refuses a value that is not a positive integer, named by its PlanConfig flag (`cores`: the topology's)."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            said = "cores of --topology" if name == "cores" else run_config.flag_for(PlanConfig, name)
            raise ValueError(f"{said}: expected a positive integer, got {value!r}")


def _check_estimate_arguments(config, global_batch, seq_length, max_predictions, cores, dtype, mfu, steps, topology,
                              accumulation_steps):
    """`estimate`'s arguments, each refused with one line naming the flag."""
    _check_positive(batch_size=global_batch, max_seq_length=seq_length, max_predictions=max_predictions, cores=cores,
                    gradient_accumulation_steps=accumulation_steps)
    check_split(global_batch, cores, accumulation_steps, topology)
    config.check_seq_length(seq_length)
    if max_predictions > seq_length:
        raise ValueError(f"--max-predictions {max_predictions} exceeds --max-seq-length {seq_length}")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"--dtype {dtype!r}: expected one of {', '.join(DTYPE_BYTES)}")
    check_fraction("--mfu", mfu)
    if steps is not None:
        _check_positive(num_train_steps=steps)


def estimate(config, global_batch, seq_length, max_predictions=PAPER["max_predictions"], cores=8, dtype="bfloat16", remat=False,
             steps=None, mfu=MFU, peak_flops_per_core=PAPER_GENERATION.peak_per_device,
             memory_per_core=PAPER_GENERATION.hbm_per_device,
             topology=None, accumulation_steps=1, usable_fraction=HBM_USABLE_FRACTION,
             learning_rate=PAPER["learning_rate"]):
    """The plan of a pretraining run of `config`, data parallel over `cores` replicas.

    Args:
      config: AlbertConfig. global_batch: examples per step. seq_length, max_predictions: the records' lengths.
      cores: replicas (TensorFlow devices: a v3 core, a v4 chip); the global batch must divide evenly. dtype:
        compute dtype.
      remat: rematerialize the blocks' activations in the backward pass. steps: training steps (None: no total).
      mfu: the fraction of the peak sustained. peak_flops_per_core: bf16 FLOP/s of one device (None: no times;
        default: the paper's Cloud TPU v3 core). memory_per_core: bytes of one device's memory (None: no fit
        check); usable_fraction: the share of it the estimate may take. topology: a slice name (its hosts and
        device are reported from the device table) or another name, for the output only.
      accumulation_steps: `--gradient-accumulation-steps`: each core's batch runs as this many micro-batches
        (activations of one micro-batch; the same FLOPs per optimizer step).
      learning_rate: the run's (kept; `scaled_learning_rate` is the square-root rule's value for the batch).
    Returns:
      a dict (JSON-ready): parameters, parameter_counts, per_core_batch (per device), hosts, device ("core" or
      "chip": what one device of the topology is), micro_batch, flops_per_example,
      flops_per_step, forward_macs_per_example, hbm_per_core_bytes and its parts, hbm_capacity_bytes, fits, advice,
      recommended (the flags of a configuration that fits), step_time_s, total_time_s, learning_rate,
      scaled_learning_rate, ...
    """
    _check_estimate_arguments(config, global_batch, seq_length, max_predictions, cores, dtype, mfu, steps,
                              topology, accumulation_steps)
    per_core = global_batch // cores
    micro = per_core // accumulation_steps
    counts = parameter_counts(config)
    macs = forward_macs(config, seq_length, max_predictions)
    flops_per_example = 3 * 2 * macs["total"]
    flops_per_step = flops_per_example * global_batch
    recompute_flops = 2 * macs["blocks"] * global_batch if remat else 0
    state = state_bytes(counts["total"], dtype, accumulation_steps)
    activations = activation_bytes(config, micro, seq_length, max_predictions, dtype, remat)
    hbm = state + activations["total"]

    plan = {
        "config": config.to_dict(),
        "topology": topology,
        "cores": cores,
        **_slice_facts(topology),
        "dtype": dtype,
        "remat": bool(remat),
        "accumulation_steps": accumulation_steps,
        "global_batch": global_batch,
        "per_core_batch": per_core,
        "micro_batch": micro,
        "seq_length": seq_length,
        "max_predictions": max_predictions,
        "parameters": counts["total"],
        "parameter_counts": counts,
        "forward_macs_per_example": macs,
        "flops_per_example": flops_per_example,
        "flops_per_step": flops_per_step,
        "executed_flops_per_step": flops_per_step + recompute_flops,
        "flops_rule": FLOPS_RULE,
        "weights_bytes": 4 * counts["total"],
        "optimizer_slots_bytes": 8 * counts["total"],
        "gradients_bytes": 4 * counts["total"],
        "bf16_weight_copies_bytes": 2 * counts["total"] if dtype == "bfloat16" else 0,
        "gradient_sum_bytes": 4 * counts["total"] if accumulation_steps > 1 else 0,
        "activations_bytes": activations["total"],
        "activations_per_block_bytes": activations["per_block"],
        "activations_without_remat_bytes":
            activation_bytes(config, micro, seq_length, max_predictions, dtype, False)["total"],
        "activations_with_remat_bytes":
            activation_bytes(config, micro, seq_length, max_predictions, dtype, True)["total"],
        "hbm_per_core_bytes": hbm,
        "hbm_capacity_bytes": memory_per_core,
        "hbm_usable_fraction": usable_fraction,
        "fits": None if memory_per_core is None else hbm <= usable_fraction * memory_per_core,
        "advice": [],
        "recommended": None,
        "mfu": mfu,
        "peak_flops": None if peak_flops_per_core is None else peak_flops_per_core * cores,
        "step_time_s": None,
        "steps": steps,
        "total_time_s": None,
        "learning_rate": learning_rate,
        "scaled_learning_rate": learning_rate_for(global_batch),
        "learning_rate_rule": LEARNING_RATE_RULE,
    }
    return _times_and_advice(config, plan)


def _slice_facts(topology):
    """What the device table says of `topology` for the output: hosts, what a device is, the chip's peak and its
    devices; empty-handed (None, "core") for the CPU, no topology or another name."""
    try:
        found = parse_topology(topology) if topology and topology != CPU_TOPOLOGY else None
    except ValueError:
        found = None
    if found is None:
        return {"hosts": None, "device": "core", "generation": None}
    g = found.generation
    return {"hosts": found.hosts, "device": "core" if g.devices_per_chip > 1 else "chip", "generation": g.name}


def _times_and_advice(config, plan):
    """`plan` with its step and total times (where the peak is known), and what to change when it does not fit or
    the recommended option when it does."""
    if plan["peak_flops"] is not None:
        plan["step_time_s"] = plan["executed_flops_per_step"] / (plan["mfu"] * plan["peak_flops"])
        if plan["steps"] is not None:
            plan["total_time_s"] = plan["step_time_s"] * plan["steps"]
    if plan["fits"] is False:
        plan["advice"], plan["recommended"] = _advice(config, plan)
    elif plan["fits"]:
        plan["recommended"] = _option(plan, plan["global_batch"], plan["remat"], plan["accumulation_steps"],
                                      plan["hbm_per_core_bytes"], plan["executed_flops_per_step"])
    return plan


# ---------------------------------------------------------------------------------------------- advice
# Accumulation alone is advised only while each core's micro-batch keeps at least this many examples: below it
# the matrix units idle (a v3 MXU is 128 x 128; 8 x 512 tokens fill it); remat + accumulation is advised instead.
MIN_MICRO_BATCH = 8


def _option(plan, global_batch, remat, accumulation_steps, hbm, executed_flops):
    """A configuration as the flags `albert-tf pretrain` takes (only existing flags), its memory and cost."""
    flags = {"--batch-size": global_batch, "--max-seq-length": plan["seq_length"],
             "--max-predictions": plan["max_predictions"], "--dtype": plan["dtype"]}
    if remat:
        flags["--remat"] = True
    if accumulation_steps > 1:
        flags["--gradient-accumulation-steps"] = accumulation_steps
    return {"flags": flags, "hbm_per_core_bytes": hbm, "executed_flops_per_step": executed_flops,
            "keeps_global_batch": global_batch == plan["global_batch"]}


def pretrain_flags(option):
    """The option's flags as a command-line fragment: "--batch-size 4096 ... --remat"."""
    return " ".join(flag if value is True else f"{flag} {value}" for flag, value in option["flags"].items())


def _advice(config, plan):
    """What to change when the plan does not fit, the changes that keep the run's recipe (global batch, sequence
    length) first: --remat, --gradient-accumulation-steps, both; then a smaller per-core batch (a different global
    batch and learning rate) or a shorter sequence. Returns (advice lines, the recommended option or None)."""
    budget = plan["hbm_usable_fraction"] * plan["hbm_capacity_bytes"]
    dtype, L, P, unit = plan["dtype"], plan["seq_length"], plan["max_predictions"], plan["device"]
    parameters, per_core, batch = plan["parameters"], plan["per_core_batch"], plan["global_batch"]
    recompute = 2 * plan["forward_macs_per_example"]["blocks"] * batch

    def need(examples, remat, steps, length=L):
        return (state_bytes(parameters, dtype, steps)
                + activation_bytes(config, examples // steps, length, min(P, length), dtype, remat)["total"])

    if need(1, True, 1, min(L, 64)) > budget:
        state = state_bytes(parameters, dtype)
        return [f"the weights, gradients and LAMB slots alone take {state / GIB:.1f} GiB of the "
                f"{budget / GIB:.1f} GiB usable per {unit}: this model does not fit a {unit} whatever the batch "
                "(the plan knows data parallelism only)"], None
    advice, options = [], []
    divisors = [n for n in range(1, per_core + 1) if per_core % n == 0]
    for remat in (False, True):
        steps = next((n for n in divisors if need(per_core, remat, n) <= budget
                      and (remat or n == 1 or per_core // n >= MIN_MICRO_BATCH)), None)
        if steps is None or (remat, steps) == (plan["remat"], plan["accumulation_steps"]):
            continue
        option = _option(plan, batch, remat, steps, need(per_core, remat, steps),
                         plan["flops_per_step"] + (recompute if remat else 0))
        options.append(option)
        cost = (f"one more forward of the blocks: {option['executed_flops_per_step'] / plan['flops_per_step']:.2f}x "
                "the FLOPs" if remat else "the same FLOPs")
        if steps > 1:
            cost += f", micro-batches of {per_core // steps} per {unit}"
        change = " ".join(filter(None, ("--remat" if remat else "",
                                        f"--gradient-accumulation-steps {steps}" if steps > 1 else "")))
        advice.append(f"{change} fits ({option['hbm_per_core_bytes'] / GIB:.1f} GiB per {unit}; {cost}; keeps the "
                      f"global batch {batch})")
    remat = plan["remat"]
    best = max((b for b in range(1, per_core) if need(b, remat, 1) <= budget), default=0)
    if best > 8:
        best -= best % 8  # a multiple of 8 (TPU-friendly shapes)
    if best:
        text = (f"per-{unit} batch {best} fits: global batch {best * plan['cores']} on {plan['cores']} {unit}s "
                f"(square-root scaling suggests learning rate {learning_rate_for(best * plan['cores']):.6g}; "
                "changes the recipe)")
        bigger = next((name for name in _same_generation(plan["topology"]) if batch % (n := parse_topology(
            name).devices) == 0 and batch // n <= best), None)
        if bigger:
            text += f", or the same global batch on {bigger}"
        advice.append(text)
        options.append(_option(plan, best * plan["cores"], remat, 1, need(best, remat, 1),
                               plan["executed_flops_per_step"] * best * plan["cores"] // batch))
    shorter = next((s for s in range((L - 1) // 64 * 64, 0, -64) if need(per_core, remat, 1, s) <= budget), None)
    if shorter:
        advice.append(f"--max-seq-length {shorter} fits at this batch (changes the recipe)")
    if not advice:
        advice.append(f"no single change fits: combine a smaller per-{unit} batch with --remat")
    # keep the recipe first, then the fewest FLOPs, then the fewest accumulation steps
    options.sort(key=lambda o: (not o["keeps_global_batch"], o["executed_flops_per_step"],
                                o["flags"].get("--gradient-accumulation-steps", 1)))
    return advice, (options[0] if options else None)


def _same_generation(topology):
    """The slice names of `topology`'s generation, smallest first (none for the CPU or another name)."""
    try:
        return parse_topology(topology).generation.slice_names() if topology and topology != CPU_TOPOLOGY else []
    except ValueError:
        return []


# ---------------------------------------------------------------------------------------------- output
def _flops_text(value):
    for unit, scale in (("EFLOP", 1e18), ("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} FLOP"


def count_text(value):
    """A count in 3 significant digits with a unit: 800, 36.8K, 11.7M, 223M, 1.2B."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if value >= scale * 0.9995:  # 999,600 reads 1M, not 1e+03K
            return f"{value / scale:.3g}{unit}"
    return f"{value:.3g}"


def _duration_text(seconds):
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.3g} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.3g} h"
    if seconds < 3 * YEAR_SECONDS:
        return f"{seconds / 86400:.3g} days"
    return f"{seconds / YEAR_SECONDS:,.0f} years"


def summary_line(plan):
    """One line for a log: parameters, per-core batch and memory, FLOPs per step, step and total time."""
    parts = [f"plan: {count_text(plan['parameters'])} parameters",
             f"{plan['cores']} replica(s) x {plan['per_core_batch']} examples"]
    if plan["hbm_capacity_bytes"] is not None:
        verdict = "fits" if plan["fits"] else "DOES NOT FIT"
        parts.append(f"{plan['hbm_per_core_bytes'] / GIB:.2f} of {plan['hbm_capacity_bytes'] / GIB:.0f} GiB per "
                     f"replica ({verdict})")
    else:
        parts.append(f"{plan['hbm_per_core_bytes'] / GIB:.2f} GiB per replica")
    parts.append(f"{_flops_text(plan['flops_per_step'])}/step")
    if plan["step_time_s"] is not None:
        text = f"{_duration_text(plan['step_time_s'])}/step at MFU {plan['mfu']:g}"
        if plan["total_time_s"] is not None:
            text += f", {plan['steps']} steps in {_duration_text(plan['total_time_s'])}"
        parts.append(text)
    return ", ".join(parts)


def _where(plan):
    """"v5litepod-256 (256 TensorFlow devices, 8 per host, on 32 hosts)", "this machine's CPU (2 replica(s))"."""
    if plan["topology"] == CPU_TOPOLOGY:
        return f"this machine's CPU ({plan['cores']} replica(s))"
    if plan["hosts"]:
        return (f"{plan['topology']} ({plan['cores']} TensorFlow devices, {plan['cores'] // plan['hosts']} per "
                f"host, on {plan['hosts']} host(s))")
    return plan["topology"] or f"{plan['cores']} {plan['device']}s"


def _peak_note(plan):
    """Where the peak comes from: "v5litepod-256: TPU v5e, 197 TFLOP/s bf16 per chip, 1 TensorFlow device per
    chip" (the device table's row), or the devices alone."""
    if plan["topology"] == CPU_TOPOLOGY:
        return "this machine's float32 matmul rate, measured now"
    if plan["generation"] is None:
        return f"{plan['cores']} {plan['device']}s"
    g = GENERATIONS[plan["generation"]]
    return (f"{plan['topology']}: {g.label}, {g.peak_per_chip / 1e12:g} TFLOP/s bf16 per chip, "
            f"{g.devices_per_chip} TensorFlow device(s) per chip")


def report(plan, run_lines=()):
    """The plan as readable text (several lines); `run_lines` (the run's figures) go before the command to paste."""
    counts, macs = plan["parameter_counts"], plan["forward_macs_per_example"]
    unit, where = plan["device"], _where(plan)
    memory = "RAM" if plan["topology"] == CPU_TOPOLOGY else "HBM"
    lines = [
        f"parameters: {plan['parameters']:,} (encoder {counts['encoder']:,}: embeddings {counts['embeddings']:,}, "
        f"attention {counts['attention']:,}, FFN {counts['ffn']:,}, pooler {counts['pooler']:,}; MLM head "
        f"{counts['mlm_head']:,}, SOP head {counts['sop_head']:,})",
        f"batch: {plan['global_batch']} global on {where} = {plan['per_core_batch']} per {unit}; "
        f"seq {plan['seq_length']}, {plan['max_predictions']} predictions; dtype {plan['dtype']}"
        f"{', remat' if plan['remat'] else ''}"
        + (f", {plan['accumulation_steps']} accumulated micro-batches of {plan['micro_batch']} per {unit}"
           if plan["accumulation_steps"] > 1 else ""),
        "",
        f"memory per {unit}:",
        f"  weights (float32)           {plan['weights_bytes'] / GIB:8.2f} GiB",
        f"  LAMB slots m, v (float32)   {plan['optimizer_slots_bytes'] / GIB:8.2f} GiB",
        f"  gradients (float32)         {plan['gradients_bytes'] / GIB:8.2f} GiB",
    ]
    if plan["bf16_weight_copies_bytes"]:
        lines.append(f"  bf16 weight copies          {plan['bf16_weight_copies_bytes'] / GIB:8.2f} GiB")
    if plan["gradient_sum_bytes"]:
        lines.append(f"  gradient sum (float32)      {plan['gradient_sum_bytes'] / GIB:8.2f} GiB")
    lines += [
        f"  activations{' (remat)' if plan['remat'] else '        '}         {plan['activations_bytes'] / GIB:8.2f} GiB"
        f"   (without remat {plan['activations_without_remat_bytes'] / GIB:.2f} GiB, with remat "
        f"{plan['activations_with_remat_bytes'] / GIB:.2f} GiB; {plan['activations_per_block_bytes'] / GIB:.3f} "
        "GiB per block)",
        f"  total                       {plan['hbm_per_core_bytes'] / GIB:8.2f} GiB",
    ]
    if plan["hbm_capacity_bytes"] is not None:
        usable = plan["hbm_usable_fraction"] * plan["hbm_capacity_bytes"]
        if plan["fits"]:
            lines.append(f"  fits: {plan['hbm_per_core_bytes'] / GIB:.2f} GiB <= {usable / GIB:.1f} GiB usable "
                         f"({plan['hbm_usable_fraction']:.0%} of {plan['hbm_capacity_bytes'] / GIB:.0f} GiB {memory})")
        else:
            lines.append(f"  DOES NOT FIT: {plan['hbm_per_core_bytes'] / GIB:.2f} GiB > {usable / GIB:.1f} GiB usable "
                         f"({plan['hbm_usable_fraction']:.0%} of {plan['hbm_capacity_bytes'] / GIB:.0f} GiB {memory})")
            lines += [f"  change: {a}" for a in plan["advice"]]
    forward = 2 * macs["total"]
    lines += ["", f"FLOPs per step: {_flops_text(plan['flops_per_step'])} = 3 x forward "
                  f"{_flops_text(forward * plan['global_batch'])} "
                  f"({_flops_text(plan['flops_per_example'])} per example)",
              "  " + plan["flops_rule"],
              "  forward per example, 2 x MACs:"]
    for name in ("embedding_projection", "attention_qkv", "attention_output", "attention_scores",
                 "attention_context", "ffn_in", "ffn_out", "pooler", "mlm_transform", "mlm_decoder", "sop"):
        share = macs[name] / macs["total"] if macs["total"] else 0.0
        lines.append(f"    {name:22s}{_flops_text(2 * macs[name]):>14s}  {share:6.1%}")
    if plan["step_time_s"] is not None:
        lines += ["", f"time: {_duration_text(plan['step_time_s'])} per step at MFU {plan['mfu']:g} of "
                      f"{_flops_text(plan['peak_flops'])}/s peak ({_peak_note(plan)})"
                  + (" including the recomputed forward" if plan["remat"] else "")]
        option = plan["recommended"]
        if plan["total_time_s"] is not None and (option is None or "steps" in option):  # else: the option's total
            lines.append(f"      {plan['steps']:,} steps: {total_text(plan['total_time_s'])}")
    lines += ["", learning_rate_note(plan), *run_lines]
    option = plan["recommended"]
    if option is not None:
        time, steps = "", option.get("steps", plan["steps"])  # an option of another length says its own
        if plan["peak_flops"] is not None:
            step = option["executed_flops_per_step"] / (plan["mfu"] * plan["peak_flops"])
            time = f", {_duration_text(step)} per step" + (
                f", {steps:,} steps: {total_text(step * steps)}" if steps else "")
        heading = option.get("heading") or ("fits" if plan["fits"] else "fits instead")
        lines += ["", f"{heading}: {option['hbm_per_core_bytes'] / GIB:.2f} GiB "
                      f"per {unit}{time}{'' if option['keeps_global_batch'] else ' (a different global batch)'}:",
                  "  " + (plan.get("pretrain_command") or pretrain_flags(option))]
    return "\n".join(lines)


def total_text(seconds):
    """A run's total time: "7 days (168.1 h)", "68.5 h", "42 min" (the hours added only where the unit is days)."""
    text = _duration_text(seconds)
    return f"{text} ({seconds / 3600:.1f} h)" if text.endswith("days") else text


def learning_rate_note(plan):
    """The run's learning rate, and (a note, never applied) what square-root scaling would give at its batch."""
    line = f"learning rate: {plan['learning_rate']:.6g}"
    if abs(plan["scaled_learning_rate"] - plan["learning_rate"]) <= 1e-9:
        line += f" ({plan['learning_rate_rule']}: the same at batch {plan['global_batch']})"
    else:
        line += (f"; note: {plan['learning_rate_rule']} gives {plan['scaled_learning_rate']:.6g} at batch "
                 f"{plan['global_batch']} (not applied: pass --learning-rate {plan['scaled_learning_rate']:.6g} to "
                 "use it)")
    return line



