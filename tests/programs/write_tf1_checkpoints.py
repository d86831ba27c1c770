"""Writes checkpoints the way the original TF1 code does: tf.compat.v1 variables in a graph + Saver.

usage: write_tf1_checkpoints.py NPZ::PREFIX::SLOTS::OUT ...  (helpers.write_tf1_checkpoints: one job an argument;
SLOTS 1 adds Adam's slots; the weights' "/" are "|" in the npz)
"""
import sys

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
for job in sys.argv[1:]:
    npz, prefix, slots, out = job.split("::")
    data = np.load(npz)
    with tf.Graph().as_default():
        for key in data.files:
            name = prefix + key.replace("|", "/")
            value = data[key]
            tf.compat.v1.get_variable(name, initializer=tf.constant(value), dtype=value.dtype)
            if slots == "1":
                tf.compat.v1.get_variable(name + "/adam_m", initializer=tf.zeros_like(value))
                tf.compat.v1.get_variable(name + "/adam_v", initializer=tf.zeros_like(value))
        tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, out, write_meta_graph=False, write_state=False)
