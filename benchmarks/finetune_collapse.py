"""How often does fine-tuning collapse, per optimizer and compute dtype? The same `albert_tf.finetune` runs with each
arm over several seeds, counting the runs `finetune` reports as collapsed (dev accuracy back at the majority-class
rate and training loss back at ln 2 for two epochs after having been better: eval_results.json's "collapse").

    python benchmarks/finetune_collapse.py [--task few-label|quickstart] [--seeds 5] [--arms A,B,...]
                                           [--learning-rate LR] [--init MODEL_DIR] [--work-dir DIR]

Tasks (both real sentences of the standard library's docstrings, SST-2's layout, a 2000-piece vocabulary trained
on the quickstart's corpus):
  few-label   which group of modules a sentence comes from (text and data formats, or concurrency, time and
              processes): 128 training sentences per class, 284 dev per class
              (`albert_tf.data.builtin_corpus.write_few_label_task`); a 4-layer, 256-wide ALBERT (E 128, FFN
              1024, 4 heads), 15 epochs at batch 16 (240 steps), seq 64, lr 3e-4, 10 % warm-up, classifier dropout
              0.1: the settings of the collapse reported in docs/fine-tuning-quality.md ("Collapse").
  quickstart  the quickstart's task (files and archives, or networking and mail: 970 train / 242 dev), the
              tiny config, 4 epochs at batch 16, seq 64, lr 1e-3, 10 % warm-up, no classifier dropout.
Each seed draws one random init of the config (or every run starts from `--init`'s encoder), and every arm
fine-tunes it with the same seed (head init, data order, dropout); the arms' order rotates by seed, so a change of
load does not favour one. An arm is OPTIMIZER:DTYPE[:LR], e.g. adamw-original:bfloat16 or adamw-keras:float32:1e-3.

Prints one line per run and a table per arm: the best epoch's dev accuracy (what finetune keeps and exports) and
the last epoch's, mean ± std over seeds, how many seeds collapsed, each seed's, and median seconds per run; then
the paired bfloat16 − float32 difference per optimizer. Last line: `ARM_best=... ARM_last=... ARM_collapsed=N ...`.
"""
import argparse
import json
import os
import statistics
import tempfile
import time

import common

TASKS = {
    "few-label": {"epochs": 15, "learning_rate": 3e-4, "classifier_dropout": 0.1,
                  "config": {"hidden_size": 256, "intermediate_size": 1024, "embedding_size": 128}},
    "quickstart": {"epochs": 4, "learning_rate": 1e-3, "classifier_dropout": 0.0, "config": {}},
}
DEFAULT_ARMS = "adamw-original:float32,adamw-original:bfloat16,adamw-keras:float32,adamw-keras:bfloat16"


def _parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=sorted(TASKS), default="few-label")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--arms", default=DEFAULT_ARMS, help=f"comma-separated OPTIMIZER:DTYPE[:LR] (default {DEFAULT_ARMS})")
    p.add_argument("--learning-rate", type=float, default=None, help="every arm's rate unless the arm names one "
                   "(default: the task's)")
    p.add_argument("--epochs", type=int, default=None, help="default: the task's")
    p.add_argument("--tiny", action="store_true", help="the tiny config for every task (default: the task's)")
    p.add_argument("--init", default=None, help="a pretrained-model directory every run starts from (its spm.model "
                   "tokenizes the task); default: a random init of the task's config per seed")
    p.add_argument("--work-dir", default=None, help="where the corpus, task, inits and runs go (default: a temp dir)")
    return p.parse_args()


def parse_arm(text, learning_rate):
    """"OPTIMIZER:DTYPE[:LR]" → (name, optimizer, dtype, learning rate)."""
    parts = text.strip().split(":")
    if len(parts) not in (2, 3):
        raise SystemExit(f"finetune_collapse: --arms {text!r}: expected OPTIMIZER:DTYPE or OPTIMIZER:DTYPE:LR")
    rate = float(parts[2]) if len(parts) == 3 else learning_rate
    return text.strip(), parts[0], parts[1], rate


