"""One worker of a 2-worker MultiWorkerMirroredStrategy on loopback ports, printing (JSON) what
albert_tf.training.pretraining.agree decides for its proposal and for one more call.

usage: agree_worker.py PORTS_JSON INDEX PROPOSAL_JSON   (PROPOSAL: [num_steps, save_now, stop_now])
"""
import json
import os
import sys

ports, index, proposal = json.loads(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                                      "task": {"type": "worker", "index": index}})
import tensorflow as tf  # noqa: E402  (TF_CONFIG first)

from albert_tf.training.pretraining import agree  # noqa: E402

strategy = tf.distribute.MultiWorkerMirroredStrategy()
print(json.dumps([agree(strategy, *proposal), agree(strategy, proposal[0] + 1, False, False)]))
