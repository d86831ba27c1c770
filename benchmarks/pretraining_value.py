"""Does pretraining help? Pretrain a small ALBERT on Python's documentation, then fine-tune it on a low-resource
task built from documents it never saw, against the same model from a random init and a bag-of-words baseline.

    python benchmarks/pretraining_value.py [--quick] [--init MODEL_DIR] [--seeds 5] [--work-dir DIR]

Corpus: the reStructuredText sources of Python's documentation, which `apt-get install python3-doc` installs under
/usr/share/doc/python3.X/html/_sources (found by glob; `--docs DIR` for another copy). Each .rst.txt file is one
document; its prose is kept (directives' code, literal blocks, tables, titles and markup dropped), one sentence per
line. A seeded 15 % of the documents are held out: the task is built from them only, so no task sentence is in the
pretraining text.

Task (word order): is a sentence as written (1), or were two of its inner words swapped (0)? Sentences of 8 to 40
words from the held-out documents, each used once (original or swapped, never both), train and dev from different
documents. Why this task: a bag of words sees the same words in both classes, so a bag-of-words classifier is at
chance by construction (measured, as a check that nothing else gives the label away), while a model that learned
how words follow each other (what masked-LM pretraining teaches) has a head start; a few hundred labelled sentences
are far too few to learn English word order from scratch. It asks for syntax, not topic: a topic task (which
section a sentence comes from) is one that bag-of-words solves and pretraining barely changes.

Steps (`albert-tf` commands run in this process, printed as they run):
  vocab (4000 pieces; --quick 2000) → create-data --no-mask (seq 128) → pretrain --dynamic-masking (a 4-layer,
  128-wide ALBERT: 3000 steps at batch 32; --quick: the tiny config, 150 steps)
then, for each of --seeds seeds, fine-tune a classifier (pooled output, the original's AdamWeightDecay, batch 32,
seq 64, linear warm-up 10 % and decay) from the pretrained encoder and from a random init of the same config, and
fit a logistic regression on word counts (numpy). `--init MODEL_DIR` skips the pretraining and evaluates that
pretrained-model directory instead (its config and spm.model; the random arm uses its config).

Before fine-tuning, a zero-shot probe of what the pretraining taught of this skill: with two inner words of a task
sentence masked, how often the masked LM prefers their own order to the swapped one (0.5: nothing learned), for the
pretrained model and a random init (`mlm_word_order_accuracy`).

Prints one line per run and a table: dev accuracy mean ± std over seeds (and each seed's) per arm, and the probe;
the last line is `pretrained=... random=... bag_of_words=...` (means). Deterministic given the seeds on one machine.
"""
import argparse
import glob
import json
import os
import random
import re
import sys
import tempfile
import time

import common  # noqa: F401  (puts this checkout first on the path)

DOCS_GLOB = "/usr/share/doc/python3*/html/_sources"
HELD_OUT = 0.15
TASK_SEQ = 64
# Directives whose body is code or markup, not prose (their indented body is dropped with them).
SKIPPED_DIRECTIVES = {
    "code-block", "code", "sourcecode", "doctest", "testcode", "testoutput", "testsetup", "testcleanup",
    "productionlist", "index", "highlight", "literalinclude", "toctree", "image", "figure", "raw", "csv-table",
    "list-table", "table", "math", "include", "module", "moduleauthor", "sectionauthor", "tabularcolumns",
    "only", "audit-event", "program", "currentmodule", "default-role", "rubric", "c:namespace", "opcode",
}
_DIRECTIVE = re.compile(r"\.\.\s+(?:\|[^|]+\|\s+)?([\w:-]+)::")
_UNDERLINE = re.compile(r"([=\-~^*+#\"'`.:_])\1{2,}")
_TABLE = re.compile(r"[=\-+|\s]+")
_FIELD = re.compile(r":[\w .()-]+:(\s|$)")
_BULLET = re.compile(r"([*\-+]|#\.|\d+\.|\(\d+\)|[a-z]\.)\s+")
_ROLE = re.compile(r":[\w:+-]+:`([^`]*)`")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"])")


