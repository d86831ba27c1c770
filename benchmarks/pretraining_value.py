"""Does pretraining help? Pretrain an ALBERT with `--recipe cpu_small` on the Linux kernel's documentation, then
compare it with the same config from a random init, a bag of words and word vectors learned from the same corpus,
on an 8-way classification of passages from Python's library reference, at 32 to 2048 labels.

    python benchmarks/pretraining_value.py                  # the full run: about an hour of pretraining, then the arms
    python benchmarks/pretraining_value.py --quick          # a tiny config on a 1 MB corpus slice
    python benchmarks/pretraining_value.py --init MODEL_DIR # evaluate an existing pretraining run (its steps/ too)
    python benchmarks/pretraining_value.py --set num_hidden_layers=4 --pretrain-steps 3700  # another model, an hour
    python benchmarks/pretraining_value.py --lever mask25 --pretrain-steps 1650 --work-dir W  # one lever (LEVERS) at a
                                                            # quarter of the recipe's tokens: docs/pretraining.md

Install first: `apt-get install linux-doc-6.12 python3-doc` (any linux-doc version; nothing is downloaded at run
time; `--corpus-dir DIR` and `--task-dir DIR` read other copies).

Corpus: the .rst and .txt files (gzipped) under /usr/share/doc/linux-doc-*/Documentation except translations/
(not English): their prose split into sentences, then the lines of the code, literal and table bodies that hold
words (`corpus_lines`); titles and markup dropped; one line per sentence, one document per file: 21 MB from
linux-doc-6.12.

Task: passages (two consecutive prose sentences) of the modules documented in Python's library reference
(python3-doc's _sources/library), labelled by which group of chapters of the reference's own table of contents
(library/index) the module's chapter belongs to: 8 groups (GROUPS). The labels come from the reference's editors,
not from the corpus; no task document is in the corpus (another project's documentation), and any passage that
also occurs in the corpus is dropped. Train and dev passages come from different module files (a seeded 30 % of
each group's files is dev), so a module's own vocabulary does not carry across.

Arms, each at 32, 128, 512 and 2048 labelled passages (balanced; the same passages and, for the two ALBERT arms,
the same batches), over --seeds seeds (which labels are drawn, head init, order):
  pretrained / random: the cpu_small ALBERT from its pretraining / from a random init of the same config, as frozen
    features (a linear probe: logistic regression on the mean-pooled sequence output, at each of the checkpoints
    at 1/8, 1/4, 1/2 and all of the run; at the last, also on every block's mean-pooled output side by side,
    "probe, all blocks", and on the mean of the passage's rows of the word-embedding table, "probe, word
    embeddings") and fine-tuned (the classifier on the pooled output, the last checkpoint; at 128 labels
    unless --finetune-labels: a fine-tuning run costs ~30 s on 2 cores, a probe well under one);
  bag_of_words: logistic regression on binary word features;
  distributional: logistic regression on averaged PPMI-SVD word vectors learned from the same corpus (what the
    corpus offers a model that only counts co-occurrences).
Hyperparameters (the logistic regressions' L2, the fine-tuning learning rate) are chosen on a stratified quarter of
the training labels, trained on the rest; the chosen value is refitted on all of them (`--probe-folds K`: the L2 by
stratified K-fold cross-validation over all of them instead; `--l2-grid`: other penalties). Dev is only ever scored.

Prints the pretraining's wall time (recorded in WORK/pretraining_time.json, so that --init of that run prints it),
a table (mean ± std over seeds; paired pretrained − random per seed) and, last:
  labels=128 pretrained=A random=B bag_of_words=C distributional=D min_paired_gain=E probe_min_gain=F probe_128=G
  bow_128=H probe_512=I bow_512=J
(fine-tuned means at 128 labels, the linear probes' with --no-finetune; the baselines' are their probes; E the
smallest per-seed pretrained − random; F the same of the frozen features' probe; G-J the probe's and the bag of
words' means at 128 and 512 labels, nan when that count was not run). Deterministic given the seeds on one machine.
"""
import argparse
import glob
import gzip
import json
import math
import os
import random
import re
import tempfile
import time

import common

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ start-up lines, not the benchmark's output
CORPUS_GLOB = "/usr/share/doc/linux-doc-*/Documentation"
TASK_GLOB = "/usr/share/doc/python3*/html/_sources/library"
INSTALL = "apt-get install linux-doc-6.12 python3-doc"
LABELS = (32, 128, 512, 2048)
# The task's classes: groups of the chapters of Python's library reference (library/index's table of contents);
# the chapters not listed (built-in functions, types and exceptions, superseded modules) are left out.
GROUPS = (
    ("text and binary data", ("text", "binary", "i18n")),
    ("data types, numbers and functions", ("datatypes", "numeric", "functional")),
    ("files, storage and file formats", ("filesys", "persistence", "archiving", "fileformats", "crypto")),
    ("operating system and concurrency", ("allos", "concurrency", "unix", "windows")),
    ("networking, internet data and markup", ("ipc", "netdata", "internet", "markup")),
    ("multimedia, interfaces and frameworks", ("mm", "tk", "frameworks")),
    ("development and debugging", ("development", "debug", "distribution")),
    ("the Python runtime and language", ("python", "custominterp", "modules", "language")),
)
DEV_FRACTION = 0.3
TASK_SEQ = 64
TIME_RECORD = "pretraining_time.json"  # written beside the model dir: {"seconds", "steps", loads, CPU}
_WORD = re.compile(r"\w+")
# Directives whose body is code or markup, not prose (their indented body is dropped with them).
SKIPPED_DIRECTIVES = {
    "code-block", "code", "sourcecode", "doctest", "testcode", "testoutput", "testsetup", "testcleanup",
    "productionlist", "index", "highlight", "literalinclude", "toctree", "image", "figure", "raw", "csv-table",
    "list-table", "table", "math", "include", "module", "moduleauthor", "sectionauthor", "tabularcolumns",
    "only", "audit-event", "program", "currentmodule", "default-role", "rubric", "c:namespace", "opcode",
    # the kernel's own (sphinx extensions): generated API text, tables, ABI and feature listings
    "kernel-doc", "kernel-abi", "kernel-feat", "kernel-include", "flat-table", "cssclass", "c:function", "c:type",
    "c:macro", "c:struct", "c:union", "c:enum", "c:member", "c:var", "kernel-figure", "kernel-render", "graphviz",
    "parsed-literal", "maintainers-include", "glossary", "contents",
}
_DIRECTIVE = re.compile(r"\.\.\s+(?:\|[^|]+\|\s+)?([\w:-]+)::")
_UNDERLINE = re.compile(r"([=\-~^*+#\"'`.:_])\1{2,}")
_TABLE = re.compile(r"[=\-+|\s]+")
_FIELD = re.compile(r":[\w .()-]+:(\s|$)")
_BULLET = re.compile(r"([*\-+]|#\.|\d+\.|\(\d+\)|[a-z]\.)\s+")
_ROLE = re.compile(r":[\w:+-]+:`([^`]*)`")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"])")


