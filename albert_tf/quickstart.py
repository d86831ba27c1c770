"""`albert-tf quickstart`: the whole pipeline on a built-in corpus, as a check that an installation works.

The corpus is real English that every Python installation has: the docstrings of a fixed list of standard-library
modules (one document per module, one sentence per line). The steps are the same commands a user runs:
`albert-tf vocab`, `albert-tf create-data`, `albert-tf pretrain` (with the tiny config), then `albert-tf finetune`
on a two-class task built from the same docstrings (does a sentence come from a module about files and archives or
from one about networking and mail?), each printed before it runs; last, one raw-text request is sent through the
fine-tuned export (the SavedModel's `serving_default`, loaded as TF Serving would) and its answer printed.
"""
import importlib
import inspect
import json
import os
import random
import re
import shlex
import sys
import time

# Modules with long, well-written docstrings; fixed so the corpus (and so the run) is deterministic.
_MODULES = (
    "argparse", "collections", "csv", "datetime", "decimal", "difflib", "email.message", "fractions", "functools",
    "heapq", "inspect", "itertools", "json", "logging", "os", "pathlib", "pickle", "random", "re", "shutil",
    "statistics", "string", "subprocess", "tarfile", "textwrap", "threading", "typing", "unittest", "urllib.parse",
    "zipfile", "asyncio.events", "configparser", "contextlib", "dataclasses", "enum", "gzip", "http.client",
    "ipaddress", "numbers", "operator", "optparse", "pprint", "sched", "selectors", "socket", "tempfile",
    "timeit", "tokenize", "traceback", "uuid", "warnings", "weakref", "xml.dom.minidom", "calendar", "codecs",
    "copy", "doctest", "ftplib", "getopt", "glob", "imaplib", "locale", "mailbox", "poplib", "pydoc", "queue",
    "smtplib", "sqlite3", "ssl", "struct", "symtable", "tkinter", "turtle", "wave", "zipimport",
)
# The fine-tuning task: which group of modules a docstring sentence comes from (label = index in this tuple).
TASK_GROUPS = (
    ("files and archives", ("os", "pathlib", "shutil", "tarfile", "zipfile", "gzip", "tempfile", "glob",
                            "zipimport", "csv", "configparser")),
    ("networking and mail", ("smtplib", "imaplib", "poplib", "ftplib", "email.message", "mailbox", "http.client",
                             "ssl", "socket", "urllib.parse")),
)
#: The request sent through the fine-tuned export at the end (not in the corpus).
REQUEST = "Copy the archive to a temporary directory and remove the old files."
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")


def _docstrings(module):
    yield inspect.getdoc(module) or ""
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            yield inspect.getdoc(obj) or ""
            if inspect.isclass(obj):
                for attr, member in sorted(vars(obj).items()):
                    if not attr.startswith("_") and inspect.isfunction(member):
                        yield inspect.getdoc(member) or ""


def _sentences(text):
    for paragraph in re.split(r"\n\s*\n", text):
        raw = [line for line in paragraph.splitlines() if line.strip()]
        lines = [line.strip() for line in raw]
        if any(line[:1].isspace() for line in raw) or any(
                line.startswith((">>>", "...", "|", "+", "-", "*", ":")) for line in lines):
            continue  # code (indented), tables and lists are not prose
        flat = " ".join(line for line in lines if line)
        for sentence in _SENTENCE_END.split(flat):
            if len(sentence.split()) >= 4:
                yield sentence


def write_builtin_corpus(path):
    """Writes the built-in corpus in the original format. Returns (documents, sentences)."""
    docs = sents = 0
    with open(path, "w", encoding="utf-8") as f:
        for name in _MODULES:
            try:
                module = importlib.import_module(name)
            except Exception:  # pylint: disable=broad-except  (e.g. tkinter absent on a minimal Python)
                continue
            lines = [s for doc in _docstrings(module) for s in _sentences(doc)]
            if len(lines) < 4:
                continue
            if docs:
                f.write("\n")
            f.write("\n".join(lines) + "\n")
            docs += 1
            sents += len(lines)
    return docs, sents


