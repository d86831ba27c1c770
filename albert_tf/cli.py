"""The `albert-tf` command line: one subcommand per job.

Each subcommand lives in the module that does the work; that module exposes
`add_arguments(parser)` and `run(args) -> int`. Modules are imported only when
their subcommand runs, so `albert-tf --help` is fast.
"""
import argparse
import contextlib
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
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        if name == chosen:
            module = importlib.import_module(module_name)
            module.add_arguments(p)
            p.set_defaults(_run=module.run, _lock=getattr(module, "OUTPUT_LOCK", None))
    return parser


def output_lock(args):
    """The lock of the command's output directory (albert_tf.lock) when its module names one in OUTPUT_LOCK
    (attribute, flag), e.g. ("model_dir", "--model-dir"); a no-op context otherwise."""
    if not getattr(args, "_lock", None):
        return contextlib.nullcontext()
    attribute, flag = args._lock
    directory = getattr(args, attribute, None)
    from albert_tf import lock  # pylint: disable=import-outside-toplevel

    if not directory or not lock.is_chief_from_env():
        return contextlib.nullcontext()
    return lock.DirectoryLock(directory, flag)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        with output_lock(args):
            return args._run(args) or 0
    except (ValueError, FileNotFoundError) as e:  # user errors: one clear line, no traceback
        print(f"albert-tf {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