# ------------------------------------------------------------------------------------------ reading reStructuredText
def _role_text(match):
    """`:func:`~os.path.join`` → join; `:ref:`text <label>`` → text."""
    text = match.group(1)
    text = text.split("<")[0].strip() if "<" in text and text.endswith(">") else text
    if text.startswith("~"):
        text = text[1:].split(".")[-1]
    return text.lstrip("!")


def clean_inline(text):
    """reStructuredText inline markup → plain text (roles, literals, emphasis, links, substitutions)."""
    text = _ROLE.sub(_role_text, text)
    text = re.sub(r"``([^`]*)``", r"\1", text)
    text = re.sub(r"`([^`<]*?)\s*(<[^>]*>)?`_{1,2}", r"\1", text)
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*", lambda m: m.group(1) or m.group(2), text)
    text = re.sub(r"\|[\w -]+\|_?", "", text)
    text = text.replace("\\ ", "").replace("\\", "")
    return " ".join(text.split())


def rst_paragraphs(text, skipped=None):
    """The prose paragraphs of one .rst file, each a string of the joined lines (markup not yet cleaned). The
    non-empty lines of the bodies dropped (code, literal blocks, tables, comments) go to `skipped` (a list) if given."""
    paragraphs, current, skip_indent = [], [], None

    def flush():
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if skip_indent is not None:
            if not stripped or indent > skip_indent:
                if stripped and skipped is not None:
                    skipped.append(stripped)
                continue
            skip_indent = None
        if not stripped:
            flush()
            continue
        if stripped.startswith(".."):
            flush()
            directive = _DIRECTIVE.match(stripped)
            if directive is None or directive.group(1) in SKIPPED_DIRECTIVES:
                skip_indent = indent  # a comment or a code/markup directive: its body goes with it
            continue
        if _UNDERLINE.fullmatch(stripped):  # a title's underline (or overline): the title is no sentence
            if current and len(current) == 1:
                current.clear()
            flush()
            continue
        if _TABLE.fullmatch(stripped) or stripped.startswith((">>>", "...", "|", "+-", "+=")) or \
                _FIELD.match(stripped):
            flush()
            continue
        if stripped.endswith("::"):  # the literal block that follows is code
            current.append(stripped[:-2].rstrip() + (":" if stripped[:-2].strip() else ""))
            flush()
            skip_indent = indent
            continue
        bullet = _BULLET.match(stripped)
        if bullet:
            flush()
            stripped = stripped[bullet.end():]
        current.append(stripped)
    flush()
    return paragraphs


def sentences(paragraph):
    """The sentences of a paragraph (markup cleaned) that read as prose: 4 to 80 words, mostly letters."""
    out = []
    for sentence in _SENTENCE_END.split(clean_inline(paragraph)):
        words = sentence.split()
        letters = sum(c.isalpha() for c in sentence)
        if 4 <= len(words) <= 80 and letters >= 0.6 * len(sentence) and sentence[-1:] in ".!?:)\"":
            out.append(sentence)
    return out



def read_text(path):
    """A text file's content, gunzipped when it ends in .gz."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        return f.read()


def document_sentences(path):
    """The prose sentences of one reStructuredText file (see `sentences`)."""
    return [s for p in rst_paragraphs(read_text(path)) for s in sentences(p)]


def _wordy(line, min_words):
    return len(line.split()) >= min_words and sum(c.isalpha() for c in line) >= 0.5 * len(line)


def corpus_lines(path):
    """The pretraining text of one documentation file: its prose split into sentences of at least 3 words (no
    ending required: list items and headings of prose count), then the lines of the bodies the prose reader drops
    (literal blocks, code, tables) that have at least 2 words, both only where half the characters are letters."""
    skipped = []
    prose = [s for p in rst_paragraphs(read_text(path), skipped) for s in _SENTENCE_END.split(clean_inline(p))
             if _wordy(s, 3)]
    return prose + [line for line in skipped if _wordy(line, 2)]


# ------------------------------------------------------------------------------------------ the corpus
def find_dir(flag, pattern, what):
    """`flag`, else the newest match of `pattern`; exits with one line naming the install command when absent."""
    found = [flag] if flag else sorted(glob.glob(pattern))[-1:]
    if not found or not os.path.isdir(found[0]):
        raise SystemExit(f"pretraining_value: error: no {what} at {flag or pattern}; install it with `{INSTALL}` "
                         f"(or give {'--corpus-dir' if 'corpus' in what else '--task-dir'} DIR)")
    return found[0]


def corpus_files(corpus_dir):
    """The .rst and .txt files (gzipped or not) under corpus_dir, sorted, without translations/ (not English)."""
    paths = [p for pattern in ("*.rst.gz", "*.rst", "*.txt.gz", "*.txt")
             for p in glob.glob(os.path.join(corpus_dir, "**", pattern), recursive=True)]
    return sorted(p for p in paths if "translations" not in os.path.relpath(p, corpus_dir).split(os.sep))


def write_corpus(corpus_dir, path, max_bytes=None):
    """The corpus in the original format (one sentence per line, a blank line between documents) at `path`: the
    corpus_lines of corpus_files(corpus_dir), in order, up to max_bytes (None: all). Returns (documents, lines,
    bytes)."""
    documents = count = 0
    with open(path, "w", encoding="utf-8") as f:
        for source in corpus_files(corpus_dir):
            lines = corpus_lines(source)
            if len(lines) < 2:
                continue
            f.write("\n".join(lines) + "\n\n")
            documents, count = documents + 1, count + len(lines)
            if max_bytes and f.tell() >= max_bytes:
                break
    return documents, count, os.path.getsize(path)


def read_corpus_sentences(path):
    """[[sentence, ...] per document] of a corpus file written by `write_corpus`."""
    with open(path, encoding="utf-8") as f:
        return [block.splitlines() for block in f.read().split("\n\n") if block.strip()]


def normalized(sentence):
    """A sentence's comparison key: its lower-cased words."""
    return " ".join(_WORD.findall(sentence.lower()))


# ------------------------------------------------------------------------------------------ the task
def toctree_entries(text):
    """The document names a reStructuredText file's toctree directives list (without .rst), in order."""
    entries, inside = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(".. toctree::"):
            inside = True
        elif inside and stripped and not line[:1].isspace():
            inside = False
        elif inside and stripped and not stripped.startswith(":"):
            entries.append(re.sub(r"\.rst$", "", stripped.split("<")[-1].rstrip(">").strip()))
    return entries


def module_documents(library_dir, per_passage=2):
    """{label: [(module file name, [passages])]} of GROUPS, read through library/index's table of contents: each
    chapter in GROUPS, each module file its toctree lists (a file listed twice is kept in its first group); a
    passage is `per_passage` consecutive prose sentences of the file."""
    chapters = set(toctree_entries(read_text(os.path.join(library_dir, "index.rst.txt"))))
    seen, out = set(), {}
    for label, (_, names) in enumerate(GROUPS):
        out[label] = []
        for chapter in names:
            if chapter not in chapters:
                continue
            for module in toctree_entries(read_text(os.path.join(library_dir, f"{chapter}.rst.txt"))):
                path = os.path.join(library_dir, f"{module}.rst.txt")
                if module in seen or not os.path.exists(path):
                    continue
                seen.add(module)
                lines = document_sentences(path)
                out[label].append((module, [" ".join(lines[i:i + per_passage])
                                            for i in range(0, len(lines), per_passage)]))
    return out


