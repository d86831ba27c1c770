"""saved_model_cli with TF Text's ops registered (its console script imports no op library: "Op type not registered
'SentencepieceOp'"; TF Serving links them into its binary). The command docs/serving.md gives.

usage: saved_model_cli.py ARGS   (saved_model_cli's)
"""
import sys

import tensorflow_text  # noqa: F401  # pylint: disable=unused-import
from tensorflow.python.tools.saved_model_cli import main

sys.exit(main())
