"""A process that sits in StopSignal, its main thread in a sleep; it prints "ready" once inside, and "requested"
when a signal is taken as a stop request (tests/test_loop.py). albert_tf.runtime.signals imports no TensorFlow.

usage: stop_signal_waiter.py [AT_ONCE]   (StopSignal's at_once: what a stop before anything is trained says)
"""
import sys
import time

from albert_tf.runtime.signals import StopSignal

assert "tensorflow" not in sys.modules, "albert_tf.runtime.signals imported TensorFlow"
at_once = sys.argv[1] if len(sys.argv) > 1 else ""
with StopSignal("prog", at_once=at_once or None, on_request=lambda s: print("requested", flush=True)) as stop:
    print("ready", flush=True)
    time.sleep(60)
print("not reached", flush=True)
