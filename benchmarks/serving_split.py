"""Where serving time goes: the in-graph tokenization, the encoder, and the signature around them.

    python benchmarks/serving_split.py --config configs/albert_base.json --seq-length 128 --batch-size 32 \
        [--before-checkout DIR] [--ops]

The parent builds what benchmarks/serving.py serves (`common.prepare_export`: the generated vocabulary, random
weights of the config's sizes, `albert-tf export`, the requests from `--seed`), plus
  * `tokenize`, a SavedModel holding only the text → ids part of serving_default (the same in-graph tokenizer and
    `albert_tf.serving.signatures.text_to_inputs`);
  * with `--before-checkout DIR`, the same model exported by that checkout's `albert-tf export` (e.g. the previous
    main), timed beside this checkout's export in the same rounds.
One worker process (tensorflow and tensorflow_text only) loads them and, each round, times in turn
  tokenize   text → the packed int32 [B, L] ids (the tokenize model),
  encoder    each export's `encode` signature on those ids (the encoder with the signature's length trimming),
  whole      each export's serving_default(text_a, text_b=<empty>), what a client calls,
`--batches` calls at batch B and `--singles` at batch 1; per call the median of the round, then the median over
`--rounds`. overhead = whole − tokenize − encoder: what the signature adds (the dict of inputs, padding
sequence_output back to L, the function call). `--ops` adds, per export, TensorFlow's own per-op-type
times for one serving_default call at batch B and at batch 1 (the TF1 session loader, as TF Serving runs it,
with a full trace).
The last lines: per export, `NAME: batch B tokenize_ms=… encoder_ms=… whole_ms=… overhead_ms=… examples_per_sec=…`
and the same at batch 1.
"""
import argparse
import collections
import os
import statistics
import sys
import tempfile
import time

import common


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=os.path.join(common.REPO, "configs", "albert_base.json"))
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    p.add_argument("--batches", type=int, default=3, help="timed batch-B calls per round and part (default 3)")
    p.add_argument("--singles", type=int, default=15, help="timed batch-1 calls per round and part (default 15)")
    p.add_argument("--vocab-size", type=int, default=600, help="as benchmarks/serving.py (default 600)")
    p.add_argument("--before-checkout", default=None, metavar="DIR",
                   help="also time the export written by this checkout's `albert-tf export` of the same model")
    p.add_argument("--ops", action="store_true", help="per-op-type times of one traced call per export and batch")
    p.add_argument("--workdir", default=None, help="keep the vocabulary, model and exports here (default: temp)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true", help="show the worker's stderr")
    p.add_argument("--_worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_paths", default=None, help=argparse.SUPPRESS)  # tokenize,NAME=EXPORT,...
    return p.parse_args(argv)


# ------------------------------------------------------------------------------------------ the worker
def _op_times(path, texts, top=8):
    """{op type: ms} of one traced serving_default call through the TF1 session loader, the `top` largest."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        signature = tf.compat.v1.saved_model.loader.load(session, ["serve"], path).signature_def["serving_default"]
        fetch, feed = signature.outputs["pooled_output"].name, {signature.inputs["text_a"].name: texts}
        session.run(fetch, feed)
        metadata = tf.compat.v1.RunMetadata()
        options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        session.run(fetch, feed, options=options, run_metadata=metadata)
    times = collections.Counter()
    for device in metadata.step_stats.dev_stats:
        for node in device.node_stats:
            op = node.timeline_label.split(" = ")[-1].split("(")[0] if node.timeline_label else node.node_name
            times[op] += node.all_end_rel_micros / 1000
    total = sum(times.values())
    return {"total": round(total, 1), **{op: round(ms, 1) for op, ms in times.most_common(top)}}


def _worker(args):
    """tensorflow + tensorflow_text only: load the tokenize model and the exports; 'round N' times every part."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

    tokenize_path, *named = args._paths.split(",")  # pylint: disable=protected-access
    exports = dict(item.split("=", 1) for item in named)
    loaded = {"tokenize": tf.saved_model.load(tokenize_path), **{n: tf.saved_model.load(p) for n, p in exports.items()}}
    no_text_b = tf.constant([], tf.string)
    tokenize = loaded["tokenize"].signatures["serving_default"]
    texts = common.make_texts(max(args.batch_size * 8, 64), args.seed + 1)
    requests = {args.batch_size: [texts[i:i + args.batch_size]
                                  for i in range(0, len(texts) - args.batch_size + 1, args.batch_size)],
                1: [[t] for t in texts]}
    ids = {b: [tokenize(text_a=tf.constant(r), text_b=no_text_b) for r in rs] for b, rs in requests.items()}

    def part_calls(name):
        if name == "tokenize":
            return lambda b, i: tokenize(text_a=tf.constant(requests[b][i]), text_b=no_text_b)["input_word_ids"]
        model, part = name.split(":")
        signatures = loaded[model].signatures
        if part == "encoder":
            return lambda b, i: signatures["encode"](**ids[b][i])["pooled_output"]
        return lambda b, i: signatures["serving_default"](text_a=tf.constant(requests[b][i]),
                                                          text_b=no_text_b)["pooled_output"]

    parts = {name: part_calls(name) for name in
             ["tokenize"] + [f"{n}:{p}" for n in exports for p in ("encoder", "whole")]}
    for call in parts.values():  # warm-up: the first calls trace and allocate
        for b in requests:
            call(b, 0).numpy()
            call(b, 1).numpy()
    cursor = collections.Counter()

    def one_round(_):
        result = {}
        for name, call in parts.items():
            for b, count in ((args.batch_size, args.batches), (1, args.singles)):
                times = []
                for _ in range(count):
                    cursor[b] += 1
                    start = time.perf_counter()
                    call(b, cursor[b] % len(requests[b])).numpy()
                    times.append(time.perf_counter() - start)
                result[f"{name}@{b}"] = statistics.median(times)
        return result

    def ops(_):
        return {n: {b: _op_times(p, requests[b][0]) for b in requests} for n, p in exports.items()}

    common.say("ready")
    common.serve({"round": one_round, "ops": lambda n: {"ops": ops(n)}})


