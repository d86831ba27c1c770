"""The quickstart's built-in data (albert_tf/jobs/quickstart.py): a corpus of real English that every Python
installation has, the docstrings of a fixed list of standard-library modules (one document per module, one sentence
per line), and a two-class fine-tuning task built from the same docstrings (does a sentence come from a module
about files and archives or from one about networking and mail?) in SST-2's layout; and a few-label task of the
same kind (which group of modules a docstring sentence comes from: text and data formats, or concurrency, time and
processes) with few training sentences and many dev ones, for measuring fine-tuning when labels are scarce.
"""
import importlib
import inspect
import os
import random
import re

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


def _own_doc(obj):
    """obj's own docstring, cleaned; never one inherited from a base class (inspect.getdoc looks those up, and
    what it finds depends on which other modules the process has imported)."""
    doc = getattr(obj, "__doc__", None)
    return inspect.cleandoc(doc) if isinstance(doc, str) else ""


def _docstrings(module):
    yield _own_doc(module)
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            yield _own_doc(obj)
            if inspect.isclass(obj):
                for attr, member in sorted(vars(obj).items()):
                    if not attr.startswith("_") and inspect.isfunction(member):
                        yield _own_doc(member)


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
    chosen = _distinct_group_sentences([modules for _, modules in TASK_GROUPS])
    rng = random.Random(seed)
    size = min(len(group) for group in chosen)
    rows = [(sentence, label) for label, group in enumerate(chosen) for sentence in rng.sample(group, size)]
    rng.shuffle(rows)
    num_dev = int(round(dev_fraction * len(rows)))
    splits = {"train": rows[num_dev:], "dev": rows[:num_dev]}
    _write_sst2_layout(directory, splits)
    return {split: len(examples) for split, examples in splits.items()}


def _distinct_group_sentences(module_groups):
    """Per group of module names, the sorted distinct sentences of its docstrings (tabs as spaces) that no other
    group's docstrings hold."""
    groups = [{s.replace("\t", " ") for name in names for s in _module_sentences(name)} for names in module_groups]
    shared = set.intersection(*groups)
    return [sorted(group - shared) for group in groups]


def _write_sst2_layout(directory, splits):
    """{split: [(sentence, label)]} as directory/SPLIT.tsv with SST-2's header "sentence<TAB>label"."""
    os.makedirs(directory, exist_ok=True)
    for split, examples in splits.items():
        with open(os.path.join(directory, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            f.writelines(f"{sentence}\t{label}\n" for sentence, label in examples)


# The few-label task (write_few_label_task): label = index in this tuple.
FEW_LABEL_GROUPS = (
    ("re", "string", "textwrap", "difflib", "codecs", "json", "pickle", "struct", "tokenize", "locale", "csv"),
    ("threading", "asyncio.events", "queue", "sched", "selectors", "subprocess", "datetime", "calendar", "timeit",
     "weakref"),
)


def write_few_label_task(directory, per_class=128, seed=0):
    """SST-2's layout holding FEW_LABEL_GROUPS' task: each distinct docstring sentence of the two groups (those in
    both dropped), `per_class` of each class for training and the rest, balanced, for dev (283 per class with this
    Python's standard library), shuffled by `seed`. Returns the directory."""
    chosen = _distinct_group_sentences(FEW_LABEL_GROUPS)
    rng = random.Random(seed)
    size = min(len(group) for group in chosen)
    rows = [[(s, label) for s in rng.sample(group, size)] for label, group in enumerate(chosen)]
    splits = {"train": [r for c in rows for r in c[:per_class]], "dev": [r for c in rows for r in c[per_class:]]}
    for examples in splits.values():
        rng.shuffle(examples)
    _write_sst2_layout(directory, splits)
    return directory
