"""Pretraining step throughput on this CPU: albert_tf (MLM + SOP, LAMB, clipping) vs keras-hub's AlbertMaskedLM.

    python benchmarks/train_step.py --config configs/albert_base.json --seq-length 128 --batch-size 8
    python benchmarks/train_step.py --recipe cpu_small        # the laptop recipe's model: seq 64, batch 128
    python benchmarks/train_step.py --recipe cpu_small --set num_hidden_layers=4   # its earlier 4-layer model

Measured side by side in one run, each side in its own worker process (built and compiled first, then idle while
the others are timed), alternating round by round (ours, peer configurations..., matmul peak; `--rounds` times):

  ours      full pretraining steps as `albert-tf pretrain` runs them on one device: AlbertPretrainer forward,
            the MLM + SOP loss, gradients, the cross-replica sum, clipping to global norm 1.0 and the LAMB update
            (`albert_tf.training.pretrain_step.build_model_and_optimizer`, `make_train_step`, `loop.make_train_loop`), `--steps` steps per
            compiled call as `--steps-per-loop` does. Default configuration: what `pretrain` runs by default, its
            dtype chosen by `--dtype auto`'s matmul probe (the other dtype is timed beside it, and the report says
            what fraction of the faster one auto reached), no XLA for the step (the fused elementwise
            kernels of albert_tf/modeling/fused.py are XLA-compiled on their own), two concurrent batch slices
            (`--streams 2`, pretrain's default on CPU), TF's default thread pools.
  peer      keras-hub 0.32 `AlbertMaskedLM` (MLM only, so it does less work than ours: no SOP head, no pooler)
            with the same backbone sizes, trained with `train_on_batch` (Keras' compiled train step, Adam, its
            default compile), in every configuration of `--peer-configs` (default: float32 and mixed_bfloat16,
            each with and without jit_compile); the best configuration is the figure. It runs under
            `--peer-python` (a separate virtualenv holding tensorflow 2.21 + keras-hub 0.32, so it cannot change
            this project's versions): `python3 -m venv /work/venv-khub &&
            /work/venv-khub/bin/pip install "tensorflow==2.21.*" "keras-hub==0.32.*"`.
  peak      this machine's matmul rate: `--peak-repeats` back-to-back `--peak-size`³ tf.matmuls in bf16 (oneDNN;
            AMX where the CPU has it), then as many in float32 (default TensorFlow settings) per round, total
            FLOPs / total time: sustained rates over about a second each, comparable with the sustained rate of a
            round of training steps. "The matmul rate" is the faster dtype's (bf16 with AMX; float32 on
            AVX512-BF16 without AMX, where bf16 matmuls run at about 0.55× float32's). The best single bf16
            matmul ("burst") is reported beside it; on a shared VM it can be far above the sustained rate.
  --profile STEPS: after the rounds, STEPS steps of ours under TensorFlow's profiler: op-seconds per step by op
            type and each fused XLA kernel by its function (`op_time`), the matmuls' share of all op time and their
            FLOPs per matmul op-second.

Both sides get the same random-but-valid batch: [CLS] A [SEP] B [SEP] over the whole length, `--max-predictions`
distinct masked positions (the input id replaced by [MASK], the label the original id), random SOP labels.

FLOPs per example: `albert_tf.training.costs.training_flops_per_example` (matmuls only, forward + backward =
3 × forward: the projections, FFN, QKᵀ and AV of every applied block, the E→H projection, pooler, SOP head and the
MLM head at the P masked positions). achieved_flops = examples/s × that; peak_fraction = achieved / the matmul
rate, and each configuration of ours is printed as a fraction of it.

The last line: examples_per_sec=X achieved_flops=F peak_fraction=R keras_hub_examples_per_sec=Y ratio=X/Y, then
the medians (median_peak_fraction = median examples/s × FLOPs / median matmul rate), the matmul rate, its dtype
(peak_dtype) and the chosen configurations. X, Y and the peak are the best rounds (the machine is shared and
noisy); the medians follow.
"""
import argparse
import atexit
import glob
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