def _module_sentences(name):
    try:
        module = importlib.import_module(name)
    except Exception:  # pylint: disable=broad-except  (absent on a minimal Python)
        return []
    return [s for doc in _docstrings(module) for s in _sentences(doc)]


def write_document_task(directory, seed, dev_fraction=0.2):
    """SST-2's layout (train.tsv, dev.tsv: header "sentence<TAB>label") holding the two-class task of TASK_GROUPS:
    each distinct sentence of the groups' docstrings (those in both groups dropped), labelled with its group's
    index; the larger group cut to the smaller one's size (balanced), shuffled by `seed`, the last `dev_fraction`
    held out. Returns {split: number of examples}."""
    groups = [{s.replace("\t", " ") for name in modules for s in _module_sentences(name)}
              for _, modules in TASK_GROUPS]
    shared = set.intersection(*groups)
    rng = random.Random(seed)
    chosen = [sorted(group - shared) for group in groups]
    size = min(len(group) for group in chosen)
    rows = [(sentence, label) for label, group in enumerate(chosen) for sentence in rng.sample(group, size)]
    rng.shuffle(rows)
    num_dev = int(round(dev_fraction * len(rows)))
    splits = {"train": rows[num_dev:], "dev": rows[:num_dev]}
    os.makedirs(directory, exist_ok=True)
    for split, examples in splits.items():
        with open(os.path.join(directory, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            f.writelines(f"{sentence}\t{label}\n" for sentence, label in examples)
    return {split: len(examples) for split, examples in splits.items()}


def ask_export(export_dir, text):
    """One raw-text request through a fine-tuned classifier export, loaded as a server would (a SavedModel's
    serving_default). Returns (label, probabilities list)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import  (its ops)

    serving = tf.saved_model.load(export_dir).signatures["serving_default"]
    outputs = serving(text_a=tf.constant([text]))
    return int(outputs["label"].numpy()[0]), [float(p) for p in outputs["probabilities"].numpy()[0]]


def add_arguments(parser):
    from albert_tf.run_config import add_alias  # pylint: disable=import-outside-toplevel

    parser.add_argument("--output", default="albert_quickstart", help="working directory")
    add_alias(parser, parser.add_argument("--num-train-steps", type=int, default=300, help="pretraining steps"),
              "--steps")
    parser.add_argument("--finetune-epochs", type=int, default=4, help="fine-tuning passes over the task (at batch "
                        "16: a tiny model sits at chance for its first 60-100 steps)")
    parser.add_argument("--seed", type=int, default=12345, help="seeds every step")


def run(args):
    from albert_tf import configs_dir  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints import pretrained  # pylint: disable=import-outside-toplevel
    from albert_tf.text import vocabulary  # pylint: disable=import-outside-toplevel
    from albert_tf.serving.saved_model import latest_version  # pylint: disable=import-outside-toplevel
    from albert_tf.training.finetune import EVAL_RESULTS_FILE  # pylint: disable=import-outside-toplevel

    out = os.path.abspath(args.output)
    os.makedirs(out, exist_ok=True)
    corpus = os.path.join(out, "corpus.txt")
    docs, sents = write_builtin_corpus(corpus)
    print(f"[quickstart] built-in corpus: {docs} documents, {sents} sentences from the standard library's "
          f"docstrings → {corpus}", flush=True)
    seq, preds = 128, 20
    config_file, spm_file = os.path.join(out, pretrained.CONFIG_FILE), os.path.join(out, vocabulary.SPM_FILE)
    steps = [
        ["vocab", "--input", corpus, "--output-prefix", os.path.join(out, "spm"), "--vocab-size", "2000"],
        ["create-data", "--input", corpus, "--spm-model", spm_file,
         "--output", os.path.join(out, "data", "train"), "--num-shards", "2", "--max-seq-length", str(seq),
         "--max-predictions", str(preds), "--dupe-factor", "4", "--seed", str(args.seed)],
        ["pretrain", "--config", config_file,
         "--train-data", os.path.join(out, "data", "train-*"), "--model-dir", os.path.join(out, "model"),
         "--spm-model", spm_file, "--max-seq-length", str(seq), "--max-predictions",
         str(preds), "--batch-size", "32", "--learning-rate", "0.002", "--num-train-steps", str(args.num_train_steps),
         "--num-warmup-steps", str(max(1, args.num_train_steps // 10)), "--steps-per-loop", "25",
         "--save-checkpoints-steps", "100", "--seed", str(args.seed)],
    ]
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel

    AlbertConfig.from_json_file(os.path.join(configs_dir(), "albert_tiny.json")).replace(
        vocab_size=2000).to_json_file(config_file)
    for argv in steps:
        code = _step(argv)
        if code:
            return code
    print(f"[quickstart] pretrained-model directory {os.path.join(out, 'model')} "
          "(load it with albert_tf.AlbertPretrainer.from_pretrained)", flush=True)

    # ---- fine-tune a classifier on a task built from the same docstrings, then ask its export one question
    task_dir, finetune_dir = os.path.join(out, "task"), os.path.join(out, "finetune")
    sizes = write_document_task(task_dir, args.seed)
    names = [name for name, _ in TASK_GROUPS]
    print(f"[quickstart] fine-tuning task: which modules' docstrings a sentence comes from (0 = {names[0]}, "
          f"1 = {names[1]}), balanced: {sizes['train']} train / {sizes['dev']} dev sentences in SST-2's layout "
          f"→ {task_dir}", flush=True)
    print("[quickstart] note: a model pretrained for a few hundred steps maps most inputs to nearly the same output; "
          "fine-tune notices it and resets the encoder's biases, as expected here", flush=True)
    code = _step(["finetune", "--task", "sst2", "--data-dir", task_dir, "--init", os.path.join(out, "model"),
                  "--output", finetune_dir, "--epochs", str(args.finetune_epochs), "--batch-size", "16",
                  "--max-seq-length", "64", "--learning-rate", "0.001", "--warmup-proportion", "0.1",
                  "--classifier-dropout", "0.0", "--seed", str(args.seed), "--collapsed-init", "reset-biases",
                  # lr 1e-3 was tuned with Keras AdamW (README's figures); the original's optimizer takes 3-6x
                  # larger early steps and at 1e-3 leaves some seeds at chance (docs/fine-tuning-quality.md)
                  "--optimizer", "adamw-keras"])
    if code:
        return code
    with open(os.path.join(finetune_dir, EVAL_RESULTS_FILE), encoding="utf-8") as f:
        results = json.load(f)
    export_base = os.path.join(finetune_dir, "export")
    export_dir = latest_version(export_base)
    print(f"[quickstart] dev accuracy {results['dev']['accuracy']:.4f} (chance 0.5, best epoch "
          f"{results['epoch']}); fine-tuned export {export_dir}", flush=True)
    label, probabilities = ask_export(export_dir, REQUEST)
    print(f"[quickstart] request through the export's serving_default: text_a={REQUEST!r} → label {label} "
          f"({names[label]}), probabilities [{', '.join(f'{p:.4f}' for p in probabilities)}]", flush=True)
    print(f"[quickstart] done: pretrained model {os.path.join(out, 'model')}, fine-tuned classifier "
          f"{os.path.join(finetune_dir, 'best')}, its raw-text export {export_dir}", flush=True)
    for line in next_steps(export_base):
        print(f"[quickstart] {line}", flush=True)
    return 0


# The "your own corpus" steps: albert_base at 128 tokens (create-data's and pretrain's 20 predictions), the batch
# this machine holds (at most NEXT_BATCH), the learning rate square-root scaled to it, NEXT_STEPS steps.
NEXT_CONFIG, NEXT_SEQ, NEXT_BATCH, NEXT_STEPS = "albert_base", 128, 256, 10000


def own_corpus_steps(memory=None):
    """The commands of "next: your own corpus", as argv lists: the vocabulary sized from the corpus (`--vocab-size
    auto`), records, pretraining with the config's vocab_size taken from that vocabulary (`--set vocab_size=auto`)
    at the largest power-of-two batch that `memory` bytes (default: this machine's) hold by pretrain's own rule
    (albert_tf.training.plan.host_batch_that_fits, for the largest vocabulary `auto` picks), then an export."""
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.data.vocab import AUTO_LARGEST  # pylint: disable=import-outside-toplevel
    from albert_tf.training import plan  # pylint: disable=import-outside-toplevel

    largest = AlbertConfig.from_preset(NEXT_CONFIG).replace(vocab_size=AUTO_LARGEST)
    batch = max(1, plan.host_batch_that_fits(largest, NEXT_SEQ, 20, total=memory, largest=NEXT_BATCH))
    return [
        ["vocab", "--input", "corpus/*.txt", "--output-prefix", "work/spm", "--vocab-size", "auto"],
        ["create-data", "--input", "corpus/*.txt", "--spm-model", "work/spm.model", "--output", "work/data/train",
         "--max-seq-length", str(NEXT_SEQ)],
        ["pretrain", "--config", NEXT_CONFIG, "--set", "vocab_size=auto", "--spm-model", "work/spm.model",
         "--train-data", "work/data/train-*", "--model-dir", "work/model", "--max-seq-length", str(NEXT_SEQ),
         "--batch-size", str(batch), "--learning-rate", f"{plan.learning_rate_for(batch):.2g}",
         "--num-train-steps", str(NEXT_STEPS), "--num-warmup-steps", str(NEXT_STEPS // 10)],
        ["export", "--model", "work/model", "--output", "work/export"],
    ]


def next_steps(export_base, memory=None):
    """The closing lines: serve the export, run on your own corpus, fine-tune a GLUE task (commands pasteable)."""
    mount = shlex.quote(f"{export_base}:/models/albert")
    corpus = own_corpus_steps(memory)
    batch = corpus[2][corpus[2].index("--batch-size") + 1]
    return [
        "next: serve the export with TF Serving (REST on 8501, gRPC on 8500):",
        f"  docker run -p 8500:8500 -p 8501:8501 -v {mount} -e MODEL_NAME=albert tensorflow/serving:2.20.0 "
        "--enable_model_warmup=true",
        "next: your own corpus (text files, one sentence per line, a blank line between documents); batch "
        f"{batch} is what this machine's memory holds for {NEXT_CONFIG} at {NEXT_SEQ} tokens (`albert-tf plan "
        "--topology cpu` shows the plan), its learning rate square-root scaled from the paper's:",
        *("  " + shlex.join(["albert-tf", *argv]) for argv in corpus),
        "next: fine-tune a GLUE task (the task folder as downloaded, e.g. SST-2):",
        "  " + shlex.join(["albert-tf", "finetune", "--task", "sst2", "--data-dir", "glue/SST-2", "--init",
                           "work/model", "--output", "work/sst2"]),
    ]


def _step(argv):
    """Runs one `albert-tf` command in this process, printed first; returns its exit code."""
    from albert_tf.cli import main as cli_main  # pylint: disable=import-outside-toplevel

    print(f"[quickstart] $ {shlex.join(['albert-tf', *argv])}", flush=True)
    start = time.time()
    code = cli_main(argv)
    if code:
        print(f"[quickstart] step 'albert-tf {argv[0]}' failed with exit code {code}", file=sys.stderr)
        return code
    print(f"[quickstart] {argv[0]} done in {time.time() - start:.0f}s", flush=True)
    return 0
