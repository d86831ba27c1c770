"""create-data figure: ours vs google-research/albert's create_pretraining_data.py, same text, same vocabulary.

Real English: the Python 3 documentation sources (`apt-get install python3-doc`, *.rst.txt), one sentence per line
and a blank line between files. A SentencePiece vocabulary is trained with `albert-tf vocab`. Both tools run at
seq 128, 20 predictions, ngram 3, dupe factor 1, one process each, on a small and on a 4x larger corpus. Each run
is a child process that imports everything first and then times only the work (process CPU time, all threads, and
wall time); its peak RSS comes from os.wait4.

The original is not part of this repository: bring it yourself, e.g. with
    git clone https://github.com/google-research/albert /work/scratch/orig/albert
and pass --original-dir /work/scratch/orig (the folder that holds the `albert` package). It is TF1 code run under
tensorflow.compat.v1 of the installed TensorFlow; `tensorflow_hub` (imported by its tokenization.py, used only for
TF-Hub modules) is replaced by an empty stub when it is not installed.

Throughput is instances per CPU second of the work (one core; the machine may be shared, so CPU time is steadier
than wall time, which is printed too), over both corpus sizes.
The last line is parseable:
    ours_inst_per_s=... original_inst_per_s=... speedup=... ours_peak_rss_mb_small=... ours_peak_rss_mb_large=...
    original_peak_rss_mb_small=... original_peak_rss_mb_large=...
"""
import argparse
import glob
import itertools
import os
import re
import subprocess
import sys
import tempfile
import time

import common

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"(])")


def python_doc_sources():
    files = sorted(glob.glob("/usr/share/doc/python3*/html/_sources/**/*.rst.txt", recursive=True))
    if not files:
        sys.exit("no Python documentation sources found: apt-get install -y python3-doc")
    return files


def write_corpus(files, path, max_bytes):
    """rst sources → one sentence per line, a blank line between files, cycling through the files again if
    needed; stops after max_bytes. Returns the bytes written."""
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        for name in itertools.cycle(files):
            with open(name, encoding="utf-8", errors="replace") as f:
                text = f.read()
            sentences = []
            for paragraph in re.split(r"\n\s*\n", text):
                flat = " ".join(paragraph.split())
                if not flat or set(flat) <= set("=-*~^#.:` "):
                    continue
                sentences.extend(s for s in _SENTENCE_END.split(flat) if len(s.split()) >= 2)
            if len(sentences) < 2:
                continue
            block = "\n".join(sentences) + "\n\n"
            out.write(block)
            written += len(block.encode("utf-8"))
            if written >= max_bytes:
                break
    return written


# Each tool runs in a child process (`create_data.py --child ours|original ARGS`) that imports everything first and
# then times only the work (CPU time of the whole process, all threads, and wall time), printing
# `work_cpu_s=... work_wall_s=...` as its last line.
def ours(argv):
    """The child running albert_tf's create-data: ARGS = corpus, SentencePiece model, output prefix, seq length."""
    corpus, model, out, seq = argv
    import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import  (imported before timing)

    from albert_tf.data.create_pretraining_data import (  # pylint: disable=import-outside-toplevel
        InstanceOptions, create_pretraining_data)

    cpu, wall = time.process_time(), time.time()
    create_pretraining_data(corpus, model, out, options=InstanceOptions(max_seq_length=int(seq), max_predictions=20),
                            workers=1, progress=False)
    print(f"work_cpu_s={time.process_time() - cpu} work_wall_s={time.time() - wall}")


def original(argv):
    """The child running google-research/albert's create_pretraining_data.py (package `albert` on PYTHONPATH):
    ARGS are its flags."""
    from albert import create_pretraining_data as tool  # pylint: disable=import-outside-toplevel,import-error

    tool.FLAGS(["create_pretraining_data"] + list(argv))
    cpu, wall = time.process_time(), time.time()
    tool.main(None)
    print(f"work_cpu_s={time.process_time() - cpu} work_wall_s={time.time() - wall}")