import common


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=os.path.join(common.REPO, "configs", "albert_base.json"))
    p.add_argument("--recipe", choices=("cpu_small",), default=None,
                   help="time a recipe's model and shapes instead: cpu_small (`albert-tf pretrain --recipe "
                        "cpu_small`: 2 layers, 256 wide, vocab 8000, seq 64, batch 128, 10 predictions); "
                        "overrides --config, --seq-length, --batch-size and --max-predictions")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="change one key of the model (of --config, or of --recipe's model; repeatable, as "
                        "pretrain's --set), e.g. --set num_hidden_layers=4")
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-predictions", type=int, default=20)
    p.add_argument("--steps", type=int, default=4, help="timed steps per round and side (default 4)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    p.add_argument("--warmup-steps", type=int, default=2, help="untimed steps after compiling (default 2)")
    p.add_argument("--dtype", choices=("auto", "bfloat16", "float32"), default="auto",
                   help="ours: compute dtype (default auto: what `albert-tf pretrain` chooses on this machine, "
                        "albert_tf.runtime.precision; the other dtype is timed beside it)")
    p.add_argument("--xla", choices=("on", "off"), default="off", help="ours: make_train_step(jit_compile=...)")
    p.add_argument("--intra-threads", type=int, default=0, help="ours: TF intra-op threads (0: TF's default)")
    p.add_argument("--inter-threads", type=int, default=0, help="ours: TF inter-op threads (0: TF's default)")
    p.add_argument("--streams", type=int, default=2,
                   help="ours: the encoder's training_streams, as `albert-tf pretrain --streams` (default 2, "
                        "pretrain's default on CPU)")
    p.add_argument("--no-fused", action="store_true",
                   help="ours: the plain keras.ops graph (inference's) instead of the fused training path")
    p.add_argument("--also", action="append", default=[], metavar="K=V,...",
                   help="another configuration of ours to time alongside, e.g. 'dtype=float32' or "
                        "'fused=0,inter=0' (keys: dtype, xla, fused, streams, intra, inter, and ynn=1: XLA:CPU's "
                        "YNNPACK reduce fusions back on, which import albert_tf turns off); repeatable")
    common.add_peer_arguments(p)
    p.add_argument("--peak-size", type=int, default=2048, help="n of the n³ bf16 matmul peak (default 2048)")
    p.add_argument("--peak-repeats", type=int, default=30,
                   help="back-to-back matmuls timed per round for the peak (default 30)")
    p.add_argument("--profile", type=int, default=0, metavar="STEPS",
                   help="after the rounds, trace STEPS steps of ours under TensorFlow's profiler and print the time "
                        "per op (the matmuls' share and rate, each fused XLA kernel, everything else)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true", help="show the workers' stderr")
    p.add_argument("--_worker", default=None, help=argparse.SUPPRESS)  # ours | peer:CONFIG | peak
    return p.parse_args(argv)


# ------------------------------------------------------------------------------------------ workers
def _worker_ours(args):
    """Builds the pretrainer, LAMB and the train step as `albert-tf pretrain` does, then serves 'run N'."""
    import keras  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if args.intra_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_threads)
    if args.inter_threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_threads)
    from albert_tf.config import load_config  # pylint: disable=import-outside-toplevel
    from albert_tf.training import costs  # pylint: disable=import-outside-toplevel
    from albert_tf.training.loop import make_train_loop  # pylint: disable=import-outside-toplevel
    from albert_tf.training.pretrain_step import (  # pylint: disable=import-outside-toplevel
        SUM_KEYS, build_model_and_optimizer, make_train_step)

    config = load_config(args.config)
    keras.mixed_precision.set_global_policy("mixed_bfloat16" if args.dtype == "bfloat16" else "float32")
    keras.utils.set_random_seed(args.seed)
    strategy = tf.distribute.get_strategy()
    model, optimizer, _ = build_model_and_optimizer(config, 1e-4, num_train_steps=100000, num_warmup_steps=1000,
                                                    training_streams=args.streams, fused=not args.no_fused)
    batch = {k: tf.constant(v) for k, v in common.random_batch(
        config.vocab_size, args.batch_size, args.seq_length, args.max_predictions, args.seed).items()}
    batches = iter(tf.data.Dataset.from_tensors(batch).repeat())  # pretrain's loop, on one fixed batch
    train_step = make_train_step(model, optimizer, args.batch_size, jit_compile=args.xla == "on")
    train_loop = make_train_loop(strategy, train_step, SUM_KEYS)

    def run(num_steps):
        sums = {k: float(v) for k, v in train_loop(batches, tf.constant(num_steps), True).items()}
        return {"loss": sums["mlm_nll"] / sums["mlm_weight"] + sums["sop_nll"] / sums["sop_count"]}

    start = time.perf_counter()
    first = run(1)
    compile_seconds = time.perf_counter() - start
    if args.warmup_steps:  # run(0) has no loss to report
        run(args.warmup_steps)
    common.say("ready", compile_seconds=compile_seconds, first_loss=first["loss"],
               flops_per_example=costs.training_flops_per_example(config, args.seq_length, args.max_predictions),
               params=int(sum(int(tf.size(v)) for v in {id(v): v for v in model.trainable_variables}.values())))
    def profile(num_steps):
        """Per-op time of `num_steps` steps under TensorFlow's profiler (op_time)."""
        logdir = tempfile.mkdtemp(prefix="train_step_profile_")
        try:
            tf.profiler.experimental.start(logdir)
            start = time.perf_counter()
            run(num_steps)
            seconds = time.perf_counter() - start
            tf.profiler.experimental.stop()
            paths = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
            graph = train_loop.get_concrete_function(batches, tf.constant(num_steps), True).graph
            return {"seconds": seconds, "ops": op_time(paths[0], called_functions(graph.as_graph_def()))}
        finally:
            shutil.rmtree(logdir, ignore_errors=True)

    common.serve({"run": common.timed(run), "profile": profile})