def build_task(documents, corpus_keys, seed, dev_fraction=DEV_FRACTION, dev_per_class=250):
    """The task from module_documents' {label: [(name, sentences)]}: {"pool": [(sentence, label)], "dev": [...],
    "dropped": number of sentences left out}.

    A sentence is left out when its key (`normalized`) is in `corpus_keys` (the corpus holds it), is in more than
    one class, or has fewer than 5 words; repeats are kept once. Each class's files are shuffled (seeded) and dealt
    to dev until it holds dev_fraction of the class's sentences, the rest to the training pool: no file on both
    sides. Dev keeps at most dev_per_class sentences per class (a seeded draw)."""
    rng = random.Random(seed)
    owners = {}
    for label, docs in documents.items():
        for _, lines in docs:
            for s in lines:
                owners.setdefault(normalized(s), set()).add(label)
    pool, dev, dropped, kept = [], [], 0, set()
    for label in sorted(documents):
        docs = sorted(documents[label])
        rng.shuffle(docs)
        sides = {"dev": [], "train": []}
        total = sum(len(lines) for _, lines in docs)
        for _, lines in docs:
            side = "dev" if len(sides["dev"]) < dev_fraction * total else "train"
            for s in lines:
                key = normalized(s)
                if key in corpus_keys or len(owners[key]) > 1 or len(key.split()) < 5 or key in kept:
                    dropped += 1
                    continue
                kept.add(key)
                sides[side].append((s, label))
        pool += sides["train"]
        dev += rng.sample(sides["dev"], min(dev_per_class, len(sides["dev"])))
    return {"pool": pool, "dev": dev, "dropped": dropped}


