"""The batch plan of a pretraining run: how the global batch splits over replicas, accumulation steps and streams.
Decided once, by `plan_batches`, where the strategy (its replicas) and the device are known, and passed on to all
that reads it: the dtype probe, the host-memory check, the cost line, the model's streams, the train step and the
throughput of the metrics rows. No TensorFlow.

    global batch (--batch-size) = replicas x per-replica batch
    per-replica batch           = --gradient-accumulation-steps x micro-batch
    micro-batch                 = streams x the slice each encoder stream runs
"""
import dataclasses

from albert_tf import run_config
from albert_tf.settings.pretrain_config import PretrainConfig


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """One run's batch geometry (`plan_batches` makes it; every division is exact).

    global_batch: examples per step (--batch-size); replicas: the strategy's replicas in sync; accumulation_steps:
    micro-batches per replica whose gradients are summed before one update; streams: slices of each micro-batch
    that run through the encoder concurrently; eval_global_batch: examples per evaluation step."""
    global_batch: int
    replicas: int
    accumulation_steps: int
    streams: int
    eval_global_batch: int

    @property
    def per_replica(self):
        """Examples per replica per step."""
        return self.global_batch // self.replicas

    @property
    def micro_batch(self):
        """Examples per replica per accumulation step."""
        return self.per_replica // self.accumulation_steps


def default_streams(config: PretrainConfig, accelerator):
    """--streams' default: 2 on CPU, 1 on an accelerator (`accelerator`: a TPU or GPU runs the step) and with
    --remat (with two, TensorFlow's graph optimizer, Grappler, keeps most of what remat frees:
    benchmarks/plan_memory.py, docs/benchmarks.md)."""
    return 1 if accelerator or config.remat else 2


def plan_batches(config: PretrainConfig, replicas, accelerator):
    """The BatchPlan of `config` on `replicas` replicas (`accelerator`: TPU or GPU). Refuses, with one line naming
    the flag, a global or eval batch the replicas do not divide, accumulation steps that do not divide the
    per-replica batch, and a --streams that does not divide the micro-batch (its default falls back to 1 there)."""
    eval_batch = config.eval_batch_size or config.batch_size
    for name, size in (("batch_size", config.batch_size), ("eval_batch_size", eval_batch)):
        if size % replicas:
            raise ValueError(f"{run_config.flag_for(config, name)} {size} is not divisible by the {replicas} replicas")
    steps = config.gradient_accumulation_steps
    per_replica = config.batch_size // replicas
    if per_replica % steps:
        raise ValueError(f"--gradient-accumulation-steps {steps} does not divide the per-replica batch {per_replica} "
                         f"(--batch-size {config.batch_size} / {replicas} replicas)")
    micro_batch = per_replica // steps
    streams = config.streams or default_streams(config, accelerator)
    if micro_batch % streams:
        if config.streams:
            accumulating = steps > 1
            raise ValueError(f"--streams {streams} does not divide the per-replica {'micro-' if accumulating else ''}"
                             f"batch {micro_batch} (--batch-size / replicas"
                             f"{' / --gradient-accumulation-steps' if accumulating else ''})")
        streams = 1
    return BatchPlan(global_batch=config.batch_size, replicas=replicas, accumulation_steps=steps, streams=streams,
                     eval_global_batch=eval_batch)


__all__ = ["BatchPlan", "plan_batches", "default_streams"]