# ------------------------------------------------------------------------------------------ the corpus
def find_docs(flag):
    """The python3-doc sources directory: --docs, or the first DOCS_GLOB match; exits with the install command."""
    found = [flag] if flag else sorted(glob.glob(DOCS_GLOB))
    if not found or not os.path.isdir(found[0]):
        raise SystemExit(f"pretraining_value: error: no Python documentation sources at {flag or DOCS_GLOB}; "
                         "install them with `apt-get install python3-doc` (or give --docs DIR)")
    return found[0]


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


def rst_paragraphs(text):
    """The prose paragraphs of one .rst file, each a string of the joined lines (markup not yet cleaned)."""
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


def read_documents(docs_dir):
    """[(relative path, [sentences])] of every .rst.txt file under docs_dir with at least 3 sentences, sorted."""
    documents = []
    for path in sorted(glob.glob(os.path.join(docs_dir, "**", "*.rst.txt"), recursive=True)):
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [s for p in rst_paragraphs(f.read()) for s in sentences(p)]
        if len(lines) >= 3:
            documents.append((os.path.relpath(path, docs_dir), lines))
    return documents


def split_documents(documents, seed, held_out=HELD_OUT):
    """(pretraining documents, held-out documents): a seeded `held_out` fraction of the documents, whole."""
    order = list(range(len(documents)))
    random.Random(seed).shuffle(order)
    cut = int(round(held_out * len(documents)))
    held = set(order[:cut])
    return ([d for i, d in enumerate(documents) if i not in held], [d for i, d in enumerate(documents) if i in held])


def write_corpus(documents, path):
    """The original corpus format: one sentence per line, a blank line between documents. Returns bytes written."""
    with open(path, "w", encoding="utf-8") as f:
        for _, lines in documents:
            f.write("\n".join(lines) + "\n\n")
    return os.path.getsize(path)


# ------------------------------------------------------------------------------------------ the task
def word_order_task(documents, num_train, num_dev, seed, min_words=8, max_words=40):
    """The word-order task from `documents` ([(name, [sentences])]): {"train": (texts, labels), "dev": ...}.

    Documents are shuffled (seeded) and dealt to dev until it has 2·num_dev candidate sentences, the rest to train:
    no document in both. From each side's distinct sentences of min_words to max_words words, num_* are drawn;
    half keep their order (label 1), half get two inner words swapped (label 0: not the first or last word, two
    different words), each sentence used once."""
    rng = random.Random(seed)
    order = list(range(len(documents)))
    rng.shuffle(order)
    pools = {"dev": [], "train": []}
    for i in order:
        side = "dev" if len(pools["dev"]) < 2 * num_dev else "train"
        pools[side].extend(s for s in documents[i][1] if min_words <= len(s.split()) <= max_words)
    out = {}
    for side, count in (("train", num_train), ("dev", num_dev)):
        pool = sorted(set(pools[side]))
        if len(pool) < count:
            raise SystemExit(f"pretraining_value: error: {len(pool)} {side} sentences, fewer than {count}")
        chosen = rng.sample(pool, count)
        texts, labels = [], []
        for k, sentence in enumerate(chosen):
            label = k % 2
            texts.append(sentence if label else swap_two_words(sentence, rng))
            labels.append(label)
        out[side] = (texts, labels)
    return out


def swap_positions(words, rng):
    """Two inner positions i < j (not the first or last word) holding different words."""
    while True:
        i, j = sorted(rng.sample(range(1, len(words) - 1), 2))
        if words[i].lower() != words[j].lower():
            return i, j


def swap_two_words(sentence, rng):
    """The sentence with two inner words (not the first or last; different words) swapped."""
    words = sentence.split()
    i, j = swap_positions(words, rng)
    words[i], words[j] = words[j], words[i]
    return " ".join(words)


