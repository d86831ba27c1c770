"""Runs `albert-tf pretrain` twice in this process: with the loop as it is, then with the compiled loop as it was
before the metric sums stayed on the devices (a reduction across replicas every step), the reference the on-device
sums must equal (tests/test_pretrain.py). A file, not a string: AutoGraph converts the loop from its source.

usage: per_step_reduction.py ON_DEVICE_ARGV_JSON PER_STEP_ARGV_JSON
"""
import json
import sys

import tensorflow as tf

from albert_tf import cli
from albert_tf.training import pretraining


def per_step_reduction_loop(strategy, step_fn, sum_keys, per_step=None):
    def loop(iterator, num_steps, *args):
        sums = {k: tf.zeros([per_step] if per_step else []) for k in sum_keys}
        for index in tf.range(num_steps):
            per_replica = strategy.run(step_fn, args=(next(iterator), *args))
            reduced = {k: strategy.reduce("sum", per_replica[k], axis=None) for k in sum_keys}
            if per_step:
                reduced = {k: tf.where(tf.range(per_step) == index, v, 0.0) for k, v in reduced.items()}
            sums = {k: sums[k] + reduced[k] for k in sum_keys}
        return sums
    return tf.function(loop)


on_device, per_step = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert cli.main(["pretrain"] + on_device) == 0
pretraining.make_train_loop = per_step_reduction_loop
assert cli.main(["pretrain"] + per_step) == 0
