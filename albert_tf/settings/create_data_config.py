"""`albert-tf create-data`'s settings and result: `CreateDataConfig`, `CreateDataResult` (the call:
albert_tf/jobs/create_data.py; the work: albert_tf/data/create_pretraining_data.py). No TensorFlow."""
import dataclasses

from albert_tf import run_config
from albert_tf.run_config import option
from albert_tf.settings.casing import cased_option
from albert_tf.settings.defaults import MASKED_LM_PROB, NGRAM, PAPER, SEED

# The instance settings' ranges, by field: (within the range, what it must be). create-data's config checks them
# when it is made, naming the flag; the library's InstanceOptions.validate names the field.
INSTANCE_RANGES = {
    "max_seq_length": (lambda v: v >= 5, "must be at least 5 ([CLS] a [SEP] b [SEP])"),
    "max_predictions": (lambda v: v >= 1, "must be at least 1"),
    "masked_lm_prob": (lambda v: 0.0 <= v <= 1.0, "must be in [0, 1]"),
    "ngram": (lambda v: v >= 1, "must be at least 1"),
    "dupe_factor": (lambda v: v >= 1, "must be at least 1"),
    "short_seq_prob": (lambda v: 0.0 <= v <= 1.0, "must be in [0, 1]"),
    "seed": (lambda v: v >= 0, "must be non-negative"),
}


def instance_range_problem(values, name=lambda field: field):
    """(field, "NAME must be ...") of the first of INSTANCE_RANGES that `values` (an object with those attributes)
    breaks, NAME being `name(field)`; None when all hold."""
    for field, (ok, must) in INSTANCE_RANGES.items():
        if not ok(getattr(values, field)):
            return field, f"{name(field)} {must}"
    return None


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
    max_seq_length: int = option(PAPER["max_seq_length"], "tokens per sequence")
    max_predictions: int = option(PAPER["max_predictions"], "masked LM predictions per sequence")
    masked_lm_prob: float = option(MASKED_LM_PROB, "fraction of the tokens masked")
    ngram: int = option(NGRAM, "longest masked n-gram (in whole words)")
    dupe_factor: int = option(1, "passes over the corpus, each with new chunking and masks")
    short_seq_prob: float = option(0.1, "probability of a shorter target length for a sequence")
    seed: int = option(SEED, "seeds chunking, pairing and masking")
    workers: int = option(1, "processes (the output does not depend on it)")
    no_mask: bool = option(False, "write unmasked records (for dynamic masking)")
    max_skipped_share: float = option(
        0.05, "stop (exit 2, no shard written) once the documents skipped for having fewer than 2 sentences (a "
              "line is a sentence, a blank line ends a document) hold more than this share of the input's bytes; "
              "1: never stop. The summary names every file that made no instance, with its size")
    cased: bool | None = cased_option()
    beam: bool = option(False, "run on Apache Beam (pip install albert_tf[beam]); the words after -- are Beam's "
                               "pipeline options (--runner DataflowRunner --project P --region R --temp_location "
                               "gs://b/tmp ...; default DirectRunner); --workers is then the runner's")
    beam_options: list = option(default_factory=list, flag="--beam-option", metavar="OPTION",
                                help="one Beam pipeline option (repeatable; the words after -- add to them)")

    def __post_init__(self):
        run_config.check_fields(self, CreateDataConfig.check)

    def check(self):
        """The ranges and combinations that need no file: the instance settings (INSTANCE_RANGES), --num-shards
        and --workers at least 1, --max-skipped-share in [0, 1], Beam options only with --beam."""
        problem = instance_range_problem(self, lambda field: run_config.flag_for(self, field))
        if problem:
            raise ValueError(f"{problem[1]}, got {getattr(self, problem[0])}")
        run_config.check_minimum(self, ("num_shards", "workers"), 1, "at least 1")
        run_config.check_range(self, ("max_skipped_share",), lambda value: 0 <= value <= 1, "in [0, 1]")
        if self.beam_options and not self.beam:
            raise ValueError(f"Beam pipeline options ({' '.join(self.beam_options)}) go with --beam")


@dataclasses.dataclass
class CreateDataResult:
    """What `albert_tf.create_data` returns: the shards written, the instances and tokens in them, the counts
    (`stats`: documents, skipped_documents, masked, swapped, ...: instances.BlockStats as a dict), the bytes of
    invalid UTF-8 replaced per file, the wall seconds, the CLI's exit code, and the input files that made no
    instance, [(path, bytes)]."""
    output_files: list
    instances: int = 0
    tokens: int = 0
    stats: dict = dataclasses.field(default_factory=dict)
    replaced_bytes: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    exit_code: int = 0
    skipped_files: list = dataclasses.field(default_factory=list)


__all__ = ["CreateDataConfig", "CreateDataResult", "INSTANCE_RANGES", "instance_range_problem"]
