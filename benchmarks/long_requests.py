"""Long requests on this CPU: the memory and time one huge text costs, our export vs keras-hub 0.32's preprocessor.

    python benchmarks/long_requests.py            # albert_tiny, L 32, 1 MiB requests

What both sides serve is built as in benchmarks/serving.py (`common.prepare_export`: a generated vocabulary,
random weights, `albert-tf export`). Each (side, request) pair runs in a fresh process: load and warm up on a short text, then one
request of the given kind, timed; its cost is the process's peak RSS during the request (VmHWM, reset just
before it through /proc/self/clear_refs) minus its RSS before, and the wall time.

  ours   tf.saved_model.load(export).signatures["serving_default"](text_a=[request]) (tensorflow +
         tensorflow_text only): cut to the first L - 2 words and to MAX_WORD_CHARS (256) characters per word before
         SentencePiece.
  peer   keras-hub 0.32 AlbertTextClassifierPreprocessor(AlbertTokenizer(proto=the same vocabulary),
         sequence_length=L) in a tf.function: SentencePiece over the whole text, then truncation. Preprocessing
         only: the model's work after it is the same fixed [1, L] batch on both sides.

Requests (`--kinds`): words (English words and spaces), word (one character the vocabulary lacks, repeated, no
whitespace), both of `--mib` MiB of UTF-8. Printed: one line per (side, kind) with +MiB and seconds, then
`--rounds` alternating repetitions' medians.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import common


def request(argv):
    """The child (`long_requests.py --child request SIDE KIND MIB EXPORT SPM SEQ`): load SIDE, warm it up, then one
    request of KIND; prints {"mib": peak RSS growth during the request, "seconds", "tokens": ids kept}."""
    side, kind, mib, path, spm, seq = argv[0], argv[1], float(argv[2]), argv[3], argv[4], int(argv[5])
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import  (its ops)

    size = int(mib * 2**20)
    if kind == "words":
        text = ("The river runs past the old city. " * (size // 34 + 1))[:size]
    else:
        text = "\u4e00" * (size // 3)  # one character the vocabulary lacks, 3 bytes of UTF-8
    if side == "ours":
        serve = tf.saved_model.load(path).signatures["serving_default"]

        def run(t):
            return serve(text_a=tf.constant([t]), text_b=tf.constant([], tf.string))["input_mask"]
    else:
        import keras_hub  # pylint: disable=import-outside-toplevel

        tokenizer = keras_hub.models.AlbertTokenizer(proto=spm)
        preprocess = tf.function(keras_hub.models.AlbertTextClassifierPreprocessor(tokenizer, sequence_length=seq))

        def run(t):
            return preprocess(tf.constant([t]))["padding_mask"]

    def status_kib(field):
        with open("/proc/self/status", encoding="ascii") as f:
            return int(next(line for line in f if line.startswith(field + ":")).split()[1])

    run("warm up " * 4)
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")  # resets the peak (VmHWM) to the current RSS: the peak below is this request's
    before = status_kib("VmRSS")
    start = time.perf_counter()
    mask = run(text)
    seconds = time.perf_counter() - start
    grown = (status_kib("VmHWM") - before) / 1024
    print(json.dumps({"mib": grown, "seconds": seconds, "tokens": int(tf.reduce_sum(tf.cast(mask, tf.int32)))}))


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=os.path.join(common.REPO, "configs", "albert_tiny.json"))
    p.add_argument("--seq-length", type=int, default=32)
    p.add_argument("--mib", type=float, default=1.0, help="request size in MiB (default 1)")
    p.add_argument("--kinds", default="words,word")
    p.add_argument("--rounds", type=int, default=3, help="alternating repetitions (default 3)")
    p.add_argument("--vocab-size", type=int, default=600)
    common.add_peer_arguments(p, configs=False)
    p.add_argument("--timeout", type=int, default=600, help="seconds one request may take (default 600)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def measure(python, side, kind, args, export_path, spm):
    command = common.child_command(python, __file__, "request", side, kind, args.mib, export_path, spm,
                                   args.seq_length)
    try:  # no PYTHONPATH: each child imports only its own stack
        proc = subprocess.run(command, env=common.child_env(checkout=False), capture_output=True, text=True,
                              check=False, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"mib": float("nan"), "seconds": float(args.timeout), "tokens": -1, "timed_out": True}
    if proc.returncode:
        raise RuntimeError(f"{side} {kind}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(args):
    sides = {"ours": sys.executable}
    if common.peer_configs(args):
        sides["peer"] = args.peer_python
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    for kind in kinds:
        if kind not in ("words", "word"):
            raise SystemExit(f"--kinds: unknown kind '{kind}' (expected words, word)")
    with tempfile.TemporaryDirectory() as tmp:
        export_path, spm, _, _ = common.prepare_export(tmp, args.config, args.seq_length, args.vocab_size, args.seed)
        results = {(side, kind): [] for side in sides for kind in kinds}
        for round_index in range(args.rounds):
            for kind in kinds:
                for side, python in sides.items():
                    r = measure(python, side, kind, args, export_path, spm)
                    results[side, kind].append(r)
                    print(f"round {round_index + 1} {side:4s} {kind:5s} {args.mib:g} MiB: +{r['mib']:.1f} MiB "
                          f"{r['seconds']:.3f} s ({r['tokens']} tokens kept)", flush=True)
    summary = {}
    for (side, kind), rs in results.items():
        summary[f"{side}_{kind}_mib"] = round(statistics.median(r["mib"] for r in rs), 1)
        summary[f"{side}_{kind}_seconds"] = round(statistics.median(r["seconds"] for r in rs), 3)
    print(" ".join(f"{k}={v}" for k, v in summary.items()), flush=True)
    return 0


if __name__ == "__main__":
    common.run_child_if_asked({"request": request})
    sys.exit(main(_parse_args()))