def mlm_word_order_accuracy(pretrainer, tokenizer, sentences, seed):
    """Zero-shot, no fine-tuning: how often the masked LM prefers a sentence's own order of two inner words.

    For each sentence two inner words are drawn (as `swap_two_words`; sentences where either is not one piece, or
    that do not fit TASK_SEQ, are left out), both masked, and the MLM's log-probabilities compared:
    log p(a at i) + log p(b at j) against log p(b at i) + log p(a at j). Both orders share every other token, so one
    forward pass scores both. A model that learned nothing of word order scores 0.5.
    Returns (accuracy, sentences scored)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    rng = random.Random(seed)
    rows, pairs = [], []
    for sentence in sentences:
        words = sentence.split()
        i, j = swap_positions(words, rng)
        pieces = [tokenizer.encode(w) for w in words]
        ids = [tokenizer.cls_id] + [p for w in pieces for p in w] + [tokenizer.sep_id]
        if len(pieces[i]) != 1 or len(pieces[j]) != 1 or len(ids) > TASK_SEQ:
            continue
        at = [1 + sum(len(p) for p in pieces[:k]) for k in (i, j)]
        for position in at:
            ids[position] = tokenizer.mask_id
        rows.append((ids, at))
        pairs.append((pieces[i][0], pieces[j][0]))
    words = np.zeros([len(rows), TASK_SEQ], np.int32)
    for row, (ids, _) in enumerate(rows):
        words[row, :len(ids)] = ids
    inputs = {"input_word_ids": words, "input_mask": (words > 0).astype(np.int32),
              "input_type_ids": np.zeros_like(words), "masked_lm_positions": np.array([at for _, at in rows],
                                                                                        np.int32)}
    logits = np.asarray(pretrainer.predict(inputs, batch_size=256, verbose=0)["mlm_logits"], np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    a, b = np.array(pairs).T
    n = np.arange(len(pairs))
    own = logp[n, 0, a] + logp[n, 1, b]
    swapped = logp[n, 0, b] + logp[n, 1, a]
    return float((own > swapped).mean()), len(pairs)


# ------------------------------------------------------------------------------------------ bag of words
def bag_of_words_accuracy(train, dev, steps=300, l2=1e-3, lr=0.5):
    """Dev accuracy of an L2-regularized logistic regression on binary word features (lower-cased \\w+ and
    punctuation tokens seen in train), fitted by full-batch gradient descent (numpy)."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    def tokens(text):
        return set(re.findall(r"\w+|[^\w\s]", text.lower()))

    vocab = {t: k for k, t in enumerate(sorted(set().union(*(tokens(t) for t in train[0]))))}

    def features(texts):
        x = np.zeros([len(texts), len(vocab) + 1], np.float64)
        x[:, -1] = 1.0  # bias
        for row, text in enumerate(texts):
            x[row, [vocab[t] for t in tokens(text) if t in vocab]] = 1.0
        return x

    x, y = features(train[0]), np.asarray(train[1], np.float64)
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-x @ w))
        w -= lr * (x.T @ (p - y) / len(y) + l2 * w)
    predicted = (features(dev[0]) @ w > 0).astype(int)
    return float((predicted == np.asarray(dev[1])).mean())