# What a profiled op is, by its TensorFlow op type (oneDNN's names included).
MATMUL_OPS = {"MatMul", "_MklMatMul", "_FusedMatMul", "_MklFusedMatMul", "_MklNativeFusedMatMul", "BatchMatMulV2",
              "BatchMatMulV3", "_MklBatchMatMulV2", "_MklBatchMatMul", "_MklNativeBatchMatMulV2", "Einsum",
              "_MklEinsum"}
XLA_EVENT = "CpuExecutable::ExecuteAsyncOnStream"  # one launch of an XLA-compiled kernel (the fused ones)


CALL_EVENT = "ExecutorState::ProcessAsync::Start"  # the executor starting an async op: an XLA launch's caller
CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")


def called_functions(graph_def):
    """{call node name: function name} over a GraphDef and every function of its library: which function each
    (Stateful)PartitionedCall node calls (a profile names the node that launched an XLA kernel, not the kernel).
    A node name used by two calls of different functions maps to None (ambiguous)."""
    calls = {}
    for nodes in [graph_def.node] + [f.node_def for f in graph_def.library.function]:
        for node in nodes:
            if node.op in CALL_OPS:
                name = node.attr["f"].func.name
                calls[node.name] = name if calls.get(node.name, name) == name else None
    return calls


def _called(calls, node):
    """The function `node` calls: the profile's node name or its longest suffix (at a "/") that `calls` knows (a
    loop body's nodes run as "while/body/_1/" + their name in the body's function)."""
    parts = node.split("/")
    return next((calls[key] for key in ("/".join(parts[i:]) for i in range(len(parts))) if key in calls), None)


def kernel_name(function_name):
    """'__inference_gelu_backward_123' → 'gelu_backward' (a traced tf.function's name, back to its Python name)."""
    name = re.sub(r"^__inference_", "", function_name or "")
    return re.sub(r"_\d+$", "", name)


