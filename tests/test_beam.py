"""The Beam pipeline on DirectRunner writes exactly the local tool's records (same instance distribution)."""
import glob
import os

import pytest

import helpers

beam = pytest.importorskip("apache_beam", reason="the [beam] extra is not installed")

from albert_tf.data import beam as beam_pipeline  # noqa: E402  pylint: disable=wrong-import-position
from albert_tf.data import record_index  # noqa: E402  pylint: disable=wrong-import-position
from albert_tf.data.create_pretraining_data import (  # noqa: E402  pylint: disable=wrong-import-position
    InstanceOptions, create_pretraining_data)


def _records(paths):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return [r.numpy() for p in paths for r in tf.data.TFRecordDataset(p)]


def test_direct_runner_writes_the_local_records(tmp_path, tiny_spm_model):
    for i in range(2):
        helpers.write_corpus(str(tmp_path / f"c{i}.txt"), num_docs=25, seed=10 + i)
    pattern = str(tmp_path / "c*.txt")
    options = InstanceOptions(max_seq_length=64, max_predictions=10, dupe_factor=2)
    ours = beam_pipeline.run_pipeline(pattern, tiny_spm_model, str(tmp_path / "beam" / "data"), num_shards=2,
                                      options=options, block_documents=6, progress=False)
    ref = create_pretraining_data(pattern, tiny_spm_model, str(tmp_path / "local" / "data"), num_shards=3,
                                  options=options, block_documents=6, progress=False)
    written = sorted(glob.glob(str(tmp_path / "beam" / "data-*.tfrecord")))
    assert written == ours.output_files
    beam_records, local_records = _records(written), _records(ref.output_files)
    assert len(beam_records) == ref.stats.instances > 50
    assert sorted(beam_records) == sorted(local_records)
    for field in ("documents", "instances", "tokens", "masked", "swapped", "random_next", "skipped_documents"):
        assert getattr(ours.stats, field) == getattr(ref.stats, field), field
    index = record_index.read_index(record_index.index_path(str(tmp_path / "beam" / "data")))
    assert index == {os.path.basename(p): (len(_records([p])), os.path.getsize(p)) for p in written}


def test_create_data_beam_passes_runner_options_and_reports_bad_input(tmp_path, tiny_spm_model, cli):
    """`albert-tf create-data --beam ... -- BEAM OPTIONS`: the words after -- reach Beam's PipelineOptions (a
    misspelled one would be refused by Beam), bad input is one line and exit 2 with nothing left; Beam options
    without --beam are refused."""
    code, _, err = cli("create-data", "--beam", "--input", str(tmp_path / "none*.txt"), "--spm-model",
                       tiny_spm_model, "--output", str(tmp_path / "o" / "d"), "--", "--runner", "DirectRunner")
    assert code == 2 and "none*.txt" in err
    (tmp_path / "short.txt").write_text("Just one.\n\nAnd one more.\n", encoding="utf-8")
    code, _, err = cli("create-data", "--beam", "--input", str(tmp_path / "short.txt"), "--spm-model",
                       tiny_spm_model, "--output", str(tmp_path / "o" / "d"), "--max-seq-length", "32", "--",
                       "--runner", "DirectRunner", "--direct_num_workers", "1")
    assert code == 2 and "fewer than 2 sentences" in err
    assert not glob.glob(str(tmp_path / "o" / "d-*"))
    code, _, err = cli("create-data", "--input", str(tmp_path / "short.txt"), "--spm-model", tiny_spm_model,
                       "--output", str(tmp_path / "o" / "d"), "--", "--runner", "DirectRunner")
    assert code == 2 and "go with --beam" in err