# ------------------------------------------------------------------------------------------ pretraining
FULL = {"vocab_size": 4000, "steps": 3000, "learning_rate": 0.01, "seq": 64, "predictions": 10,
        "config": {"embedding_size": 128, "hidden_size": 128, "num_hidden_layers": 4, "num_hidden_groups": 1,
                   "num_attention_heads": 4, "intermediate_size": 512, "max_position_embeddings": 64,
                   "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}}
QUICK = {"vocab_size": 2000, "steps": 150, "learning_rate": 0.005, "seq": 64, "predictions": 10,
         "config": {"max_position_embeddings": 64}}  # otherwise albert_tiny's sizes


def _step(argv):
    """Runs one `albert-tf` command in this process, printed first; exits on failure."""
    from albert_tf.cli import main as cli_main  # pylint: disable=import-outside-toplevel

    print(f"$ albert-tf {' '.join(argv)}", flush=True)
    started = time.monotonic()
    code = cli_main(argv)
    if code:
        raise SystemExit(f"pretraining_value: error: `albert-tf {argv[0]}` failed with exit code {code}")
    print(f"  ({argv[0]}: {time.monotonic() - started:.0f}s)", flush=True)


def pretrain(work, corpus, recipe, args):
    """vocab → create-data --no-mask → pretrain --dynamic-masking in work/; returns the model directory."""
    from albert_tf import AlbertConfig, configs_dir  # pylint: disable=import-outside-toplevel

    spm, model_dir = os.path.join(work, "spm.model"), os.path.join(work, "model")
    config = os.path.join(work, "albert_config.json")
    AlbertConfig.from_json_file(os.path.join(configs_dir(), "albert_tiny.json")).replace(
        vocab_size=recipe["vocab_size"], **recipe["config"]).to_json_file(config)
    steps = args.pretrain_steps or recipe["steps"]
    _step(["vocab", "--input", corpus, "--output-prefix", os.path.join(work, "spm"),
           "--vocab-size", str(recipe["vocab_size"]), "--seed", str(args.data_seed)])
    _step(["create-data", "--input", corpus, "--spm-model", spm, "--output", os.path.join(work, "data", "train"),
           "--max-seq-length", str(recipe["seq"]), "--max-predictions", str(recipe["predictions"]), "--no-mask",
           "--seed", str(args.data_seed)])
    _step(["pretrain", "--config", config, "--train-data", os.path.join(work, "data", "train*"),
           "--model-dir", model_dir, "--spm-model", spm, "--max-seq-length", str(recipe["seq"]),
           "--max-predictions", str(recipe["predictions"]), "--batch-size", "32",
           "--learning-rate", str(recipe["learning_rate"]),
           "--num-train-steps", str(steps), "--num-warmup-steps", str(max(1, steps // 10)),
           "--steps-per-loop", "50", "--save-checkpoints-steps", str(steps), "--dynamic-masking",
           "--seed", str(args.data_seed)])
    return model_dir


def last_metrics(model_dir):
    """The last training row of MODEL_DIR/metrics.jsonl (pretrain's log), or {}."""
    path = os.path.join(model_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if r.get("split") == "train"]
    return rows[-1] if rows else {}


# ------------------------------------------------------------------------------------------ the run
def _parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the tiny config, 150 pretraining steps, 3 epochs (< 5 min)")
    p.add_argument("--init", default=None, help="evaluate this pretrained-model directory instead of pretraining")
    p.add_argument("--docs", default=None, help=f"the python3-doc sources (default: {DOCS_GLOB})")
    p.add_argument("--work-dir", default=None, help="where corpus, data and model go (default: a temp dir)")
    p.add_argument("--seeds", type=int, default=5, help="fine-tuning seeds per arm")
    p.add_argument("--train-examples", type=int, default=800, help="labelled training sentences")
    p.add_argument("--dev-examples", type=int, default=1000, help="labelled dev sentences")
    p.add_argument("--epochs", type=int, default=None, help="fine-tuning passes (default 10; --quick 3)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=3e-4, help="fine-tuning peak learning rate")
    p.add_argument("--optimizer", default="adamw-original", help="make_optimizer's name (adamw-keras: Keras AdamW)")
    p.add_argument("--pretrain-steps", type=int, default=None, help="override the pretraining steps")
    p.add_argument("--data-seed", type=int, default=0, help="seeds the held-out split, task, vocab, data, pretraining")
    args = p.parse_args()
    if args.epochs is None:
        args.epochs = 3 if args.quick else 10
    return args


def main():
    args = _parse_args()
    started = time.monotonic()
    work = args.work_dir or tempfile.mkdtemp(prefix="pretraining_value_")
    os.makedirs(work, exist_ok=True)
    print(f"pretraining_value: load average {common.load_average():.2f} at start; work dir {work}", flush=True)
    documents = read_documents(find_docs(args.docs))
    pretraining_docs, held_out = split_documents(documents, args.data_seed)
    corpus = os.path.join(work, "corpus.txt")
    size = write_corpus(pretraining_docs, corpus)
    print(f"corpus: {len(pretraining_docs)} documents, {sum(len(d[1]) for d in pretraining_docs)} sentences, "
          f"{size / 1e6:.1f} MB; held out for the task: {len(held_out)} documents", flush=True)
    task = word_order_task(held_out, args.train_examples, args.dev_examples, args.data_seed)
    recipe = QUICK if args.quick else FULL
    model_dir = args.init or pretrain(work, corpus, recipe, args)
    pretrain_seconds = time.monotonic() - started
    from albert_tf.checkpoints import pretrained  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    config = pretrained.read_config(model_dir)
    tokenizer = AlbertTokenizer(os.path.join(model_dir, "spm.model"))
    print(f"pretrained model {model_dir}: last pretraining log row {json.dumps(last_metrics(model_dir))}",
          flush=True)
    from albert_tf.modeling.encoder import AlbertEncoder  # pylint: disable=import-outside-toplevel

    probe = zero_shot_probe(config, tokenizer, model_dir, task, args.data_seed)
    results = {"pretrained": [], "random": [], "bag_of_words": []}
    bow = bag_of_words_accuracy(task["train"], task["dev"])
    tuner = common.FineTuner(config, tokenizer, task, TASK_SEQ, args.epochs, args.batch_size, args.learning_rate,
                             args.optimizer)
    pretrained_weights = AlbertEncoder.from_pretrained(model_dir).get_weights()
    for seed in range(args.seeds):
        for arm in ("pretrained", "random"):
            weights = pretrained_weights if arm == "pretrained" else tuner.random_encoder_weights(seed)
            accuracy, _, seconds = tuner.run(weights, seed)
            results[arm].append(accuracy)
            print(f"seed {seed} {arm}: dev accuracy {accuracy:.4f} ({seconds:.0f}s)", flush=True)
        results["bag_of_words"].append(bow)  # deterministic: the same fit for every seed
    report(results, probe, args, config, model_dir, pretrain_seconds, time.monotonic() - started)


def zero_shot_probe(config, tokenizer, model_dir, task, seed):
    """`mlm_word_order_accuracy` of the pretrained model and of a random init (seeded) on the task's unswapped
    sentences (train and dev): {arm: (accuracy, sentences)}."""
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf import AlbertPretrainer  # pylint: disable=import-outside-toplevel

    sentences = [t for split in ("dev", "train") for t, label in zip(*task[split]) if label]
    keras.utils.set_random_seed(seed)
    probe = {"pretrained": mlm_word_order_accuracy(AlbertPretrainer.from_pretrained(model_dir), tokenizer,
                                                   sentences, seed),
             "random": mlm_word_order_accuracy(AlbertPretrainer(config), tokenizer, sentences, seed)}
    for arm, (accuracy, count) in probe.items():
        print(f"zero-shot masked-LM order preference, {arm}: {accuracy:.3f} over {count} sentences", flush=True)
    return probe


def report(results, probe, args, config, model_dir, pretrain_seconds, total_seconds):
    """The table (markdown) and the last line."""
    print(f"\nword-order task: {args.train_examples} train / {args.dev_examples} dev sentences (chance 0.5); "
          f"fine-tuning {args.epochs} epochs at batch {args.batch_size}, lr {args.learning_rate:g} "
          f"({args.optimizer}); model {config.hidden_size}-wide, {config.num_hidden_layers} layers, vocab "
          f"{config.vocab_size}; {model_dir}")
    print("| init | dev accuracy (mean ± std over seeds) | per seed | zero-shot MLM order preference |\n"
          "|---|---|---|---|")
    for arm, values in results.items():
        zero_shot = f"{probe[arm][0]:.3f} ({probe[arm][1]} sentences)" if arm in probe else "–"
        print(f"| {arm} | {common.summary(values)[2]} | {' '.join(f'{v:.3f}' for v in values)} | {zero_shot} |")
    print(f"pretraining (or reading --init) {pretrain_seconds / 60:.1f} min, total {total_seconds / 60:.1f} min; "
          f"load average {common.load_average():.2f} at the end")
    print(" ".join(f"{arm}={common.summary(values)[0]:.4f}" for arm, values in results.items()), flush=True)


if __name__ == "__main__":
    main()
