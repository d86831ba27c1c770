"""Runs `albert-tf ARGV` in this fresh process with its stdout captured; prints (JSON) its exit code, its stdout
and the heavy modules (TensorFlow, Keras, numpy) it imported (tests/test_plan.py: plan imports none).

usage: cli_imports.py ARGV
"""
import contextlib
import io
import json
import sys

from albert_tf.cli import main

out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(sys.argv[1:])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras", "numpy"))
print(json.dumps({"rc": rc, "heavy": heavy, "stdout": out.getvalue()}))