# ------------------------------------------------------------------------------------------ the parent
def _tokenize_model(spm, seq_length, path):
    """Saves the text → ids part of serving_default as its own SavedModel at `path`."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.serving.signatures import text_to_inputs  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer, vocabulary  # pylint: disable=import-outside-toplevel

    tokenizer = AlbertTokenizer(spm, lower_case=vocabulary.resolve_lower_case(
        vocabulary.read_casing(spm), None, vocabulary.casing_path(spm)))
    module = tf.Module()
    module.tokenizer = tokenizer.in_graph
    text = tf.TensorSpec([None], tf.string)

    @tf.function(input_signature=[text, text])
    def pack(text_a, text_b):
        return text_to_inputs(tokenizer, text_a, text_b, seq_length)

    module.pack = pack
    tf.saved_model.save(module, path, signatures={"serving_default": pack.get_concrete_function()})
    return path


def _report(results, batch_size, names):
    for name in names:
        for b in (batch_size, 1):
            tok, enc, whole = (statistics.median(results[f"{p}@{b}"]) * 1000
                               for p in ("tokenize", f"{name}:encoder", f"{name}:whole"))
            print(f"{name}: batch {b} tokenize_ms={tok:.1f} encoder_ms={enc:.1f} whole_ms={whole:.1f} "
                  f"overhead_ms={whole - tok - enc:.1f} examples_per_sec={b * 1000 / whole:.2f}", flush=True)


def main(args):
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        path, spm, _, _ = common.prepare_export(workdir, args.config, args.seq_length, args.vocab_size, args.seed)
        paths = [_tokenize_model(spm, args.seq_length, os.path.join(workdir, "tokenize")), f"this={path}"]
        if args.before_checkout:
            before = common.export_by_checkout(args.before_checkout, os.path.join(workdir, "model"),
                                               os.path.join(workdir, "before"), args.seq_length)
            paths.append(f"before={before}")
        names = [p.split("=", 1)[0] for p in paths[1:]]
        print(f"{common.now()} load average {common.load_average():.2f}; seq {args.seq_length}, batch "
              f"{args.batch_size} x {args.batches} and {args.singles} batch-1 calls x {args.rounds} rounds; "
              f"exports: {', '.join(paths[1:])}", flush=True)
        worker = common.Worker("split", sys.executable, __file__,
                               ["--seq-length", str(args.seq_length), "--batch-size", str(args.batch_size),
                                "--batches", str(args.batches), "--singles", str(args.singles),
                                "--seed", str(args.seed), "--_paths", ",".join(paths)],
                               args.verbose, env=common.child_env(checkout=False), cwd=common.HERE)
        try:
            results = collections.defaultdict(list)
            for r in range(args.rounds):
                got = worker.command("round", 1)
                for key, value in got.items():
                    if key != "kind":
                        results[key].append(value)
                print(f"round {r + 1}/{args.rounds} (load {common.load_average():.2f}): "
                      + " ".join(f"{k}={v * 1000:.1f}ms" for k, v in got.items() if k != "kind"), flush=True)
            if args.ops:
                for name, by_batch in worker.command("ops", 1)["ops"].items():
                    for b, times in by_batch.items():
                        print(f"ops {name} batch {b} (ms, one traced call): "
                              + " ".join(f"{k}={v}" for k, v in times.items()), flush=True)
        finally:
            worker.close()
    _report(results, args.batch_size, names)
    return 0


if __name__ == "__main__":
    parsed = _parse_args()
    if parsed._worker:  # pylint: disable=protected-access
        _worker(parsed)
    else:
        sys.exit(main(parsed))
