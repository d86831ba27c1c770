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

from albert_tf import files, run_config
from albert_tf.data import create_pretraining_data as creation
from albert_tf.data.instances import InstanceOptions
from albert_tf.runtime import exit_codes
from albert_tf.settings.create_data_config import CreateDataConfig, CreateDataResult
from albert_tf.text import vocabulary


def instance_options(config):
    """The InstanceOptions a CreateDataConfig makes."""
    return InstanceOptions(max_seq_length=config.max_seq_length, max_predictions=config.max_predictions,
                           masked_lm_prob=config.masked_lm_prob, ngram=config.ngram, dupe_factor=config.dupe_factor,
                           short_seq_prob=config.short_seq_prob, seed=config.seed, mask=not config.no_mask)


def preflight(config):
    """What create-data checks before it reads, for the CLI before TensorFlow's import (local paths): the output
    prefix, the vocabulary, the input files."""
    if files.is_local(config.input, config.spm_model, config.output):
        files.check_output_prefix(config.output, "--output", "train")
        files.check_input_file(config.spm_model, "--spm-model", vocabulary.SPM_FILE)
        files.match_files(config.input)


def create_data(config):
    """Writes the pretraining records `config` (a CreateDataConfig) describes; prints progress and notes on
    stderr, the summary on stdout. Returns a CreateDataResult. Nothing is in place until every shard is complete:
    an interrupted run leaves no shard (and its temporary files are removed)."""
    # the vocabulary's record decides casing and accents; a flag that contradicts it is refused (text.record)
    lower_case = vocabulary.resolve_lower_case(vocabulary.read_casing(config.spm_model), config.cased,
                                               vocabulary.casing_path(config.spm_model))
    if config.beam:
        summary = _run_on_beam(config, lower_case)
    else:
        summary = creation.create_pretraining_data(
            config.input, config.spm_model, config.output, num_shards=config.num_shards,
            options=instance_options(config), workers=config.workers, lower_case=lower_case,
            overwrite=config.overwrite, max_skipped_share=config.max_skipped_share)
    stats = dataclasses.asdict(summary.stats)
    return CreateDataResult(list(summary.output_files), stats.get("instances", 0), stats.get("tokens", 0), stats,
                            dict(summary.replaced_by_file), summary.seconds,
                            skipped_files=list(summary.skipped_files))


def _run_on_beam(config, lower_case):
    """The records on Apache Beam (albert_tf.data.beam, an optional dependency), with config.beam_options."""
    try:
        from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=import-outside-toplevel

        from albert_tf.data import beam  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ValueError(f"--beam needs Apache Beam: pip install 'albert_tf[beam]' ({e})") from None
    return beam.run_pipeline(config.input, config.spm_model, config.output, num_shards=config.num_shards,
                             options=instance_options(config), lower_case=lower_case,
                             pipeline_options=PipelineOptions(config.beam_options), overwrite=config.overwrite,
                             max_skipped_share=config.max_skipped_share)


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


__all__ = ["CreateDataConfig", "CreateDataResult", "create_data", "preflight"]
