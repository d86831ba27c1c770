"""The compiled train loop on two CPU replicas (a fresh process: the CPU is split before TensorFlow initializes its
devices), each step's sums depending on the replica's examples and on the replica itself. Prints (JSON) the sums per
call, the input values, and the While loops and ops of the loop's body (tests/test_loop.py)."""
import json

import numpy as np
import tensorflow as tf

from albert_tf.training.loop import make_train_loop

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")],
                                          cross_device_ops=tf.distribute.ReductionToOneDevice())
values = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
batches = tf.data.Dataset.from_tensor_slices(values).batch(4)  # global batch 4: 2 examples per replica


def step(batch, scale):
    replica = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)
    return {"sum": scale * tf.reduce_sum(batch), "square": tf.reduce_sum(batch ** 2), "replica": replica,
            "count": tf.cast(tf.shape(batch)[0], tf.float32)}


loop = make_train_loop(strategy, step, ("sum", "square", "replica", "count"))
iterator = iter(strategy.experimental_distribute_dataset(batches))
calls = [{k: float(v) for k, v in loop(iterator, tf.constant(n), scale).items()}
         for n, scale in ((3, 2.0), (4, 1.0), (1, 1.0))]
concrete = loop.get_concrete_function(iterator, tf.constant(1), 1.0)
library = {f.signature.name: f for f in concrete.graph.as_graph_def().library.function}
bodies = [library[op.get_attr("body").name] for op in concrete.graph.get_operations()
          if op.type in ("While", "StatelessWhile")]
print(json.dumps({"calls": calls, "values": values.tolist(), "whiles": len(bodies),
                  "body_ops": sorted({node.op for body in bodies for node in body.node_def})}))
