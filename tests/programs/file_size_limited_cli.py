"""Runs `albert-tf ARGV` with every file this process writes limited to LIMIT bytes (RLIMIT_FSIZE, the first
argument): a write past it fails with EFBIG, as a write fails on a full disk. SIGXFSZ is ignored, so the write
returns the error instead of the signal ending the process.

    python tests/programs/file_size_limited_cli.py LIMIT COMMAND ARG...
"""
import resource
import signal
import sys

from albert_tf import cli

limit = int(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
sys.exit(cli.main(sys.argv[2:]))
