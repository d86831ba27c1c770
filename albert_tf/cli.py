"""The `albert-tf` command line: one subcommand per job.

Each subcommand lives in the module that does the work; that module exposes
`add_arguments(parser)` and `run(args) -> int`. Modules are imported only when
their subcommand runs, so `albert-tf --help` is fast; where the job module
imports TensorFlow at its top, the flags live in a light module of their own
(FLAGS_MODULES) so that `albert-tf COMMAND --help` never imports TensorFlow.
"""
import argparse
import importlib
import sys

SUBCOMMANDS = {
    # name: (module, one-line help)
    "vocab": ("albert_tf.data.vocab", "train the SentencePiece vocabulary"),
    "create-data": ("albert_tf.data.create_pretraining_data", "turn raw text into pretraining TFRecords"),
    "pretrain": ("albert_tf.training.pretrain", "pretrain with LAMB (TPU, GPUs, multi-worker or CPU)"),
    "finetune": ("albert_tf.training.finetune", "fine-tune on GLUE, SQuAD or RACE with model.fit"),
    "convert": ("albert_tf.checkpoints.convert", "import a released TF1 / TF-Hub / Hugging Face checkpoint"),
    "plan": ("albert_tf.training.plan", "parameters, per-core memory, FLOPs and time of a pretraining run (no TF)"),
    "export": ("albert_tf.serving.encoder", "write a SavedModel for TF Serving that takes raw text"),
    "quickstart": ("albert_tf.quickstart", "run vocab → create-data → pretrain → finetune → a served request on a built-in corpus"),
}

# Commands whose job module imports TensorFlow at its top: their flags come from a module that does not.
FLAGS_MODULES = {
    "pretrain": "albert_tf.training.pretrain_flags",
    "convert": "albert_tf.checkpoints.convert_flags",
}


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
    return parser


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        return args._run(args) or 0
    except (ValueError, FileNotFoundError) as e:  # user errors: one clear line, no traceback
        print(f"albert-tf {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