def op_time(xplane_path, calls=None):
    """{op: [op-seconds, count]} of a TensorFlow profile (an .xplane.pb): every op kernel run on the executor's
    threads, keyed by op type (matmuls under their oneDNN names), and every launch of an XLA-compiled kernel as
    "XLA: <its Python function>" where `calls` ({call node name: function name}, called_functions) names the node
    that launched it (matched on the longest suffix of the profile's node name, which carries the loop's prefix:
    "while/body/_1/while/PartitionedCall_4"), else as "XLA kernels". Ops that run concurrently (two batch slices,
    inter-op parallelism) both count, so the sum can exceed the wall time."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=import-outside-toplevel

    space = xplane_pb2.XSpace()
    with open(xplane_path, "rb") as f:
        space.ParseFromString(f.read())
    calls = calls or {}
    totals = {}
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        stat_names = {i: m.name for i, m in plane.stat_metadata.items()}
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            caller = None  # (start, end, node name) of the latest ProcessAsync event on this line
            for event in sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps)):
                metadata = plane.event_metadata[event.metadata_id]
                if metadata.name == CALL_EVENT:
                    node = next((stat_names.get(s.ref_value) for s in event.stats
                                 if stat_names.get(s.metadata_id) == "name"), None)
                    caller = (event.offset_ps, event.offset_ps + event.duration_ps, node)
                    continue
                key = metadata.display_name
                if metadata.name == XLA_EVENT:
                    node = caller[2] if caller and caller[0] <= event.offset_ps < caller[1] else None
                    function = _called(calls, node) if node else None
                    key = f"XLA: {kernel_name(function)}" if function else "XLA kernels"
                if key:
                    entry = totals.setdefault(key, [0.0, 0])
                    entry[0] += event.duration_ps * 1e-12
                    entry[1] += 1
    return totals


def _print_profile(result, num_steps, flops_per_step):
    """The per-op table: op-seconds per step, share of all op time, and the matmuls' rate."""
    ops = result["ops"]
    total = sum(seconds for seconds, _ in ops.values())
    matmul = sum(seconds for op, (seconds, _) in ops.items() if op in MATMUL_OPS)
    print(f"profile of {num_steps} steps: {result['seconds'] / num_steps:.3f} s per step (wall, under the "
          f"profiler), {total / num_steps:.3f} op-seconds per step (ops that overlap both count); matmuls "
          f"{matmul / total:.1%} of op time, {flops_per_step * num_steps / matmul / 1e9:.1f} GFLOP per matmul "
          f"op-second")
    print("| op | op-seconds per step | share | runs per step |")
    print("|---|---|---|---|")
    for op, (seconds, count) in sorted(ops.items(), key=lambda item: -item[1][0]):
        if seconds / total < 0.002:
            continue
        kind = " (matmul)" if op in MATMUL_OPS else ""
        print(f"| {op}{kind} | {seconds / num_steps:.4f} | {seconds / total:.1%} | {count / num_steps:.0f} |")


def _worker_peer(args, peer_config):
    """keras-hub 0.32 AlbertMaskedLM with our config's sizes, in `peer_config`, then serves 'run N'."""
    dtype, _, xla = peer_config.partition("+")
    import keras  # pylint: disable=import-outside-toplevel
    import keras_hub  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    c = common.load_config_dict(args.config)
    if c["num_hidden_layers"] % c["num_hidden_groups"] or c.get("inner_group_num", 1) < 1:
        raise SystemExit("config not expressible as a keras-hub AlbertBackbone")
    if c.get("hidden_act", "gelu") not in ("gelu", "gelu_new"):
        raise SystemExit(f"keras-hub's AlbertBackbone has tanh-GELU only; config has {c['hidden_act']}")
    keras.mixed_precision.set_global_policy(dtype)
    keras.utils.set_random_seed(args.seed)
    backbone = common.keras_hub_backbone(keras_hub, c)
    model = keras_hub.models.AlbertMaskedLM(backbone, preprocessor=None)
    model.compile(jit_compile=bool(xla))  # keras-hub's defaults: Adam(5e-5), sparse CE from logits, accuracy
    b = common.random_batch(c["vocab_size"], args.batch_size, args.seq_length, args.max_predictions, args.seed)
    x = {"token_ids": tf.constant(b["input_word_ids"]), "padding_mask": tf.constant(b["input_mask"]),
         "segment_ids": tf.constant(b["input_type_ids"]), "mask_positions": tf.constant(b["masked_lm_positions"])}
    y, w = tf.constant(b["masked_lm_ids"]), tf.constant(b["masked_lm_weights"])

    def run(num_steps):
        for _ in range(num_steps):
            logs = model.train_on_batch(x, y, sample_weight=w, return_dict=True)
        return {"loss": float(logs["loss"])}

    start = time.perf_counter()
    first = run(1)
    compile_seconds = time.perf_counter() - start
    if args.warmup_steps:  # run(0) has no loss to report
        run(args.warmup_steps)
    common.say("ready", compile_seconds=compile_seconds, first_loss=first["loss"], params=int(model.count_params()))
    common.serve({"run": common.timed(run)})


