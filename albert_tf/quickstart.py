"""`albert-tf quickstart`: the whole pipeline on a built-in corpus, as a check that an installation works.

The corpus is real English that every Python installation has: the docstrings of a fixed list of standard-library
modules (one document per module, one sentence per line). The steps are the same commands a user runs:
`albert-tf vocab`, `albert-tf create-data`, `albert-tf pretrain` (with the tiny config), each printed before it runs.
"""
import importlib
import inspect
import os
import re
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


def add_arguments(parser):
    parser.add_argument("--output", default="albert_quickstart", help="working directory")
    parser.add_argument("--steps", type=int, default=300, help="pretraining steps")
    parser.add_argument("--seed", type=int, default=12345)


def run(args):
    from albert_tf import configs_dir, pretrained  # pylint: disable=import-outside-toplevel
    from albert_tf.cli import main as cli_main  # pylint: disable=import-outside-toplevel

    out = os.path.abspath(args.output)
    os.makedirs(out, exist_ok=True)
    corpus = os.path.join(out, "corpus.txt")
    docs, sents = write_builtin_corpus(corpus)
    print(f"[quickstart] built-in corpus: {docs} documents, {sents} sentences from the standard library's "
          f"docstrings → {corpus}", flush=True)
    seq, preds = 128, 20
    config_file, spm_file = os.path.join(out, pretrained.CONFIG_FILE), os.path.join(out, "spm.model")
    steps = [
        ["vocab", "--input", corpus, "--output-prefix", os.path.join(out, "spm"), "--vocab-size", "2000"],
        ["create-data", "--input", corpus, "--spm-model", spm_file,
         "--output", os.path.join(out, "data", "train"), "--num-shards", "2", "--max-seq-length", str(seq),
         "--max-predictions", str(preds), "--dupe-factor", "4", "--seed", str(args.seed)],
        ["pretrain", "--config", config_file,
         "--train-data", os.path.join(out, "data", "train-*"), "--model-dir", os.path.join(out, "model"),
         "--spm-model", spm_file, "--max-seq-length", str(seq), "--max-predictions",
         str(preds), "--train-batch-size", "32", "--learning-rate", "0.002", "--num-train-steps", str(args.steps),
         "--num-warmup-steps", str(max(1, args.steps // 10)), "--steps-per-loop", "25",
         "--save-checkpoints-steps", "100", "--seed", str(args.seed)],
    ]
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel

    AlbertConfig.from_json_file(os.path.join(configs_dir(), "albert_tiny.json")).replace(
        vocab_size=2000).to_json_file(config_file)
    for argv in steps:
        print(f"[quickstart] $ albert-tf {' '.join(argv)}", flush=True)
        start = time.time()
        code = cli_main(argv)
        if code:
            print(f"[quickstart] step 'albert-tf {argv[0]}' failed with exit code {code}", file=sys.stderr)
            return code
        print(f"[quickstart] {argv[0]} done in {time.time() - start:.0f}s", flush=True)
    print(f"[quickstart] done: pretrained-model directory {os.path.join(out, 'model')} "
          "(load it with albert_tf.AlbertPretrainer.from_pretrained)")
    return 0
