"""The `albert-tf` command line, made from the jobs' registry (albert_tf/jobs/__init__.py): one subcommand per job,
one flag per field of its config (albert_tf/run_config.py). Only the chosen command's job module is imported, and
job modules import no TensorFlow at their top, so `albert-tf COMMAND --help` is fast.

Exit codes (albert_tf/runtime/exit_codes.py, one meaning each): 0 done, 1 an unexpected error, 2 bad flags or data,
3 non-finite loss, 4 keep-alive stopped on purpose (its last lines say why), 69 a bucket not reachable, 74 an output
not writable (disk full), 75 stopped on a signal after saving, 76 the runtime or a peer (a worker) went away, 77 the
output is locked by another run, 78 access refused (a path not writable, a read-only filesystem, a bucket's
credentials), 130 Ctrl-C, 143 SIGTERM with nothing kept. Each ends with one line on stderr; a traceback only with
--verbose. Flags and the input files a job's `preflight` checks are refused before TensorFlow is imported.
"""
import argparse
import os
import re
import sys
import tempfile

from albert_tf import __version__, run_config
from albert_tf.jobs import BY_NAME, JOBS
from albert_tf import messages
from albert_tf.runtime import exit_codes, faults

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


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, `PROG: error: MESSAGE` (no usage dump: `--help` shows it), exit
    2; an unrecognized flag names the closest valid one ("did you mean --vocab-size?"), also when argparse stops
    first at a required flag that is missing (a misspelled required flag: "unknown --toplogy: did you mean
    --topology? (the following arguments are required: --topology)"). The top-level parser hands an unrecognized
    flag to the chosen command's parser (`chosen`), so that the line names the command."""

    chosen = None
    words = ()  # the words this parser was last given (parse_known_args): where a missing flag's misspelling is

    def parse_known_args(self, args=None, namespace=None):
        self.words = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message):
        if message.startswith("unrecognized arguments") and self.chosen is not None and self.chosen is not self:
            self.chosen.error(message)
        if message.startswith(("the following arguments are required", "one of the arguments")):
            unknown = self._unknown_flags()
            if unknown:
                message = f"unknown {unknown[0]}{self._suggestion(unknown)} ({message})"
                self.exit(exit_codes.BAD_INPUT, f"{self.prog}: error: {message}\n")
        elif message.startswith("unrecognized arguments"):
            message += self._suggestion(message.split(":", 1)[1].split())
        self.exit(exit_codes.BAD_INPUT, f"{self.prog}: error: {message}\n")

    def _flags(self):
        """This parser's --long flags (deprecated spellings included)."""
        return [f for action in self._actions for f in action.option_strings if f.startswith("--")]

    def _unknown_flags(self):
        """The --words given (before a `--`) that are none of this parser's flags nor a prefix of one (argparse
        takes an unambiguous prefix), without their =VALUE."""
        flags = self._flags()
        given = self.words[:self.words.index("--")] if "--" in self.words else self.words
        names = [word.split("=", 1)[0] for word in given if word.startswith("--") and word != "--"]
        return [name for name in names if not any(flag.startswith(name) for flag in flags)]

    def _suggestion(self, words):
        """"; did you mean --x?" for the first of the flags `words` close to one of this parser's, else ""."""
        return run_config.did_you_mean(words, self._flags())


def _run_job(job):
    """The CLI's run of `job`: its config from the parsed flags, its `preflight(config)` (the checks of its inputs
    that need no TensorFlow: bad input is answered before TensorFlow's import, which takes seconds), TensorFlow
    imported quietly, then its `cli(config)` (the exit code) or its Python call's result's exit code."""
    def run(args):
        module = job.load()
        from_args = getattr(module, "config_from_args", None)
        config = from_args(args) if from_args else run_config.config_from_args(job.config_class(), args)
        if hasattr(module, "preflight"):
            module.preflight(config)
        quiet_tensorflow(job.name, args.verbose)
        if hasattr(module, "cli"):
            return module.cli(config)
        return getattr(module, job.function)(config).exit_code
    return run


def add_job_arguments(parser, job):
    """`job`'s flags: one per field of its config, then its extra arguments (e.g. --recipe)."""
    module = job.load()
    run_config.add_fields_as_arguments(parser, job.config_class())
    if hasattr(module, "add_extra_arguments"):
        module.add_extra_arguments(parser)


def build_parser(argv=None):
    """The parser of `albert-tf ARGV`: every command listed, only the chosen one's flags built."""
    parser = ArgumentParser(prog="albert-tf", description="ALBERT with Keras 3 and TensorFlow.")
    parser.add_argument("--version", action="version", version=f"albert-tf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    # Only the chosen subcommand's module is imported.
    chosen = next((a for a in (argv or []) if not a.startswith("-")), None)
    for job in JOBS:
        # every option's default shows in --help
        p = sub.add_parser(job.name, help=job.help, description=job.help, formatter_class=HelpFormatter)
        if job.name == chosen:
            parser.chosen = p
            add_job_arguments(p, job)
            p.set_defaults(_run=_run_job(job))
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
    if BY_NAME[command].tensorflow and "tensorflow" not in sys.modules:
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


EXIT_FILE = "ALBERT_TF_EXIT_FILE"  # set by on_worker.sh: the code is written there before Python's teardown


def main(argv=None):
    """`albert-tf ARGV` (default sys.argv[1:]); returns the exit code (albert_tf/runtime/exit_codes.py). Run as the
    program (no `argv`), a lost runtime (exit 76) ends the process at once (exit_at_once), and the code is written
    to $ALBERT_TF_EXIT_FILE when set, before Python's teardown: on_worker.sh bounds a teardown that hangs."""
    code = _main(argv)
    if argv is None and os.environ.get(EXIT_FILE):
        with open(os.environ[EXIT_FILE], "w", encoding="utf-8") as f:
            f.write(f"{code}\n")
    return code


def _main(argv):
    as_program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        with messages.command(args.command):  # library warnings and notes name the command
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
        if as_program:  # its clean-up has run: no second of TensorFlow's teardown after a Ctrl-C
            exit_at_once(exit_codes.INTERRUPTED)
        return exit_codes.INTERRUPTED
    except Exception as e:  # pylint: disable=broad-except  # a fault (disk full, a bucket): its code; else exit 1
        fault = faults.classify(e)
        if args.verbose:
            raise
        line = str(fault) if fault is not None else faults.unexpected_line(e)
        print(f"albert-tf {args.command}: error: {line}", file=sys.stderr, flush=True)
        return fault.exit_code if fault is not None else exit_codes.UNEXPECTED


if __name__ == "__main__":
    sys.exit(main())