def _worker_peak(args):
    """Serves 'run K': K back-to-back n³ bf16 matmuls, then K float32 ones, timed (sustained rates; the best
    single bf16 one beside), default TensorFlow settings."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    n = args.peak_size
    matmul = tf.function(tf.linalg.matmul)
    operands = {dtype: (tf.cast(tf.random.normal((n, n), seed=1), dtype), tf.cast(tf.random.normal((n, n), seed=2),
                                                                                   dtype))
                for dtype in (tf.bfloat16, tf.float32)}

    def timed(dtype, repeats):
        """(total seconds, best single seconds) of `repeats` back-to-back matmuls."""
        a, b = operands[dtype]
        best, start = float("inf"), time.perf_counter()
        for _ in range(repeats):
            begin = time.perf_counter()
            matmul(a, b).numpy()  # .numpy() waits for the result
            best = min(best, time.perf_counter() - begin)
        return time.perf_counter() - start, best

    timed(tf.bfloat16, 2)
    timed(tf.float32, 1)
    common.say("ready", compile_seconds=0.0)

    def measure(repeats):
        total, best = timed(tf.bfloat16, repeats)
        f32_total, _ = timed(tf.float32, repeats)
        return {"bf16_flops": 2 * n ** 3 * repeats / total, "bf16_burst_flops": 2 * n ** 3 / best,
                "f32_flops": 2 * n ** 3 * repeats / f32_total}

    common.serve({"run": common.timed(measure)})


def _worker_main(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args._worker.startswith("ours"):
        _worker_ours(args)
    elif args._worker.startswith("peer:"):
        _worker_peer(args, args._worker.split(":", 1)[1])
    elif args._worker == "peak":
        _worker_peak(args)
    else:
        raise SystemExit(f"unknown worker {args._worker}")


# ------------------------------------------------------------------------------------------ the parent
def _describe(variant):
    dtype = "mixed_bfloat16" if variant["dtype"] == "bfloat16" else variant["dtype"]
    return (f"{dtype}{'+xla' if variant['xla'] == 'on' else ''}{'' if variant['fused'] == '1' else '+unfused'},"
            f"streams={variant['streams']},intra={variant['intra'] if variant['intra'] != '0' else 'default'},"
            f"inter={variant['inter'] if variant['inter'] != '0' else 'default'}"
            f"{',ynn' if variant['ynn'] == '1' else ''}")


def _variant_argv(variant):
    argv = ["--dtype", variant["dtype"], "--xla", variant["xla"], "--intra-threads", variant["intra"],
            "--inter-threads", variant["inter"], "--streams", variant["streams"]]
    return argv + ([] if variant["fused"] == "1" else ["--no-fused"])


def _apply_model(args):
    """--recipe and --set: the recipe's model (its config overrides over albert_base) or --config's, with --set's
    keys over it, in a temporary albert_config.json the workers read; --recipe also sets its batch shapes. A bad
    --set: one line, exit 2."""
    from albert_tf.config import resolve  # pylint: disable=import-outside-toplevel
    from albert_tf.settings.pretrain_config import RECIPES  # pylint: disable=import-outside-toplevel
    from albert_tf.run_config import parse_key_value  # pylint: disable=import-outside-toplevel

    try:
        changes = dict(parse_key_value(text) for text in args.set)
        if args.recipe:
            values = RECIPES[args.recipe]["values"]
            model = resolve("albert_base", {**values["config_overrides"], **changes})  # as pretrain builds it
            args.seq_length, args.batch_size = values["max_seq_length"], values["batch_size"]
            args.max_predictions = values["max_predictions"]
        else:
            model = resolve(args.config, changes)
    except (argparse.ArgumentTypeError, ValueError, OSError) as e:
        print(f"train_step: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    handle, args.config = tempfile.mkstemp(prefix=f"train_step_{args.recipe or 'set'}_", suffix=".json")
    os.close(handle)
    atexit.register(os.remove, args.config)
    model.to_json_file(args.config)


def main(args):  # noqa: C901
    if args.recipe or args.set:
        _apply_model(args)
        print(f"{f'--recipe {args.recipe}: ' if args.recipe else ''}{' '.join(f'--set {kv}' for kv in args.set)}"
              f"{' ' if args.set else ''}seq {args.seq_length}, batch {args.batch_size}, {args.max_predictions} "
              f"predictions, config {args.config}", flush=True)
    argv = ["--config", os.path.abspath(args.config), "--seq-length", str(args.seq_length),
            "--batch-size", str(args.batch_size), "--max-predictions", str(args.max_predictions),
            "--warmup-steps", str(args.warmup_steps), "--peak-size", str(args.peak_size), "--seed", str(args.seed)]
    choice = None
    if args.dtype == "auto":  # as `albert-tf pretrain --dtype auto` decides on this CPU (its probe, its cache)
        from albert_tf.config import load_config  # pylint: disable=import-outside-toplevel
        from albert_tf.runtime import precision  # pylint: disable=import-outside-toplevel

        config = load_config(args.config)
        choice = precision.choose("auto", False, False, precision.probe_shape(
            args.batch_size, args.seq_length, config.hidden_size, config.intermediate_size))
        print(f"{common.cpu_model()}, {os.cpu_count()} cpus: pretrain's default is {choice.describe()}"
              f"{' (cached probe)' if choice.cached else ''}", flush=True)
        other = "float32" if choice.dtype == "bfloat16" else "bfloat16"
        if not any(f"dtype={other}" in text for text in args.also):
            args.also = [f"dtype={other}"] + args.also
    ours = {"dtype": choice.dtype if choice else args.dtype, "xla": args.xla, "fused": "0" if args.no_fused else "1",
            "streams": str(args.streams), "intra": str(args.intra_threads), "inter": str(args.inter_threads),
            "ynn": "0"}
    variants = {"ours": ours}
    for text in args.also:
        variant = dict(ours)
        for item in filter(None, text.split(",")):
            key, _, value = item.partition("=")
            if key not in ours:
                raise SystemExit(f"--also {text}: unknown key '{key}' (expected {', '.join(ours)})")
            variant[key] = value
        if variant["ynn"] not in ("0", "1"):
            raise SystemExit(f"--also {text}: ynn must be 0 or 1")
        variants["ours[" + text + "]"] = variant
    ours_config = _describe(ours)
    peer_configs = common.peer_configs(args)

    print(f"{common.now()} {common.cpu_model()}, load average {common.load_average():.2f}; "
          f"seq {args.seq_length}, batch {args.batch_size}, {args.max_predictions} predictions, "
          f"{args.steps} steps x {args.rounds} rounds", flush=True)
    workers = {}
    try:
        # Started one at a time, so that compiling one does not slow the timing of another.
        for name, variant in variants.items():
            ynn = "--xla_cpu_experimental_ynn_fusion_type=reduce" if variant["ynn"] == "1" else ""
            w = workers[name] = common.Worker(name, sys.executable, __file__, argv + _variant_argv(variant),
                                              args.verbose, env=common.child_env(xla_flags=ynn))
            print(f"{name} ({_describe(variant)}): compiled in {w.ready['compile_seconds']:.1f}s, "
                  f"{w.ready['params']} parameters, first loss {w.ready['first_loss']:.4f}", flush=True)
        peers = common.start_peers({f"peer:{c}": (args.peer_python, __file__, argv, args.verbose)
                                    for c in peer_configs})
        for name, w in peers.items():
            print(f"keras-hub {name.split(':', 1)[1]}: compiled in {w.ready['compile_seconds']:.1f}s, "
                  f"{w.ready['params']} parameters, first loss {w.ready['first_loss']:.4f}", flush=True)
        workers.update(peers)
        workers["peak"] = common.Worker("peak", sys.executable, __file__, argv, args.verbose)

        rates = {name: [] for name in workers if name != "peak"}
        cpu_rates = {name: [] for name in rates}  # examples per CPU-second of the worker: less load-dependent
        peaks, bursts, f32_peaks = [], [], []
        for r in range(args.rounds):
            line = []
            for name, worker in workers.items():
                if name == "peak":
                    result = worker.run(args.peak_repeats)
                    peaks.append(result["bf16_flops"])
                    bursts.append(result["bf16_burst_flops"])
                    f32_peaks.append(result["f32_flops"])
                    line.append(f"peak_bf16={result['bf16_flops'] / 1e9:.1f}GFLOP/s"
                                f"(burst {result['bf16_burst_flops'] / 1e9:.1f})")
                else:
                    result = worker.run(args.steps)
                    rates[name].append(args.steps * args.batch_size / result["seconds"])
                    cpu_rates[name].append(args.steps * args.batch_size / result["cpu_seconds"])
                    line.append(f"{name}={rates[name][-1]:.3f}ex/s({cpu_rates[name][-1]:.3f}/cpu-s)")
            print(f"round {r + 1}/{args.rounds} (load {common.load_average():.2f}): " + " ".join(line), flush=True)
        if args.profile:
            profiled = workers["ours"].command("profile", args.profile)
    finally:
        common.close_all(workers)

    flops_per_example = workers["ours"].ready["flops_per_example"]
    # "The matmul rate": the faster dtype's sustained 2048³ rate on this CPU (bf16 where it has AMX, float32 where
    # its bf16 instructions are slower, as on AVX512-BF16 without AMX).
    peak_dtype = "bfloat16" if max(peaks) >= max(f32_peaks) else "float32"
    peak_series = peaks if peak_dtype == "bfloat16" else f32_peaks
    peak = max(peak_series)
    ours_best, ours_median = max(rates["ours"]), statistics.median(rates["ours"])
    achieved = ours_best * flops_per_example
    for name, values in rates.items():
        print(f"{name}: best {max(values):.3f} median {statistics.median(values):.3f} examples/s "
              f"({max(values) * flops_per_example / 1e9:.1f} GFLOP/s at best); per CPU-second: best "
              f"{max(cpu_rates[name]):.3f} median {statistics.median(cpu_rates[name]):.3f}", flush=True)
    print(f"flops/example {flops_per_example / 1e9:.2f} GFLOP; {args.peak_size}^3 matmul, sustained: bf16 best "
          f"{max(peaks) / 1e9:.1f} median {statistics.median(peaks) / 1e9:.1f} GFLOP/s (best single "
          f"{max(bursts) / 1e9:.1f}), float32 best {max(f32_peaks) / 1e9:.1f} median "
          f"{statistics.median(f32_peaks) / 1e9:.1f}; the faster: {peak_dtype}", flush=True)
    median_fraction = ours_median * flops_per_example / statistics.median(peak_series)
    for name, values in rates.items():
        if name.startswith("ours"):
            print(f"{name}: {statistics.median(values) * flops_per_example / statistics.median(peak_series):.3f} "
                  f"of the {peak_dtype} matmul rate (medians), {max(values) * flops_per_example / peak:.3f} "
                  f"(bests)", flush=True)
    if args.profile:
        _print_profile(profiled, args.profile, flops_per_example * args.batch_size)
    peer = common.fastest_peer(rates)
    if peer:
        peer_config, peer_best, peer_median = peer
        peer_text = (f"keras_hub_examples_per_sec={peer_best:.3f} ratio={ours_best / peer_best:.3f} "
                     f"median_examples_per_sec={ours_median:.3f} median_peak_fraction={median_fraction:.3f} "
                     f"keras_hub_median_examples_per_sec={peer_median:.3f} "
                     f"median_ratio={ours_median / peer_median:.3f} keras_hub_config={peer_config}")
    else:
        peer_text = (f"keras_hub_examples_per_sec=nan ratio=nan median_examples_per_sec={ours_median:.3f} "
                     f"median_peak_fraction={median_fraction:.3f} keras_hub_config=none")
    by_dtype = {v["dtype"]: statistics.median(rates[name]) for name, v in variants.items()
                if {k: x for k, x in v.items() if k != "dtype"} == {k: x for k, x in ours.items() if k != "dtype"}}
    if choice is not None and len(by_dtype) == 2:
        best_dtype = max(by_dtype, key=by_dtype.get)
        print(f"auto chose {choice.dtype}: median {by_dtype[choice.dtype]:.3f} examples/s; float32 "
              f"{by_dtype['float32']:.3f}, bfloat16 {by_dtype['bfloat16']:.3f}: auto = "
              f"{by_dtype[choice.dtype] / by_dtype[best_dtype]:.3f} of the faster dtype ({best_dtype}); probe "
              f"matmul rates (GFLOP/s) {choice.rates}", flush=True)
    print(f"examples_per_sec={ours_best:.3f} achieved_flops={achieved:.4g} peak_fraction={achieved / peak:.3f} "
          f"{peer_text} peak_flops={peak:.4g} peak_dtype={peak_dtype} config={ours_config}", flush=True)
    return 0


if __name__ == "__main__":
    parsed = _parse_args()
    if parsed._worker:
        _worker_main(parsed)
    else:
        sys.exit(main(parsed))
