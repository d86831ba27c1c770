"""Runs `albert-tf ARGV` for each ARGV of a JSON list, in this one fresh process, each with its stderr captured;
prints (JSON) per run its exit code, its stderr and whether TensorFlow was imported by its end (tests/test_cli.py:
bad input is answered before TensorFlow's import). A run that imported it leaves it imported for the later ones.

usage: bad_input_imports.py '[["vocab", "--input", ...], ...]'
"""
import contextlib
import io
import json
import sys

from albert_tf.cli import main

runs = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(argv)
    runs.append({"rc": rc, "stderr": err.getvalue(), "tensorflow": "tensorflow" in sys.modules})
print(json.dumps(runs))