def main():
    args = _parse_args()
    import albert_tf  # pylint: disable=import-outside-toplevel
    from albert_tf import AlbertConfig, configs_dir  # pylint: disable=import-outside-toplevel
    from albert_tf.data import builtin_corpus  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel
    from albert_tf.data.vocab import train_vocab  # pylint: disable=import-outside-toplevel

    task = TASKS[args.task]
    rate = args.learning_rate or task["learning_rate"]
    epochs = args.epochs or task["epochs"]
    arms = [parse_arm(a, rate) for a in args.arms.split(",")]
    work = args.work_dir or tempfile.mkdtemp(prefix="finetune_collapse_")
    os.makedirs(work, exist_ok=True)
    print(f"finetune_collapse: {common.cpu_model()}, {os.cpu_count()} cpus, load average "
          f"{common.load_average():.2f} at start; work dir {work}", flush=True)
    data = os.path.join(work, f"task-{args.task}")
    if args.task == "few-label":
        builtin_corpus.write_few_label_task(data)
    else:
        builtin_corpus.write_document_task(data, seed=12345)
    spm = config = None
    if args.init is None:
        corpus = os.path.join(work, "corpus.txt")
        builtin_corpus.write_builtin_corpus(corpus)
        spm = os.path.join(work, "spm.model")
        if not os.path.exists(spm):  # a re-run in the same work dir reuses it
            spm = train_vocab(corpus, os.path.join(work, "spm"), vocab_size=2000).model
        config = AlbertConfig.from_json_file(os.path.join(configs_dir(), "albert_tiny.json")).replace(
            vocab_size=AlbertTokenizer(spm).vocab_size, **({} if args.tiny else task["config"]))
    results = {name: [] for name, *_ in arms}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        name = f"init-{'tiny' if args.tiny else args.task}-{seed}"
        init = args.init or common.random_init(os.path.join(work, name), config, spm, seed)
        shift = seed % len(arms)
        for name, optimizer, dtype, lr in arms[shift:] + arms[:shift]:
            output = os.path.join(work, f"run-{args.task}-{seed}-{name.replace(':', '-')}-{time.time_ns()}")
            started = time.perf_counter()
            result = albert_tf.finetune(albert_tf.FinetuneConfig(
                task="sst2", data_dir=data, init=init, output=output, epochs=epochs, batch_size=16,
                max_seq_length=64, learning_rate=lr, warmup_proportion=0.1,
                classifier_dropout=task["classifier_dropout"], optimizer=optimizer, seed=seed, dtype=dtype,
                log_every=1000))
            seconds = time.perf_counter() - started
            run = read_run(output, result, seconds)
            results[name].append(run)
            print(f"seed {seed} {name}: best {run['best']:.3f} (epoch {result.epoch}), last {run['last']:.3f}, "
                  f"collapsed {'yes' if run['collapse'] else 'no'}; by epoch "
                  f"{' '.join(f'{a:.3f}' for a in run['accuracies'])} ({seconds:.0f}s, load "
                  f"{common.load_average():.2f})", flush=True)
    report(results, args, epochs, rate)


def read_run(output, result, seconds):
    """One run's figures from what finetune left in `output`."""
    history = json.loads(open(os.path.join(output, "epoch_history.json"), encoding="utf-8").read())["epochs"]
    report = json.loads(open(os.path.join(output, "eval_results.json"), encoding="utf-8").read())
    return {"best": result.metrics["dev"]["accuracy"], "last": history[-1][1], "collapse": report.get("collapse"),
            "accuracies": [row[1] for row in history], "seconds": seconds}


def report(results, args, epochs, rate):
    """The markdown tables and the last line."""
    print(f"\n{args.task} task, {epochs} epochs at batch 16, lr {rate:g} unless the arm names one, seeds "
          f"{args.first_seed}..{args.first_seed + args.seeds - 1}")
    print("| arm | best-epoch dev accuracy | last-epoch dev accuracy | collapsed | per seed (best) | median s |")
    print("|---|---|---|---|---|---|")
    for name, runs in results.items():
        best = [r["best"] for r in runs]
        print(f"| {name} | {common.summary(best)[2]} | {common.summary([r['last'] for r in runs])[2]} | "
              f"{sum(bool(r['collapse']) for r in runs)}/{len(runs)} | {' '.join(f'{v:.3f}' for v in best)} | "
              f"{statistics.median(r['seconds'] for r in runs):.0f} |")
    for name, runs in results.items():
        optimizer, dtype, *rest = name.split(":")
        twin = ":".join([optimizer, "float32", *rest])
        if dtype == "bfloat16" and twin in results:
            best = [a["best"] - b["best"] for a, b in zip(runs, results[twin])]
            last = [a["last"] - b["last"] for a, b in zip(runs, results[twin])]
            print(f"{name} − float32, paired: best {common.summary(best)[2]} ({' '.join(f'{v:+.3f}' for v in best)}), "
                  f"last {common.summary(last)[2]}")
    print(f"load average {common.load_average():.2f} at the end")
    print(" ".join(f"{name}_best={statistics.mean(r['best'] for r in runs):.4f} "
                   f"{name}_last={statistics.mean(r['last'] for r in runs):.4f} "
                   f"{name}_collapsed={sum(bool(r['collapse']) for r in runs)}"
                   for name, runs in results.items()), flush=True)


if __name__ == "__main__":
    main()