def measure(cmd, env=None):
    """Runs cmd; returns (work wall s, work cpu s, peak RSS MiB of that child alone, via os.wait4)."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            sys.exit(f"failed: {' '.join(cmd)}\n{err.read().decode(errors='replace')[-3000:]}")
    fields = dict(kv.split("=") for kv in out.decode().strip().splitlines()[-1].split())
    return float(fields["work_wall_s"]), float(fields["work_cpu_s"]), usage.ru_maxrss / 1024


def count_records(paths):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return sum(1 for p in paths for _ in tf.data.TFRecordDataset(p))


def distribution(paths, seq, predictions=20):
    """A few statistics of the records, to compare the two tools' output (not only their speed)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.data.features import feature_spec  # pylint: disable=import-outside-toplevel
    from albert_tf.text import MASK_ID  # pylint: disable=import-outside-toplevel

    raw = [r.numpy() for p in paths for r in tf.data.TFRecordDataset(p)]
    e = {k: v.numpy() for k, v in tf.io.parse_example(tf.constant(raw), feature_spec(seq, predictions)).items()}
    valid = e["masked_lm_weights"] > 0
    shown = np.take_along_axis(e["input_ids"], e["masked_lm_positions"], axis=1)
    runs = []
    for pos, k in zip(e["masked_lm_positions"], valid.sum(axis=1)):
        if k:
            runs.extend(np.diff(np.r_[0, np.flatnonzero(np.diff(pos[:k]) != 1) + 1, k]).tolist())
    hist = np.bincount(runs, minlength=5)[1:5] / max(1, len(runs))
    as_mask = ((shown == MASK_ID) & valid).sum() / valid.sum()
    unchanged = ((shown == e["masked_lm_ids"]) & valid).sum() / valid.sum()
    return (f"mean length {e['input_mask'].sum(1).mean():.1f}, SOP label 1 {e['next_sentence_labels'].mean():.3f}, "
            f"masked/instance {valid.sum(1).mean():.2f}, [MASK] {as_mask:.3f}, unchanged {unchanged:.3f}, "
            f"runs of 1/2/3/4 masked tokens {' '.join(f'{h:.3f}' for h in hist)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--original-dir", default="/work/scratch/orig",
                        help="folder holding the google-research/albert checkout as package `albert`")
    parser.add_argument("--work-dir", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--small-mb", type=float, default=2.5)
    parser.add_argument("--scale", type=int, default=4, help="the large corpus is this many times the small one")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--max-seq-length", type=int, default=128)
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(args.original_dir, "albert", "create_pretraining_data.py")):
        sys.exit(f"{args.original_dir}/albert/create_pretraining_data.py not found: clone google-research/albert "
                 "there (see the module docstring)")
    work = args.work_dir or tempfile.mkdtemp(prefix="albert_create_data_bench_")
    os.makedirs(work, exist_ok=True)
    python = sys.executable
    env = dict(common.child_env(), TF_CPP_MIN_LOG_LEVEL="3")

    sources = python_doc_sources()
    corpora = {}
    for name, mb in (("small", args.small_mb), ("large", args.small_mb * args.scale)):
        corpora[name] = os.path.join(work, f"{name}.txt")
        size = write_corpus(sources, corpora[name], int(mb * 2**20))
        print(f"corpus {name}: {size / 2**20:.2f} MiB", file=sys.stderr)
    prefix = os.path.join(work, "spm")
    if not os.path.exists(prefix + ".model"):
        subprocess.run([python, "-m", "albert_tf", "vocab", "--input", corpora["large"], "--output-prefix", prefix,
                        "--vocab-size", str(args.vocab_size)], env=env, check=True, stderr=subprocess.DEVNULL)

    stub = os.path.join(work, "stubs")
    orig_env = dict(env, PYTHONPATH=args.original_dir)
    try:
        subprocess.run([python, "-c", "import tensorflow_hub"], env=orig_env, check=True, capture_output=True)
    except subprocess.CalledProcessError:
        os.makedirs(os.path.join(stub, "tensorflow_hub"), exist_ok=True)
        with open(os.path.join(stub, "tensorflow_hub", "__init__.py"), "w", encoding="utf-8") as f:
            f.write("# empty stand-in: the original tokenization.py imports tensorflow_hub only for TF-Hub modules\n")
        orig_env["PYTHONPATH"] = args.original_dir + os.pathsep + stub

    seq = str(args.max_seq_length)
    results = {}
    for name, corpus in corpora.items():
        out = os.path.join(work, f"ours_{name}")
        cmd = common.child_command(python, __file__, "ours", corpus, prefix + ".model", out, seq)
        results[("ours", name)] = (count_records(glob.glob(out + "-*.tfrecord")),) + measure(cmd, env)
        out = os.path.join(work, f"original_{name}.tfrecord")
        cmd = common.child_command(
            python, __file__, "original", f"--input_file={corpus}", f"--output_file={out}",
            f"--spm_model_file={prefix}.model", f"--vocab_file={prefix}.vocab", f"--max_seq_length={seq}",
            "--max_predictions_per_seq=20", "--masked_lm_prob=0.15", "--ngram=3", "--dupe_factor=1",
            "--short_seq_prob=0.1", "--random_seed=12345")
        results[("original", name)] = (count_records([out]),) + measure(cmd, orig_env)

    rates = {}
    for tool in ("ours", "original"):
        for name in corpora:
            n, wall, cpu, rss = results[(tool, name)]
            print(f"{tool:8s} {name}: {n} instances, wall {wall:.1f} s ({n / wall:.0f}/s), cpu {cpu:.1f} s "
                  f"({n / cpu:.0f}/s), peak RSS {rss:.0f} MiB", file=sys.stderr)
        large = (glob.glob(os.path.join(work, "ours_large-*.tfrecord")) if tool == "ours"
                 else [os.path.join(work, "original_large.tfrecord")])
        print(f"{tool:8s} large records: {distribution(large, args.max_seq_length)}", file=sys.stderr)
        (n0, _, c0, _), (n1, _, c1, _) = results[(tool, "small")], results[(tool, "large")]
        rates[tool] = (n0 + n1) / (c0 + c1)
    print(f"ours_inst_per_s={rates['ours']:.0f} original_inst_per_s={rates['original']:.0f} "
          f"speedup={rates['ours'] / rates['original']:.1f} "
          f"ours_peak_rss_mb_small={results[('ours', 'small')][3]:.0f} "
          f"ours_peak_rss_mb_large={results[('ours', 'large')][3]:.0f} "
          f"original_peak_rss_mb_small={results[('original', 'small')][3]:.0f} "
          f"original_peak_rss_mb_large={results[('original', 'large')][3]:.0f}")
    return 0


if __name__ == "__main__":
    common.run_child_if_asked({"ours": ours, "original": original})
    sys.exit(main())
