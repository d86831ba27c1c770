"""`albert-tf create-data`: raw text → pretraining TFRecords (SOP pairs, n-gram whole-word masking), streaming,
multi-process and deterministic (the work: albert_tf/data/create_pretraining_data.py; on Apache Beam:
albert_tf.data.beam).

    result = albert_tf.create_data(albert_tf.CreateDataConfig(input="corpus/*.txt", spm_model="work/spm.model",
                                                             output="work/data/train", num_shards=4))
    result.output_files, result.instances
"""
import argparse
import dataclasses
import sys

from albert_tf import run_config
from albert_tf.data import create_pretraining_data as creation
from albert_tf.data.instances import InstanceOptions
from albert_tf.run_config import option
from albert_tf.runtime import exit_codes
from albert_tf.text import vocabulary


@dataclasses.dataclass
class CreateDataConfig:  # pylint: disable=too-many-instance-attributes
    """Every setting of `albert-tf create-data` (see each field's help; `--help` shows the same)."""
    input: str = option(help="comma-separated globs of text files (one sentence per line, a blank line between "
                             "documents)")
    spm_model: str = option(help="SentencePiece model from `albert-tf vocab`")
    output: str = option(help="output prefix: PREFIX-00000-of-0000N.tfrecord ... (a file-name prefix such as "
                              "data/train, not a directory)")
    overwrite: bool = option(False, "remove the shards an earlier run wrote to this prefix that this run does not "
                                    "replace (another --num-shards); without it they are refused")
    num_shards: int = option(1, "output files")
    max_seq_length: int = option(512, "tokens per sequence")
    max_predictions: int = option(20, "masked LM predictions per sequence")
    masked_lm_prob: float = option(0.15, "fraction of the tokens masked")
    ngram: int = option(3, "longest masked n-gram (in whole words)")
    dupe_factor: int = option(1, "passes over the corpus, each with new chunking and masks")
    short_seq_prob: float = option(0.1, "probability of a shorter target length for a sequence")
    seed: int = option(12345, "seeds chunking, pairing and masking")
    workers: int = option(1, "processes (the output does not depend on it)")
    no_mask: bool = option(False, "write unmasked records (for dynamic masking)")
    cased: bool | None = vocabulary.cased_option()
    beam: bool = option(False, "run on Apache Beam (pip install albert_tf[beam]); the words after -- are Beam's "
                               "pipeline options (--runner DataflowRunner --project P --region R --temp_location "
                               "gs://b/tmp ...; default DirectRunner); --workers is then the runner's")
    beam_options: list = option(default_factory=list, flag="--beam-option", metavar="OPTION",
                                help="one Beam pipeline option (repeatable; the words after -- add to them)")

    def __post_init__(self):
        run_config.check_fields(self)

    def instance_options(self):
        """The InstanceOptions these settings make."""
        return InstanceOptions(max_seq_length=self.max_seq_length, max_predictions=self.max_predictions,
                               masked_lm_prob=self.masked_lm_prob, ngram=self.ngram, dupe_factor=self.dupe_factor,
                               short_seq_prob=self.short_seq_prob, seed=self.seed, mask=not self.no_mask)


@dataclasses.dataclass
class CreateDataResult:
    """What `albert_tf.create_data` returns: the shards written, the instances and tokens in them, the counts
    (`stats`: documents, skipped_documents, masked, swapped, ...: instances.BlockStats as a dict), the bytes of
    invalid UTF-8 replaced per file, the wall seconds, and the CLI's exit code."""
    output_files: list
    instances: int = 0
    tokens: int = 0
    stats: dict = dataclasses.field(default_factory=dict)
    replaced_bytes: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    exit_code: int = 0


def create_data(config):
    """Writes the pretraining records `config` (a CreateDataConfig) describes; prints progress and notes on
    stderr, the summary on stdout. Returns a CreateDataResult. Nothing is in place until every shard is complete:
    an interrupted run leaves no shard (and its temporary files are removed)."""
    # the vocabulary's record decides casing and accents; a flag that contradicts it is refused (text.record)
    lower_case = vocabulary.resolve_lower_case(vocabulary.read_casing(config.spm_model), config.cased,
                                               vocabulary.casing_path(config.spm_model))
    if config.beam_options and not config.beam:
        raise ValueError(f"Beam pipeline options ({' '.join(config.beam_options)}) go with --beam")
    if config.beam:
        summary = _run_on_beam(config, lower_case)
    else:
        summary = creation.create_pretraining_data(
            config.input, config.spm_model, config.output, num_shards=config.num_shards,
            options=config.instance_options(), workers=config.workers, lower_case=lower_case,
            overwrite=config.overwrite)
    stats = dataclasses.asdict(summary.stats)
    return CreateDataResult(list(summary.output_files), stats.get("instances", 0), stats.get("tokens", 0), stats,
                            dict(summary.replaced_by_file), summary.seconds)


def _run_on_beam(config, lower_case):
    """The records on Apache Beam (albert_tf.data.beam, an optional dependency), with config.beam_options."""
    try:
        from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=import-outside-toplevel

        from albert_tf.data import beam  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ValueError(f"--beam needs Apache Beam: pip install 'albert_tf[beam]' ({e})") from None
    return beam.run_pipeline(config.input, config.spm_model, config.output, num_shards=config.num_shards,
                             options=config.instance_options(), lower_case=lower_case,
                             pipeline_options=PipelineOptions(config.beam_options), overwrite=config.overwrite)


def add_extra_arguments(parser):
    """The words after `--`: Beam's pipeline options (CreateDataConfig.beam_options)."""
    parser.add_argument("beam_words", nargs="*", metavar="-- BEAM OPTIONS", default=argparse.SUPPRESS,
                        help="with --beam: the Beam pipeline's options, after --")


def config_from_args(args):
    """The CreateDataConfig of parsed flags: --beam-option words, then the words after --."""
    typed = run_config.given(CreateDataConfig, args)
    words = getattr(args, "beam_words", [])
    if words:
        typed["beam_options"] = [*typed.get("beam_options", []), *words]
    return CreateDataConfig(**typed)


def cli(config):
    """`albert-tf create-data`. Ctrl-C or SIGTERM: the workers stop, the temp files are removed, one line on
    stderr, exit 130 after SIGINT, 143 after SIGTERM (nothing is written: the shards are renamed into place only
    once all of them are complete)."""
    try:
        with creation.sigterm_interrupts():
            return create_data(config).exit_code
    except KeyboardInterrupt as e:
        terminated = isinstance(e, creation.Terminated)
        print(f"albert-tf create-data: {'SIGTERM' if terminated else 'interrupted'}: no shard written, the "
              "temporary files removed", file=sys.stderr, flush=True)
        return exit_codes.TERMINATED if terminated else exit_codes.INTERRUPTED


__all__ = ["CreateDataConfig", "CreateDataResult", "create_data"]
