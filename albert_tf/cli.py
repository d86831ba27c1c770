"""The `albert-tf` command line: one subcommand per job.

Each subcommand lives in the module that does the work; that module exposes
`add_arguments(parser)` and `run(args) -> int`. Modules are imported only when
their subcommand runs, so `albert-tf --help` is fast; where the job module
imports TensorFlow at its top, the flags live in a light module of their own
(FLAGS_MODULES) so that `albert-tf COMMAND --help` never imports TensorFlow.

Exit codes (albert_tf/runtime/exit_codes.py, one meaning each): 0 done, 2 bad flags or data, 3 non-finite loss,
75 stopped on a signal after saving, 76 the runtime or a peer went away, 77 the output is locked by another run,
130 Ctrl-C.
"""
import argparse
import importlib
import os
import re
import sys
import tempfile

from albert_tf.runtime import exit_codes

SUBCOMMANDS = {
    # name: (module, one-line help)
    "vocab": ("albert_tf.data.vocab", "train the SentencePiece vocabulary"),
    "create-data": ("albert_tf.data.create_pretraining_data", "turn raw text into pretraining TFRecords"),
    "pretrain": ("albert_tf.training.pretrain", "pretrain with LAMB (TPU, GPUs, multi-worker or CPU)"),
    "finetune": ("albert_tf.training.finetune", "fine-tune on GLUE, SQuAD or RACE with model.fit"),
    "convert": ("albert_tf.checkpoints.convert", "import a released TF1 / TF-Hub / Hugging Face checkpoint"),
    "plan": ("albert_tf.training.plan", "parameters, per-core memory, FLOPs and time of a pretraining run (no TF)"),
    "export": ("albert_tf.serving.export", "write a SavedModel for TF Serving that takes raw text"),
    "keep-alive": ("albert_tf.jobs.keep_alive", "keep a pretraining run going on a Cloud TPU slice through preemptions "
                   "(gcloud; no TF)"),
    "quickstart": ("albert_tf.quickstart", "run vocab → create-data → pretrain → finetune → a served request on a built-in corpus"),
}

# Commands whose job module imports TensorFlow at its top: their flags come from a module that does not.
FLAGS_MODULES = {
    "pretrain": "albert_tf.training.pretrain_config",
    "finetune": "albert_tf.training.finetune_config",
    "convert": "albert_tf.checkpoints.convert_flags",
}

# Commands that never use TensorFlow: no quiet pre-import for them (it costs seconds).
NO_TENSORFLOW = frozenset({"plan", "keep-alive"})

# TensorFlow's start-up notices on stderr: absl's pre-InitializeLog lines (TF_CPP_MIN_LOG_LEVEL does not reach them)
# and the CUDA probe on a machine without a GPU. Shown with --verbose.
_STARTUP_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog|[IW]\d{4} |E\d{4} .*cuInit|"
                            r"To enable the following instructions)")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default once: appended as "(default: X)" unless the help text already says what the
    default is, and not for required options (they have none)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.required or "default" in text.lower():
            return text
        return super()._get_help_string(action)


def _run_job(module_name):
    """The `run(args)` of a job module, imported when the command runs (not for `--help`)."""
    def run(args):
        return importlib.import_module(module_name).run(args)
    return run


def build_parser(argv=None):
    from albert_tf import __version__  # pylint: disable=import-outside-toplevel

    parser = argparse.ArgumentParser(prog="albert-tf", description="ALBERT with Keras 3 and TensorFlow.")
    parser.add_argument("--version", action="version", version=f"albert-tf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    # Only the chosen subcommand's module is imported.
    chosen = next((a for a in (argv or []) if not a.startswith("-")), None)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        # every option's default shows in --help
        p = sub.add_parser(name, help=help_text, description=help_text,
                           formatter_class=HelpFormatter)
        if name == chosen:
            importlib.import_module(FLAGS_MODULES.get(name, module_name)).add_arguments(p)
            p.set_defaults(_run=_run_job(module_name))
            p.add_argument("--verbose", action="store_true", help="show TensorFlow's own start-up and log lines")
    return parser


def _import_tensorflow_quietly():
    """Imports TensorFlow with file descriptor 2 sent to a temporary file, then writes back to stderr every line of
    it except TensorFlow's start-up notices (_STARTUP_NOISE): C++ code logs there, past Python's sys.stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # pylint: disable=import-outside-toplevel,unused-import
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            lines = captured.read().decode("utf-8", errors="replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not _STARTUP_NOISE.match(line)))


def quiet_tensorflow(command, verbose):
    """Unless `verbose`: TensorFlow's C++ log level 3 (errors reach the user as Python exceptions; a level of the
    user's own in TF_CPP_MIN_LOG_LEVEL is kept) and, for a command that uses TensorFlow, its first import with the
    start-up notices dropped. The CLI's own setting: `import albert_tf` changes no log level."""
    if verbose:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if command not in NO_TENSORFLOW and "tensorflow" not in sys.modules:
        try:
            _import_tensorflow_quietly()
        except ImportError:
            pass  # the job's own `import tensorflow` says what to install (albert_tf/runtime/requirements.py)


def exit_at_once(code):
    """Ends the process with `code` now, without Python's teardown: once the TPU runtime or a peer worker is gone,
    TensorFlow's destructors (input iterators, the collectives' and the coordination service's state) wait on what
    is gone: up to 40 s in the CPU rehearsal (docs/tpu_runtime.md, "What a failure costs")."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # pylint: disable=protected-access


def main(argv=None):
    """`albert-tf ARGV` (default sys.argv[1:]); returns the exit code (albert_tf/runtime/exit_codes.py). Run as the
    program (no `argv`), a lost runtime (exit 76) ends the process at once (exit_at_once)."""
    as_program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        quiet_tensorflow(args.command, args.verbose)
        return args._run(args) or exit_codes.DONE
    except exit_codes.ExitError as e:  # a lock held by another run (77), the runtime gone (76): one line, its code
        print(f"albert-tf {args.command}: error: {e}", file=sys.stderr, flush=True)
        if as_program and e.exit_code == exit_codes.RUNTIME_LOST:
            exit_at_once(e.exit_code)
        return e.exit_code
    except (ValueError, FileNotFoundError) as e:  # user errors: one clear line, no traceback
        print(f"albert-tf {args.command}: error: {e}", file=sys.stderr, flush=True)
        return exit_codes.BAD_INPUT
    except KeyboardInterrupt:  # Ctrl-C where a command has no handling of its own: one line, the shell's code
        print(f"albert-tf {args.command}: interrupted", file=sys.stderr, flush=True)
        return exit_codes.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