def sample_labels(pool, count, seed, classes=len(GROUPS)):
    """`count` labelled examples from pool [(text, label)], count // classes of each class (a draw seeded by seed
    and count); fewer of a class that has fewer. Returns [(text, label)] in a seeded order."""
    rng = random.Random(f"{seed}:{count}")
    by_class = {c: [x for x in pool if x[1] == c] for c in range(classes)}
    chosen = [x for c in range(classes) for x in rng.sample(by_class[c], min(count // classes, len(by_class[c])))]
    rng.shuffle(chosen)
    return chosen


def selection_split(examples, fraction=0.25):
    """(fit, select) of labelled examples [(text, label)]: of each class, the last `fraction` (at least one, when
    the class has two or more) selects; the rest fits. Order kept."""
    select = set()
    for label in sorted({y for _, y in examples}):
        rows = [i for i, (_, y) in enumerate(examples) if y == label]
        take = max(1, round(fraction * len(rows))) if len(rows) > 1 else 0
        select.update(rows[len(rows) - take:])
    return ([x for i, x in enumerate(examples) if i not in select],
            [x for i, x in enumerate(examples) if i in select])


# ------------------------------------------------------------------------------------------ linear models (numpy)
def fit_softmax(x, y, classes, l2, steps=300):
    """Multinomial logistic regression with an L2 penalty (not on the bias): weights [D + 1, classes] minimizing
    mean cross-entropy + l2/2·|W|², by Nesterov-accelerated gradient descent with the step 1/L (L bounds the
    gradient's Lipschitz constant: the largest eigenvalue of XᵀX/n, halved, plus l2)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    x = np.hstack([x, np.ones([len(x), 1])])
    onehot = np.eye(classes)[np.asarray(y)]
    v = np.ones(x.shape[1]) / math.sqrt(x.shape[1])
    for _ in range(30):  # power iteration for the largest eigenvalue of XᵀX/n
        v = x.T @ (x @ v) / len(x)
        top = np.linalg.norm(v)
        v /= top
    step = 1.0 / (0.5 * top + l2)
    w = np.zeros([x.shape[1], classes])
    previous = w
    penalty = np.ones([x.shape[1], 1])
    penalty[-1] = 0.0
    for k in range(steps):
        z = w + (k / (k + 3)) * (w - previous)
        logits = x @ z
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        previous, w = w, z - step * (x.T @ (p - onehot) / len(x) + l2 * penalty * z)
    return w


def softmax_accuracy(w, x, y):
    import numpy as np  # pylint: disable=import-outside-toplevel

    return float(((np.hstack([x, np.ones([len(x), 1])]) @ w).argmax(1) == np.asarray(y)).mean())


L2_GRID = (1e-4, 1e-3, 1e-2, 1e-1)


def selection_folds(labels, folds):
    """Stratified `folds`-fold cross-validation over examples with these labels: [(fit rows, select rows)], fold f
    selecting every folds-th example of each class from its f-th, in order."""
    by_class = {c: [i for i, y in enumerate(labels) if y == c] for c in sorted(set(labels))}
    splits = []
    for f in range(folds):
        select = {i for rows in by_class.values() for i in rows[f::folds]}
        splits.append(([i for i in range(len(labels)) if i not in select], sorted(select)))
    return splits


def linear_probe(features, fit, select, dev, classes=len(GROUPS), grid=L2_GRID, folds=1):
    """Dev accuracy of logistic regression on features(texts) → [N, D]: the L2 of `grid` with the best selection
    accuracy (folds=1: trained on fit, scored on select; K ≥ 2: the mean over K stratified folds of fit + select),
    refitted on fit + select. Features are centred and scaled by the training examples' statistics. Returns
    (accuracy, chosen L2)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    train = fit + select
    x_train, x_dev = features([t for t, _ in train]), features([t for t, _ in dev])
    mean, scale = x_train.mean(0), x_train.std(0) + 1e-6
    x_train, x_dev = (x_train - mean) / scale, (x_dev - mean) / scale
    y_train = np.array([y for _, y in train])
    splits = ([(list(range(len(fit))), list(range(len(fit), len(train))))] if folds == 1
              else selection_folds(list(y_train), folds))
    scores = [np.mean([softmax_accuracy(fit_softmax(x_train[a], y_train[a], classes, l2), x_train[b], y_train[b])
                       for a, b in splits]) for l2 in grid]
    best = grid[max(range(len(grid)), key=lambda i: (scores[i], i))]  # ties: the stronger penalty
    return softmax_accuracy(fit_softmax(x_train, y_train, classes, best), x_dev, [y for _, y in dev]), best


def words(text):
    return _WORD.findall(text.lower())


def bag_of_words_features(train_texts):
    """features(texts) → binary word indicators over the words of train_texts."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    vocab = {w: i for i, w in enumerate(sorted({w for t in train_texts for w in words(t)}))}

    def features(texts):
        x = np.zeros([len(texts), len(vocab)], np.float64)
        for row, text in enumerate(texts):
            x[row, [vocab[w] for w in set(words(text)) if w in vocab]] = 1.0
        return x

    return features


# ------------------------------------------------------------------------------------------ PPMI-SVD word vectors
def cooccurrence(sentences_of_ids, vocab_size, window):
    """[V, V] counts of word j within `window` words of word i in the same sentence (both directions; ids < 0,
    out-of-vocabulary words, take their place in the distance but are not counted)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    pad = [-1] * window
    ids = np.array([i for s in sentences_of_ids for i in pad + list(s)] + pad, np.int64)
    counts = np.zeros(vocab_size * vocab_size, np.float64)
    for d in range(1, window + 1):
        a, b = ids[:-d], ids[d:]
        ok = (a >= 0) & (b >= 0)
        counts += np.bincount(a[ok] * vocab_size + b[ok], minlength=vocab_size * vocab_size)
        counts += np.bincount(b[ok] * vocab_size + a[ok], minlength=vocab_size * vocab_size)
    return counts.reshape(vocab_size, vocab_size)


def ppmi(counts, alpha=0.75):
    """Positive PMI of a [V, C] count matrix: max(0, log P(w,c) / (P(w)·Pα(c))), the context distribution raised
    to `alpha` (Levy et al. 2015's smoothing; 1: none). Cells with no count are 0."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    total = counts.sum()
    p_word = counts.sum(1, keepdims=True) / total
    context = counts.sum(0, keepdims=True) ** alpha
    p_context = context / context.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(counts / total / (p_word * p_context))
    return np.where(counts > 0, np.maximum(pmi, 0.0), 0.0)


def truncated_svd(matrix, dim, seed, power_iterations=4, oversample=10):
    """(U [V, dim], S [dim]) of a randomized SVD (Halko et al. 2011: a range finder with power iterations)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(matrix @ rng.standard_normal([matrix.shape[1], dim + oversample]))
    for _ in range(power_iterations):
        q, _ = np.linalg.qr(matrix.T @ q)
        q, _ = np.linalg.qr(matrix @ q)
    u, s, _ = np.linalg.svd(q.T @ matrix, full_matrices=False)
    return (q @ u)[:, :dim], s[:dim]


def ppmi_svd_vectors(documents, vocab_size=10000, window=4, dim=128, seed=0):
    """({word: row}, vectors [V, dim]): U·√S of the PPMI of the corpus' co-occurrences (documents: [[sentence]]),
    over its vocab_size most frequent words (ties by the word)."""
    from collections import Counter  # pylint: disable=import-outside-toplevel

    tokenized = [words(s) for doc in documents for s in doc]
    frequency = Counter(w for s in tokenized for w in s)
    vocab = {w: i for i, (w, _) in enumerate(sorted(frequency.items(), key=lambda kv: (-kv[1], kv[0]))[:vocab_size])}
    ids = [[vocab.get(w, -1) for w in s] for s in tokenized]
    u, s = truncated_svd(ppmi(cooccurrence(ids, len(vocab), window)), min(dim, len(vocab) - 1), seed)
    return vocab, u * s ** 0.5


def distributional_features(vocab, vectors):
    """features(texts) → the mean of the texts' in-vocabulary word vectors (zeros when none)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    def features(texts):
        x = np.zeros([len(texts), vectors.shape[1]])
        for row, text in enumerate(texts):
            rows = [vocab[w] for w in words(text) if w in vocab]
            if rows:
                x[row] = vectors[rows].mean(0)
        return x

    return features


# ------------------------------------------------------------------------------------------ pretraining
PRESET = "albert_base"  # pretrain's --config: the recipe's model (and QUICK_MODEL) sets every size over it
QUICK_MODEL = {"vocab_size": 1000, "embedding_size": 32, "hidden_size": 64, "num_hidden_layers": 2,
               "num_attention_heads": 2, "intermediate_size": 128, "max_position_embeddings": 64}


def _step(argv):
    """Runs one `albert-tf` command in this process, printed first; exits on failure. Returns its seconds."""
    from albert_tf.cli import main as cli_main  # pylint: disable=import-outside-toplevel

    print(f"$ albert-tf {' '.join(argv)}", flush=True)
    started = time.monotonic()
    code = cli_main(argv)
    if code:
        raise SystemExit(f"pretraining_value: error: `albert-tf {argv[0]}` failed with exit code {code}")
    seconds = time.monotonic() - started
    print(f"  ({argv[0]}: {seconds:.0f}s)", flush=True)
    return seconds


def _recipe():
    """`--recipe cpu_small`'s values (albert_tf.settings.pretrain_config.RECIPES)."""
    from albert_tf.settings.pretrain_config import RECIPES  # pylint: disable=import-outside-toplevel

    return RECIPES["cpu_small"]["values"]


# Levers of quality per compute (docs/pretraining.md "What each lever buys"): each an arm of pretrain flags over
# the recipe, trained on the tokens of the recipe's run of --pretrain-steps steps (the same step cost, hence the
# same wall time, except for the phases and the ramp: a step at 32, or of a smaller batch, costs less). "recipe" is
# the recipe itself; "wsd-..." are combinations over wsd, the lever that won at a quarter of the tokens.
_WSD = ("--schedule", "wsd", "--decay-start", "0.8", "--decay-length", "0.2")
_PHASES = ("--phases", "32:0.9,64:0.1")
_RAMP = ("--phases", "64:0.25:{quarter},64:0.25:{half},64:0.5")  # a batch-size ramp: B/4, B/2, then B
LEVERS = {
    "recipe": (),
    "linear": ("--schedule", "linear"),
    "one-cycle": ("--schedule", "one-cycle"),
    "wsd": _WSD,
    "mask25": ("--masked-lm-prob", "0.25", "--max-predictions", "16"),
    "mask30": ("--masked-lm-prob", "0.3", "--max-predictions", "20"),
    "phases": _PHASES,
    "no-sop": ("--sop-weight", "0"),
    "wsd-ramp": _WSD + _RAMP,
    "wsd-phases": _WSD + _PHASES,
}
SEQ = 64  # the recipe's sequence length (create-data's records)


def lever_flags(lever, batch):
    """The lever's pretrain flags for a run of global batch `batch` ({quarter} and {half} of it filled in)."""
    return [word.format(quarter=batch // 4, half=batch // 2) for word in LEVERS[lever]]


def lever_phases_text(lever, batch):
    """The lever's --phases text, or None."""
    flags = lever_flags(lever, batch)
    return flags[flags.index("--phases") + 1] if "--phases" in flags else None


def lever_phases(lever, batch):
    """The lever run's phases ([albert_tf.settings.run_length.Phase]): its --phases, else one phase at SEQ."""
    from albert_tf.settings.run_length import phases_or_one  # pylint: disable=import-outside-toplevel

    return phases_or_one(lever_phases_text(lever, batch), SEQ)


def lever_steps(lever, steps, batch):
    """The steps of the lever's run on the tokens of `steps` recipe steps (batch x SEQ each): the fewest whose
    tokens reach them (albert_tf.settings.run_length.steps_for_tokens, as pretrain's --budget-tokens decides;
    `steps` itself without --phases)."""
    from albert_tf.settings.run_length import steps_for_tokens  # pylint: disable=import-outside-toplevel

    return steps_for_tokens(lever_phases(lever, batch), steps * batch * SEQ, batch)


def tokens_at(lever, step, batch):
    """Pretraining tokens after `step` steps of the lever's run (albert_tf.settings.run_length.tokens_of)."""
    from albert_tf.settings.run_length import tokens_of  # pylint: disable=import-outside-toplevel

    return tokens_of(lever_phases(lever, batch), step, batch)


def batch_size(quick):
    """The pretraining's global batch: the recipe's, --quick 32."""
    return 32 if quick else _recipe()["batch_size"]


def model_dir_of(work, lever):
    """WORK/model for the recipe, WORK/model-LEVER for a lever."""
    return os.path.join(work, "model" if lever == "recipe" else f"model-{lever}")


def pretraining_argv(work, steps, quick, seed, sets=(), lever="recipe"):
    """`albert-tf pretrain --recipe cpu_small` for `steps` steps: the recipe's warm-up share (412 of 6600) and a
    kept step checkpoint at every eighth of the run (MODEL_DIR/steps/); --quick: QUICK_MODEL, batch 32; `sets`
    ("KEY=VALUE" strings) go to pretrain's --set after the recipe's model (and QUICK_MODEL), so they win. A `lever`
    (LEVERS) adds its flags; with --phases the run is --budget-tokens of `steps` recipe steps, its shorter phase's
    records WORK/data32/ (`pretrain` makes them)."""
    recipe = _recipe()
    batch = batch_size(quick)
    total = lever_steps(lever, steps, batch)
    warmup = max(1, round(total * recipe["num_warmup_steps"] / recipe["num_train_steps"]))
    length = ["--num-train-steps", str(steps)] if lever_phases_text(lever, batch) is None else [
        "--budget-tokens", str(steps * batch * SEQ),
        *[w for p in lever_phases(lever, batch) if p.seq_length != SEQ
          for w in ("--phase-data", f"{p.seq_length}={os.path.join(work, f'data{p.seq_length}', 'train*')}")]]
    argv = ["pretrain", "--recipe", "cpu_small", "--config", PRESET,
            "--train-data", os.path.join(work, "data", "train*"), "--model-dir", model_dir_of(work, lever),
            "--spm-model", os.path.join(work, "spm.model"), *length,
            "--num-warmup-steps", str(warmup), "--save-checkpoints-steps", str(max(1, total // 8)),
            "--keep-step-checkpoints", "8", "--seed", str(seed)]
    if quick:
        argv += [w for k, v in QUICK_MODEL.items() for w in ("--set", f"{k}={v}")]
        argv += ["--batch-size", str(batch), "--steps-per-loop", str(max(1, total // 8)), "--dtype", "float32"]
    return argv + lever_flags(lever, batch) + [w for kv in sets for w in ("--set", kv)]


def _sha256(path):
    import hashlib  # pylint: disable=import-outside-toplevel

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _make_data(work, corpus, quick, seed, lengths):
    """vocab → create-data --no-mask at each of `lengths` (WORK/data/ at SEQ, WORK/dataL/ otherwise), each step
    skipped when WORK/made.json says it was made from these corpus bytes with this seed and size (a second lever in
    the same --work-dir trains on the same vocabulary and records)."""
    from albert_tf.files import atomic_write_text  # pylint: disable=import-outside-toplevel

    vocab = QUICK_MODEL["vocab_size"] if quick else _recipe()["config_overrides"]["vocab_size"]
    stamp = {"corpus_sha256": _sha256(corpus), "seed": seed, "vocab_size": vocab}
    made_path = os.path.join(work, "made.json")
    made = {}
    if os.path.exists(made_path):
        with open(made_path, encoding="utf-8") as f:
            made = json.load(f)
    if {k: made.get(k) for k in stamp} != stamp:
        made = dict(stamp, lengths=[])
        _step(["vocab", "--input", corpus, "--output-prefix", os.path.join(work, "spm"), "--vocab-size", str(vocab),
               "--seed", str(seed), "--overwrite"])
        atomic_write_text(made_path, json.dumps(made) + "\n")
    else:
        print(f"vocabulary: {work}/spm.model, made from this corpus with seed {seed} (made.json): reused", flush=True)
    for length in lengths:
        if length in made["lengths"]:
            print(f"records at {length}: reused (made.json)", flush=True)
            continue
        out = os.path.join(work, "data" if length == SEQ else f"data{length}", "train")
        _step(["create-data", "--input", corpus, "--spm-model", os.path.join(work, "spm.model"), "--output", out,
               "--max-seq-length", str(length), "--max-predictions", "10", "--no-mask", "--seed", str(seed),
               "--overwrite", "--workers", "2"])
        made["lengths"] = sorted(made["lengths"] + [length])
        atomic_write_text(made_path, json.dumps(made) + "\n")


def time_record_path(model_dir):
    """Where pretrain's wall time is recorded: beside the model dir, WORK/pretraining_time.json for WORK/model,
    WORK/pretraining_time-LEVER.json for WORK/model-LEVER."""
    parent, name = os.path.split(os.path.abspath(model_dir))
    return os.path.join(parent, TIME_RECORD if name == "model" else
                        TIME_RECORD.replace(".json", name[len("model"):] + ".json"))


def pretrain(work, corpus, steps, quick, seed, sets=(), lever="recipe"):
    """vocab → create-data --no-mask → pretrain --recipe cpu_small (with the lever's flags) in work/. Returns (model
    dir, pretraining seconds)."""
    batch = batch_size(quick)
    _make_data(work, corpus, quick, seed, sorted({p.seq_length for p in lever_phases(lever, batch)}))
    load = common.load_average()
    seconds = _step(pretraining_argv(work, steps, quick, seed, sets, lever))
    record = {"seconds": seconds, "steps": lever_steps(lever, steps, batch),
              "lever": lever, "flags": lever_flags(lever, batch), "set": list(sets), "load_average_before": load,
              "load_average_after": common.load_average(), "cpu": common.cpu_model(), "cpus": os.cpu_count()}
    from albert_tf.files import atomic_write_text  # pylint: disable=import-outside-toplevel

    model_dir = model_dir_of(work, lever)
    atomic_write_text(time_record_path(model_dir), json.dumps(record, indent=1) + "\n")
    return model_dir, seconds


def recorded_lever(model_dir):
    """The lever the run beside `model_dir` was pretrained with (its time record), "recipe" without one."""
    path = time_record_path(model_dir)
    if not os.path.exists(path):
        return "recipe"
    with open(path, encoding="utf-8") as f:
        lever = json.load(f).get("lever", "recipe")
    return lever if lever in LEVERS else "recipe"


def recorded_pretraining_seconds(model_dir):
    """The pretraining wall time that `pretrain` recorded beside `model_dir` (WORK/TIME_RECORD), or None."""
    path = time_record_path(model_dir)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)["seconds"]


# ------------------------------------------------------------------------------------------ the ALBERT arms
def run_checkpoints(model_dir):
    """[(step, checkpoint prefix)] of a pretraining run: of its kept step checkpoints (MODEL_DIR/steps/), those
    nearest to 1/8, 1/4, 1/2 and all of the run, whose end is its latest checkpoint when that is past the last kept
    one (a run whose steps are not a multiple of the save interval); without any, its latest checkpoint alone (step
    from the name)."""
    from albert_tf.checkpoints import pretrained  # pylint: disable=import-outside-toplevel
    from albert_tf.layout import ModelDir  # pylint: disable=import-outside-toplevel

    kept = {}
    for index in glob.glob(os.path.join(ModelDir(model_dir).step_checkpoints, "ckpt-*.index")):
        kept[int(re.search(r"ckpt-(\d+)\.index$", index).group(1))] = index[:-len(".index")]
    try:
        latest = pretrained.latest_checkpoint(model_dir)
    except FileNotFoundError:
        if not kept:
            raise
        latest = None
    match = latest and re.search(r"ckpt-(\d+)$", latest)
    latest_step = int(match.group(1)) if match else 0
    if not kept:
        return [(latest_step, latest)]
    if latest_step > max(kept):
        kept[latest_step] = latest
    last = max(kept)
    wanted = sorted({min(kept, key=lambda s, f=fraction: (abs(s - f * last), s))
                     for fraction in (1 / 8, 1 / 4, 1 / 2, 1)})
    return [(step, kept[step]) for step in wanted]


def encoder_features(encoder, weights, tokenizer, batch_size=256):
    """(last, blocks, words): three features(texts) → [N, D] of `encoder` holding `weights`, each averaged over a
    text's real tokens (TASK_SEQ): the last block's sequence output (D = H); every block's output side by side (D =
    blocks × H: what the earlier blocks keep of a word's identity, which the last block trades for predicting
    masked tokens); the rows of the word-embedding table (D = E: the model's own word vectors, the counterpart of
    the distributional arm's). Each text is computed once (the dev texts recur across seeds and label counts)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    names = [v.path for v in encoder.weights]
    table = np.asarray(weights[names.index(encoder.get_layer("embeddings").word_embeddings.path)], np.float64)
    cache, word_cache = {}, {}

    def mean(values, mask):  # [B, L, D] → [B, D] over the real tokens (mask [B, L, 1])
        return (np.asarray(values, np.float64) * mask).sum(1) / mask.sum(1)

    def compute(texts):
        missing = sorted({t for t in texts if t not in cache})
        if missing:
            encoder.set_weights(weights)
            x = tokenizer.pack(missing, seq_length=TASK_SEQ)
            for start in range(0, len(missing), batch_size):
                batch = {k: v[start:start + batch_size] for k, v in x.items()}
                outputs = encoder(batch, training=False)
                mask = batch["input_mask"][:, :, None].astype(np.float64)
                texts_here = missing[start:start + batch_size]
                cache.update(zip(texts_here, np.concatenate([mean(block, mask) for block in outputs["encoder_outputs"]],
                                                            axis=1)))
                word_cache.update(zip(texts_here, mean(table[batch["input_word_ids"]], mask)))

    def blocks(texts):
        compute(texts)
        return np.stack([cache[t] for t in texts])

    def last(texts):  # the last block's columns of `blocks`
        return blocks(texts)[:, -encoder.config.hidden_size:]

    def words(texts):
        compute(texts)
        return np.stack([word_cache[t] for t in texts])

    return last, blocks, words


def finetune_accuracy(config, tokenizer, fit, select, dev, weights, seed, grid, batch_size, min_steps=80):
    """Dev accuracy of the classifier fine-tuned from each of `weights` ({arm: encoder weights}) on fit + select:
    the learning rate of `grid` with the best select accuracy when trained on fit (per arm; one value: no choice),
    then trained on both. The arms see the same examples in the same batches. Returns {arm: (accuracy, lr)}."""
    def tuner(train, held, lr):
        batch = max(4, min(batch_size, len(train) // 4))
        epochs = max(5, math.ceil(min_steps / max(1, len(train) // batch)))
        task = {"train": ([t for t, _ in train], [y for _, y in train]), "dev": ([t for t, _ in held],
                                                                                [y for _, y in held])}
        return common.FineTuner(config, tokenizer, task, TASK_SEQ, epochs, batch, lr, "adamw-keras",
                                num_classes=len(GROUPS))

    chosen = {arm: grid[0] for arm in weights}
    if len(grid) > 1:
        scores = {arm: [] for arm in weights}
        for lr in grid:
            runner = tuner(fit, select, lr)
            for arm, w in weights.items():
                scores[arm].append(runner.run(w, seed)[0])
        chosen = {arm: grid[max(range(len(grid)), key=lambda i, a=arm: (scores[a][i], -i))] for arm in weights}
    out = {}
    for lr in sorted(set(chosen.values())):
        runner = tuner(fit + select, dev, lr)
        for arm in [a for a in weights if chosen[a] == lr]:
            out[arm] = (runner.run(weights[arm], seed)[0], lr)
    return out


# ------------------------------------------------------------------------------------------ the run
def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="a 2-layer 64-wide model, 80 steps on a 1 MB corpus slice, labels 32 and 128, 2 seeds "
                        "(< 3 minutes)")
    p.add_argument("--init", default=None, help="evaluate this pretraining run's model dir (its step checkpoints "
                                                "too) instead of pretraining")
    p.add_argument("--lever", choices=sorted(LEVERS), default="recipe",
                   help="pretrain with one lever's flags over the recipe, on the recipe run's tokens, into "
                        "WORK/model-LEVER (default: the recipe itself, WORK/model); a second lever in the same "
                        "--work-dir reuses the vocabulary and records: " + "; ".join(
                            f"{k}: {' '.join(lever_flags(k, batch_size(False)))}" for k, v in LEVERS.items() if v)
                        + " (the ramp's batches: a quarter and a half of the run's)")
    p.add_argument("--probe-last", action="store_true",
                   help="probe the last checkpoint only (not also those at 1/8, 1/4 and 1/2 of the run)")
    p.add_argument("--pretrain-only", action="store_true", help="stop after pretraining (evaluate later with --init)")
    p.add_argument("--corpus-dir", default=None, help=f"the kernel documentation (default: {CORPUS_GLOB})")
    p.add_argument("--task-dir", default=None, help=f"Python's library reference sources (default: {TASK_GLOB})")
    p.add_argument("--work-dir", default=None, help="where corpus, vocabulary, records and model go (default: a "
                                                    "temp dir)")
    p.add_argument("--pretrain-steps", type=int, default=None, help="pretraining steps (default: the recipe's 6600, "
                                                                    "55-58 min on a quiet 2-core Xeon without AMX; "
                                                                    "--quick 80)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="change one key of the recipe's model (repeatable; pretrain's --set), e.g. --set "
                        "num_hidden_layers=4")
    p.add_argument("--labels", default=None, help=f"comma-separated label counts (default {LABELS}; --quick 32,128)")
    p.add_argument("--seeds", type=int, default=None, help="seeds per arm (default 5; --quick 2)")
    p.add_argument("--finetune-lrs", default=None, help="the fine-tuning learning rates chosen among (default "
                                                        "1e-4,3e-4,1e-3; --quick 1e-3)")
    p.add_argument("--no-finetune", action="store_true", help="linear probes and baselines only")
    p.add_argument("--finetune-labels", default=None,
                   help="comma-separated label counts at which the ALBERT arms are also fine-tuned (default 128, "
                        "the last line's; 'all': every --labels; fine-tuning costs about 30 s a run on 2 cores, "
                        "the probes a fraction of a second)")
    p.add_argument("--probe-folds", type=int, default=1,
                   help="how the probes choose their L2: 1 (default), trained on three quarters of the training "
                        "labels of each class and scored on the last quarter; K >= 2, stratified K-fold "
                        "cross-validation over all of them")
    p.add_argument("--l2-grid", default=None, help="comma-separated L2 penalties the probes choose among (default "
                                                   + ",".join(f"{x:g}" for x in L2_GRID) + ")")
    p.add_argument("--corpus-mb", type=float, default=None, help="use only the first N MB of the corpus (--quick 1)")
    p.add_argument("--data-seed", type=int, default=0, help="seeds the dev split, vocabulary, data and pretraining")
    args = p.parse_args(argv)
    if args.init and args.lever != "recipe":
        p.error(f"--lever {args.lever}: chooses how this script pretrains; with --init {args.init} the run is "
                "already made (its lever is in its time record)")
    if args.init and args.set:
        p.error(f"--set {' '.join(args.set)}: changes the model this script pretrains; with --init {args.init} the "
                "model is that run's own (its albert_config.json)")
    quick = args.quick
    _check_sets(p, args.set, quick)
    args.pretrain_steps = args.pretrain_steps or (80 if quick else _recipe()["num_train_steps"])
    args.labels = [int(n) for n in (args.labels or ("32,128" if quick else ",".join(map(str, LABELS)))).split(",")]
    args.seeds = args.seeds or (2 if quick else 5)
    if args.no_finetune:
        args.finetune_labels = []
    elif args.finetune_labels == "all" or (quick and args.finetune_labels is None):
        args.finetune_labels = list(args.labels)
    else:
        args.finetune_labels = [int(n) for n in (args.finetune_labels or "128").split(",")]
    args.finetune_lrs = [float(x) for x in (args.finetune_lrs or ("1e-3" if quick else "1e-4,3e-4,1e-3")).split(",")]
    args.corpus_mb = args.corpus_mb or (1.0 if quick else None)
    try:
        args.l2_grid = tuple(float(x) for x in args.l2_grid.split(",")) if args.l2_grid else L2_GRID
    except ValueError:
        p.error(f"--l2-grid {args.l2_grid}: expected comma-separated numbers, e.g. 1e-3,1e-2")
    if not all(x >= 0 for x in args.l2_grid):
        p.error(f"--l2-grid {','.join(f'{x:g}' for x in args.l2_grid)}: expected penalties >= 0")
    per_class = min(args.labels) // len(GROUPS)
    if not 1 <= args.probe_folds <= max(1, per_class):
        p.error(f"--probe-folds {args.probe_folds}: expected 1 to {max(1, per_class)} (the {min(args.labels)} "
                f"labels' {per_class} per class)")
    return args


def _check_sets(parser, sets, quick):
    """Refuses a --set that pretrain would refuse only after the vocabulary and the records are made (not
    KEY=VALUE, a key AlbertConfig does not have, a value it rejects), in one line, exit 2: the model pretrain would
    build (albert_tf.config.resolve of PRESET with the recipe's model, QUICK_MODEL and `sets`), built here."""
    from albert_tf.config import resolve  # pylint: disable=import-outside-toplevel
    from albert_tf.settings.pretrain_config import CPU_SMALL_MODEL  # pylint: disable=import-outside-toplevel
    from albert_tf.run_config import parse_key_value  # pylint: disable=import-outside-toplevel

    try:
        changes = dict(parse_key_value(text) for text in sets)
    except argparse.ArgumentTypeError as e:
        parser.error(f"--set: {e}")
    try:
        resolve(PRESET, {**CPU_SMALL_MODEL, **(QUICK_MODEL if quick else {}), **changes})
    except ValueError as e:
        parser.error(str(e))


def main(argv=None):
    args = _parse_args(argv)
    started = time.monotonic()
    work = args.work_dir or tempfile.mkdtemp(prefix="pretraining_value_")
    os.makedirs(work, exist_ok=True)
    print(f"pretraining_value: {common.cpu_model()}, {os.cpu_count()} CPUs, load average "
          f"{common.load_average():.2f} at start, {common.now()}; work dir {work}", flush=True)
    corpus_dir = find_dir(args.corpus_dir, CORPUS_GLOB, "kernel documentation (the pretraining corpus)")
    library = find_dir(args.task_dir, TASK_GLOB, "Python library reference (the task)")
    corpus = os.path.join(work, "corpus.txt")
    documents, lines, size = write_corpus(corpus_dir, corpus, args.corpus_mb and int(args.corpus_mb * 1e6))
    print(f"corpus: {corpus_dir}: {documents} documents, {lines} lines, {size / 1e6:.1f} MB", flush=True)
    corpus_documents = read_corpus_sentences(corpus)
    task = build_task(module_documents(library), {normalized(s) for d in corpus_documents for s in d},
                      args.data_seed, dev_per_class=40 if args.quick else 250)
    counts = [sum(1 for _, y in task["pool"] if y == c) for c in range(len(GROUPS))]
    print(f"task: {library}: {len(task['pool'])} training-pool passages (per class {counts}), {len(task['dev'])} "
          f"dev, {task['dropped']} left out (in the corpus, in two classes, short or repeated)", flush=True)
    pretrain_seconds = None
    if args.init:
        model_dir = args.init
        pretrain_seconds = recorded_pretraining_seconds(model_dir)
    else:
        model_dir, pretrain_seconds = pretrain(work, corpus, args.pretrain_steps, args.quick, args.data_seed,
                                               args.set, args.lever)
        print(f"pretraining wall time: {pretrain_seconds:.0f}s ({pretrain_seconds / 60:.1f} min) for "
              f"{lever_steps(args.lever, args.pretrain_steps, batch_size(args.quick))} steps"
              + ("" if args.lever == "recipe" else f" (lever {args.lever})"), flush=True)
        if args.pretrain_only:
            print(f"pretrained: {model_dir}; evaluate it with --init {model_dir}")
            return
    results = evaluate(args, model_dir, corpus_documents, task)
    report(results, args, model_dir, pretrain_seconds, time.monotonic() - started)


def evaluate(args, model_dir, corpus_documents, task):
    """{(arm, kind, step or None, labels): [accuracy per seed]} for every arm (see the module docstring)."""
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.checkpoints import pretrained  # pylint: disable=import-outside-toplevel
    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    config = pretrained.read_config(model_dir)
    tokenizer = AlbertTokenizer(os.path.join(model_dir, "spm.model"))
    started = time.monotonic()
    vocab, vectors = ppmi_svd_vectors(corpus_documents, vocab_size=1000 if args.quick else 10000, seed=args.data_seed)
    print(f"PPMI-SVD: {len(vocab)} words x {vectors.shape[1]} dimensions ({time.monotonic() - started:.0f}s)",
          flush=True)
    distributional = distributional_features(vocab, vectors)
    checkpoints = run_checkpoints(model_dir)[-1:] if args.probe_last else run_checkpoints(model_dir)
    encoder = AlbertEncoder(config)
    step_weights = {}
    for step, path in checkpoints:
        pretrained.restore(encoder, path, part="encoder")
        step_weights[step] = encoder.get_weights()
    last = checkpoints[-1][0]
    probes = {step: encoder_features(encoder, weights, tokenizer) for step, weights in step_weights.items()}
    results = {}

    def record(key, value):
        results.setdefault(key, []).append(value)

    for seed in range(args.seeds):
        keras.utils.set_random_seed(seed)
        random_weights = AlbertEncoder(config).get_weights()
        random_probe, random_blocks, random_words = encoder_features(encoder, random_weights, tokenizer)
        for labels in args.labels:
            fit, select = selection_split(sample_labels(task["pool"], labels, seed))

            def probe(features, fit=fit, select=select):
                return linear_probe(features, fit, select, task["dev"], grid=args.l2_grid, folds=args.probe_folds)[0]

            record(("bag_of_words", "probe", None, labels), probe(bag_of_words_features([t for t, _ in fit + select])))
            record(("distributional", "probe", None, labels), probe(distributional))
            record(("random", "probe", None, labels), probe(random_probe))
            for step, (features, _, _) in probes.items():
                record(("pretrained", "probe", step, labels), probe(features))
            record(("random", "probe, all blocks", None, labels), probe(random_blocks))
            record(("pretrained", "probe, all blocks", last, labels), probe(probes[last][1]))
            record(("random", "probe, word embeddings", None, labels), probe(random_words))
            record(("pretrained", "probe, word embeddings", last, labels), probe(probes[last][2]))
            if labels in args.finetune_labels:
                tuned = finetune_accuracy(config, tokenizer, fit, select, task["dev"],
                                          {"pretrained": step_weights[last], "random": random_weights}, seed,
                                          args.finetune_lrs, 32, min_steps=20 if args.quick else 80)
                for arm, (accuracy, _) in tuned.items():
                    record((arm, "fine-tuned", last if arm == "pretrained" else None, labels), accuracy)
            print(f"seed {seed}, {labels} labels: " + ", ".join(
                f"{arm} {kind}{'' if step is None else f'@{step}'} {values[-1]:.3f}"
                for (arm, kind, step, n), values in results.items() if n == labels and len(values) == seed + 1),
                flush=True)
    results["config"] = config
    results["checkpoints"] = [step for step, _ in checkpoints]
    return results


def _cell(values):
    return common.summary(values)[2] if values else "–"


def report(results, args, model_dir, pretrain_seconds, total_seconds):
    """The table (markdown) and the last line."""
    config, steps = results.pop("config"), results.pop("checkpoints")
    lever, batch = recorded_lever(model_dir), batch_size(args.quick)
    print(f"\n8-way task (chance 0.125); model {config.num_hidden_layers} layers, {config.hidden_size} wide, "
          f"vocab {config.vocab_size}; {model_dir}; {args.seeds} seeds; dev accuracy mean ± std; the probes' L2 "
          f"of {','.join(f'{x:g}' for x in args.l2_grid)} chosen "
          + ("on a quarter of the labels" if args.probe_folds == 1 else f"by {args.probe_folds}-fold cross-validation"))
    print("| arm | how | pretraining tokens | " + " | ".join(f"{n} labels" for n in args.labels) + " |")
    print("|---|---|---|" + "---|" * len(args.labels))
    rows = [("bag_of_words", "probe", None), ("distributional", "probe", None), ("random", "probe", None)]
    rows += [("pretrained", "probe", step) for step in steps]
    rows += [("random", "probe, all blocks", None), ("pretrained", "probe, all blocks", steps[-1])]
    rows += [("random", "probe, word embeddings", None), ("pretrained", "probe, word embeddings", steps[-1])]
    rows += [("random", "fine-tuned", None), ("pretrained", "fine-tuned", steps[-1])]
    for arm, kind, step in rows:
        if not any((arm, kind, step, n) in results for n in args.labels):
            continue
        tokens = "–" if step is None else f"{tokens_at(lever, step, batch) / 1e6:.1f}M (step {step})"
        print(f"| {arm} | {kind} | {tokens} | " +
              " | ".join(_cell(results.get((arm, kind, step, n), [])) for n in args.labels) + " |")
    for kind in ("probe", "probe, all blocks", "probe, word embeddings", "fine-tuned"):
        for n in args.labels:
            pre, rnd = results.get(("pretrained", kind, steps[-1], n)), results.get(("random", kind, None, n))
            if pre and rnd:
                gains = [a - b for a, b in zip(pre, rnd)]
                print(f"paired pretrained − random, {kind}, {n} labels: mean {sum(gains) / len(gains):+.3f}, min "
                      f"{min(gains):+.3f}, per seed {' '.join(f'{g:+.3f}' for g in gains)}")
    wall = "not recorded (--init of a run without WORK/" + TIME_RECORD + ")" if pretrain_seconds is None else (
        f"{pretrain_seconds / 60:.1f} min")
    print(f"pretraining wall time: {wall}; lever {lever}; total {total_seconds / 60:.1f} min; load average "
          f"{common.load_average():.2f} at the end")
    print(summary_line(results, steps[-1], args.labels), flush=True)


def summary_line(results, last, labels):
    """The last line: at 128 labels (else the first count) the fine-tuned means (the probes' when nothing was
    fine-tuned), the baselines' probes and the smallest paired gain; then the frozen features' own figures: the
    probes' smallest paired gain at that count, and the probe and bag-of-words means at 128 and 512 labels (nan when
    not run)."""
    n = 128 if 128 in labels else labels[0]
    kind = "fine-tuned" if ("pretrained", "fine-tuned", last, n) in results else "probe"

    def mean(key):
        values = results.get(key)
        return sum(values) / len(values) if values else float("nan")

    def min_gain(kind):
        pre, rnd = results.get(("pretrained", kind, last, n), []), results.get(("random", kind, None, n), [])
        return min([a - b for a, b in zip(pre, rnd)] or [float("nan")])

    return (f"labels={n} pretrained={mean(('pretrained', kind, last, n)):.4f} "
            f"random={mean(('random', kind, None, n)):.4f} bag_of_words={mean(('bag_of_words', 'probe', None, n)):.4f} "
            f"distributional={mean(('distributional', 'probe', None, n)):.4f} min_paired_gain={min_gain(kind):.4f} "
            f"probe_min_gain={min_gain('probe'):.4f} "
            + " ".join(f"probe_{k}={mean(('pretrained', 'probe', last, k)):.4f} "
                       f"bow_{k}={mean(('bag_of_words', 'probe', None, k)):.4f}" for k in (128, 512)))


if __name__ == "__main__":
    main()
