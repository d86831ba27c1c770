"""The jobs: one module per `albert-tf` command, each a typed Python call first and a command line second.

The job modules, one per command (the command's spelling has - for _):

    vocab, create_data, pretrain, finetune, convert, plan, export, keep_alive, quickstart

A job module `albert_tf/jobs/NAME.py` holds

    name(config)         the Python call: `albert_tf.name(NameConfig(...)) -> NameResult`; bad input raises
                         ValueError / FileNotFoundError with one line, before anything is written

and takes its settings and result from the layer below the work (albert_tf/settings/, which training/, data/, tasks/
and cloud/ read too):

    NameConfig           a dataclass whose fields are made with `albert_tf.run_config.option(...)`: each field is
                         one flag of the command (`--help` is generated from them), checked on construction
    NameResult           a dataclass of what the run gives back; `exit_code` is the CLI's (runtime.exit_codes)

and, where its work imports TensorFlow, `preflight(config)`: the checks of its inputs that need none (the input
files that must exist, an output path that is a file, the model config; local paths only, gs:// needs TensorFlow's
file system), each the line the work's own check would give, run by the CLI before it imports TensorFlow (seconds:
`albert-tf vocab --input missing.txt` answers at once) and by the call first;

and, where the command line differs from the Python call, `add_extra_arguments(parser)` (flags that are not
settings, such as `--recipe`: where settings come from), `config_from_args(args)` and `cli(config) -> int`. A job
module imports no TensorFlow at its top: `albert-tf COMMAND --help` builds its flags from the config alone; the
work is imported when the call runs.

`JOBS` is the one registry: the CLI (albert_tf/cli.py) and the package's public names (albert_tf/__init__.py) are
made from it.
"""
import dataclasses
import importlib

SETTINGS = "albert_tf.settings"  # where every job's config and result class lives


@dataclasses.dataclass(frozen=True)
class Job:
    """One command. `name`: its spelling on the command line; `module`: the job module; `function`, `config`,
    `result`: the public names the module defines; `help`: one line; `tensorflow`: whether running it imports
    TensorFlow (the CLI then imports it first, with TensorFlow's start-up notices hidden)."""
    name: str
    function: str
    config: str
    result: str
    help: str
    tensorflow: bool = True

    @property
    def module(self):
        """The job module's import path: albert_tf.jobs.FUNCTION."""
        return f"albert_tf.jobs.{self.function}"

    def load(self):
        """The job module (imported now: its top imports no TensorFlow)."""
        return importlib.import_module(self.module)

    def config_class(self):
        """The job's config class (albert_tf.settings)."""
        return getattr(importlib.import_module(SETTINGS), self.config)


JOBS = (
    Job("vocab", "vocab", "VocabConfig", "VocabResult", "train the SentencePiece vocabulary"),
    Job("create-data", "create_data", "CreateDataConfig", "CreateDataResult",
        "turn raw text into pretraining TFRecords"),
    Job("pretrain", "pretrain", "PretrainConfig", "PretrainResult",
        "pretrain with LAMB (TPU, GPUs, multi-worker or CPU)"),
    Job("finetune", "finetune", "FinetuneConfig", "FinetuneResult",
        "fine-tune on GLUE, SQuAD or RACE with model.fit"),
    Job("convert", "convert", "ConvertConfig", "ConvertResult",
        "import a released TF1 / TF-Hub / Hugging Face checkpoint; --to: write one for transformers or keras-hub"),
    Job("plan", "plan", "PlanConfig", "PlanResult",
        "parameters, per-core memory, FLOPs and time of a pretraining run (no TF)", tensorflow=False),
    Job("export", "export", "ExportConfig", "ExportResult", "write a SavedModel for TF Serving that takes raw text"),
    Job("keep-alive", "keep_alive", "KeepAliveConfig", "KeepAliveResult",
        "keep a pretraining run going on a Cloud TPU slice through preemptions (gcloud; no TF)", tensorflow=False),
    Job("quickstart", "quickstart", "QuickstartConfig", "QuickstartResult",
        "run vocab → create-data → pretrain → finetune → a served request on a built-in corpus"),
)

BY_NAME = {job.name: job for job in JOBS}


def public_names():
    """{public name: module} of every job's call (its job module), config and result (albert_tf.settings):
    albert_tf/__init__.py's lazy names."""
    return {**{job.function: job.module for job in JOBS},
            **{name: SETTINGS for job in JOBS for name in (job.config, job.result)}}


__all__ = ["Job", "JOBS", "BY_NAME", "public_names"]
