"""Prints `albert-tf COMMAND --help`, then whether TensorFlow got imported (tests/test_help.py).

usage: help_imports.py COMMAND
"""
import sys

from albert_tf import cli

try:
    cli.main([sys.argv[1], "--help"])
except SystemExit:
    pass
print("TENSORFLOW_IMPORTED", "tensorflow" in sys.modules)
