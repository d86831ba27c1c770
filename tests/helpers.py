"""Shared test helpers: a generated English-like corpus and a tiny SentencePiece model.

Also: the small model config and inputs the model tests compare against tests/numpy_albert.py, texts the Python
and in-graph tokenizers must agree on, generated pretraining TFRecords with a learnable sentence order and the
short pretraining run the tests share (pretrain_args / pretrain_config), and the one way to start a fresh process:
`spawn` (`albert-tf ARGS`, or a program of tests/programs/), with run_cli / run_program to run one to its end.
Fixtures are in tests/conftest.py.

Nothing here downloads anything; everything is generated from a seed.
"""
import contextlib
import glob
import gzip
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

from albert_tf.config import AlbertConfig
from albert_tf.text import CLS_ID, MASK_ID, SEP_ID

#: The checkout's root (tests/..): the one definition the tests share.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_WORDS = (
    "the of and to in is was for on that with as by at from his her they which this be are were an had has "
    "not but it or their have one all would there been when who will more no if out so said what up its about "
    "into than them can only other new some could time these two may then do first any my now such like our "
    "over man me even most made after also did many before must through back years where much your way well "
    "down should because each just those people how too little state good very make world still own see men "
    "work long get here between both life being under never day same another know while last might us great "
    "old year off come since against go came right used take three river mountain city music science history "
    "language computer garden winter summer ancient modern theory number system program children school water "
    "café naïve résumé 1999 2024 3.0 42 100 7,5"
).split()


def make_sentence(rng, min_words=4, max_words=14):
    n = rng.randint(min_words, max_words)
    words = [rng.choice(_WORDS) for _ in range(n)]
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice([".", ".", ".", "!", "?"])


def _gb2312_level1():
    """The 3,755 most common Chinese characters (GB2312's level 1, rows 16-55, in its pinyin order)."""
    return [bytes([row, cell]).decode("gb2312") for row in range(0xB0, 0xD8) for cell in range(0xA1, 0xFF)
            if (row, cell) < (0xD7, 0xFA)]


def cjk_sentences(count, script="zh", seed=0):
    """`count` sentences of real characters, without spaces, each ending in 。！ or ？ (as Chinese and Japanese text
    does): "zh" draws GB2312's common characters with Zipf-like frequencies (a few hundred make most of the text,
    as in real Chinese; thousands appear), "ja" mixes hiragana, katakana and those characters, with the comma 、."""
    rng = random.Random(seed)
    han = _gb2312_level1()
    rng.shuffle(han)
    weights = [1 / (rank + 10) for rank in range(len(han))]
    kana = [chr(c) for c in range(0x3041, 0x3094)] + [chr(c) for c in range(0x30A1, 0x30F5)]
    out = []
    for _ in range(count):
        n = rng.randint(6, 30)
        if script == "zh":
            chars = rng.choices(han, weights, k=n)
            comma = "，"
        else:
            chars = [rng.choice(kana) if rng.random() < 0.6 else rng.choices(han, weights)[0] for _ in range(n)]
            comma = "、"
        if n > 12:
            chars.insert(rng.randint(4, n - 4), comma)
        out.append("".join(chars) + rng.choice("。。。！？"))
    return out


def write_corpus(path, num_docs=30, min_sents=3, max_sents=12, seed=0):
    """Writes the original format: one sentence per line, a blank line between documents. Returns the path."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for d in range(num_docs):
            for _ in range(rng.randint(min_sents, max_sents)):
                f.write(make_sentence(rng) + "\n")
            if d != num_docs - 1:
                f.write("\n")
    return path


def train_tiny_spm(directory, vocab_size=300, seed=0):
    """Trains a tiny SentencePiece model with ALBERT's special ids (pad 0, unk 1, [CLS] 2, [SEP] 3, [MASK] 4).

    Returns the path of the .model file.
    """
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    os.makedirs(directory, exist_ok=True)
    corpus = write_corpus(os.path.join(directory, "spm_corpus.txt"), num_docs=80, seed=seed)
    prefix = os.path.join(directory, "tiny_spm")
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, vocab_size=vocab_size, model_type="unigram",
        pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols="[CLS],[SEP],[MASK]",
        character_coverage=1.0, normalization_rule_name="identity", minloglevel=2, num_threads=1,
    )
    return prefix + ".model"


# ------------------------------------------------------------------------------------ model tests
SMALL = dict(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=4, num_hidden_groups=2,
             inner_group_num=2, num_attention_heads=2, intermediate_size=32, hidden_act="gelu",
             hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=32,
             type_vocab_size=2, initializer_range=0.02)


def named_variables(values):
    """keras.Variables whose paths are the keys of `values` ({"scope/.../name": array}), in that order."""
    import contextlib  # pylint: disable=import-outside-toplevel

    import keras  # pylint: disable=import-outside-toplevel

    variables = []
    for path, value in values.items():
        *scopes, name = path.split("/")
        with contextlib.ExitStack() as stack:
            for scope in scopes:
                stack.enter_context(keras.name_scope(scope))
            variables.append(keras.Variable(value, name=name))
    assert [v.path for v in variables] == list(values)
    return variables


def make_inputs(cfg, batch=3, length=12, predictions=4, seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, cfg["vocab_size"], (batch, length)).astype("int32")
    mask = np.ones((batch, length), "int32")
    mask[1, 7:] = 0  # padding in one row
    mask[2, 10:] = 0
    types = np.zeros((batch, length), "int32")
    types[:, length // 2:] = 1
    positions = np.stack([rng.choice(length - 5, predictions, replace=False) for _ in range(batch)]).astype("int32")
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types, "masked_lm_positions": positions}


def compare(model_out, ref_out, mask):
    """Max |diff| over the outputs (padded positions of sequence outputs excluded: they are garbage in both)."""
    m = mask[..., None].astype(bool)
    diffs = [
        np.abs(np.where(m, np.asarray(model_out["sequence_output"]) - ref_out["sequence_output"], 0)).max(),
        np.abs(np.asarray(model_out["pooled_output"]) - ref_out["pooled_output"]).max(),
        np.abs(np.asarray(model_out["mlm_logits"]) - ref_out["mlm_logits"]).max(),
        np.abs(np.asarray(model_out["sop_logits"]) - ref_out["sop_logits"]).max(),
    ]
    for a, b in zip(model_out["encoder_outputs"], ref_out["encoder_outputs"]):
        diffs.append(np.abs(np.where(m, np.asarray(a) - b, 0)).max())
    return max(diffs)


# ------------------------------------------------------------------------------------ tokenizer tests
# Python == in-graph ids on these.
EQUALITY_TEXTS = [
    "Café naïve résumé Über",
    "中文字符 and 日本語のテキスト, 한국어",
    "emoji 😀👍🏽 ok 🇫🇷",
    "it costs 3.0, or 7,5, or 42, and 1999,",
    "nul\x00 inside\x00\x00 AND control\x01\x7f chars \ufeff\u200b",
    "runs   of \t\n whitespace\u00a0and\u3000ideographic\u2009thin  ",
    "",
    "   \t ",
    "``Quoted'' text '' ``",
    "ΟΔΟΣ ΑΣ. Σ",
    "İstanbul ǅ ﬁ ① ＡＢＣ ¨x",
    "e\u0301 a\u0308 o\u0327\u0301",
    "UPPER lower MiXeD 3.0,x",
    # words around normalize's MAX_WORD_CHARS (256) cap, counted in code points before NFKD, quotes and marks
    "short " + "Ab" * 150 + " é" * 3 + "\u00a0" + "é" * 260 + "\tz " + "x" * 255 + "7, " + "y" * 256 + "3.0,",
    "ﬁ" * 257 + " " + "e\u0301" * 140 + " " + "`" * 259 + "'" * 3 + " ΟΔΟΣ" * 80 + "Σ tail",
]


# The documentation Debian installs: the Python documentation's reST sources and the Linux kernel's Documentation
# (gzipped .rst and .txt, translations included): real text with code, numbers and punctuation.
DOC_CORPUS_INSTALL = "apt-get install -y python3-doc linux-doc-6.12"


def doc_corpus_lines(stride=1):
    """Every `stride`-th non-blank line (str.splitlines) of python3-doc's _sources/**/*.txt, then of linux-doc's
    Documentation/**/*.rst.gz and *.txt.gz, each set in sorted path order, UTF-8 with bad bytes replaced; [] when
    either package is missing."""
    python = sorted({os.path.realpath(p)
                     for p in glob.glob("/usr/share/doc/python3*/html/_sources/**/*.txt", recursive=True)})
    linux = sorted(p for p in glob.glob("/usr/share/doc/linux-doc-*/Documentation/**/*.gz", recursive=True)
                   if p.endswith((".rst.gz", ".txt.gz")))
    if not python or not linux:
        return []
    lines = []
    for path in python + linux:
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            lines += [line for line in f.read().decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[::stride]


# ------------------------------------------------------------------------------------ pretraining records
def make_example(rng, seq_length, max_predictions, vocab_size, alphabet=None, unmasked=False):
    """One record in the original order (label 0) or swapped (label 1).

    The original order is a long segment counting up (cyclically) through the low half of the ids, then a short one
    counting through the high half. Swapping moves the short high segment first, so the order is learnable from
    which ids carry segment id 0 and from where [SEP] falls. Masked tokens are predictable from their neighbours
    (each token is the previous one + 1). `alphabet` limits each half to that many ids (an easier MLM task).
    `unmasked` writes the tokens as they are and zero prediction slots (create-data --no-mask's layout).
    """
    half = alphabet or (vocab_size - 5) // 2
    room = seq_length - 3
    len_b = int(rng.integers(3, max(4, room // 4)))
    len_a = int(rng.integers(max(len_b + 2, room // 2), room - len_b + 1))
    first = 5 + (int(rng.integers(0, half)) + np.arange(len_a)) % half
    second = 5 + half + (int(rng.integers(0, half)) + np.arange(len_b)) % half
    label = int(rng.integers(0, 2))
    a, b = (first, second) if label == 0 else (second, first)
    tokens = np.concatenate([[CLS_ID], a, [SEP_ID], b, [SEP_ID]]).astype(np.int64)
    segments = np.concatenate([np.zeros(len(a) + 2), np.ones(len(b) + 1)]).astype(np.int64)
    n = len(tokens)
    candidates = [i for i in range(1, n) if tokens[i] not in (CLS_ID, SEP_ID)]
    num_masked = min(max_predictions, max(1, int(round(n * 0.15))))
    positions = np.sort(rng.choice(candidates, size=num_masked, replace=False))
    ids = tokens[positions].copy()
    tokens[positions] = MASK_ID
    if unmasked:
        tokens[positions] = ids
        positions, ids, num_masked = positions[:0], ids[:0], 0

    def pad(x, length, dtype=np.int64):
        out = np.zeros(length, dtype)
        out[: len(x)] = x
        return out

    feature = {
        "input_ids": pad(tokens, seq_length), "input_mask": pad(np.ones(n), seq_length),
        "segment_ids": pad(segments, seq_length), "token_boundary": pad(np.ones(n), seq_length),
        "masked_lm_positions": pad(positions, max_predictions), "masked_lm_ids": pad(ids, max_predictions),
        "masked_lm_weights": pad(np.ones(num_masked), max_predictions, np.float32),
        "next_sentence_labels": np.array([label], np.int64),
    }

    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    def to_feature(v):
        if v.dtype == np.float32:
            return tf.train.Feature(float_list=tf.train.FloatList(value=v.tolist()))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=v.tolist()))

    return tf.train.Example(features=tf.train.Features(feature={k: to_feature(v) for k, v in feature.items()}))


def write_records(path, num_examples, seq_length=32, max_predictions=5, vocab_size=1000, seed=0, alphabet=None,
                  unmasked=False):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(num_examples):
            example = make_example(rng, seq_length, max_predictions, vocab_size, alphabet, unmasked)
            writer.write(example.SerializeToString())
    return path


def checkout_env(**extra):
    """The environment of a fresh process that runs this checkout's albert_tf (TensorFlow's notices off, output
    unbuffered), `extra` added."""
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO, PYTHONUNBUFFERED="1", **extra)


def program_path(name):
    """tests/programs/NAME.py: a program a test runs in a fresh process."""
    return os.path.join(REPO, "tests", "programs", f"{name}.py")


def _argv(args, program):
    args = [str(a) for a in args]
    return [sys.executable, program_path(program), *args] if program else [sys.executable, "-m", "albert_tf", *args]


def wait_until(condition, timeout=300.0, interval=0.05, proc=None):
    """Returns once `condition()` is true; an AssertionError after `timeout` seconds, or as soon as `proc` (a
    Spawned) has ended with the condition still false."""
    deadline = time.time() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None and not condition():
            out, err = proc.output()
            raise AssertionError(f"the process ended first (rc {proc.returncode})\nstdout:\n{out[-3000:]}\n"
                                 f"stderr:\n{err[-3000:]}")
        assert time.time() < deadline, f"timed out after {timeout} s"
        time.sleep(interval)


def default_signals():
    """For Popen's preexec_fn: the signals the tests send (SIGINT, SIGHUP, SIGTERM) at their default disposition in
    the child, whatever the test run inherited. A command started in the background by a shell without job control
    ignores SIGINT, and under `nohup` SIGHUP; a program started with a signal ignored keeps ignoring it (Python then
    installs no KeyboardInterrupt handler), so a test that sends one would see it ignored."""
    for number in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)


class Spawned:
    """A fresh process started by `spawn`. Its stdout and stderr go to files (nothing blocks on a full pipe); the
    methods read them while it runs and once it has ended."""

    def __init__(self, argv, env, merge_stderr, new_session, stdin, work_dir):
        import tempfile  # pylint: disable=import-outside-toplevel

        self._dir = tempfile.mkdtemp(prefix="spawned-", dir=work_dir)
        # pylint: disable-next=consider-using-with
        self._out = open(os.path.join(self._dir, "stdout"), "w+", encoding="utf-8")
        self._err = self._out if merge_stderr else open(  # pylint: disable=consider-using-with
            os.path.join(self._dir, "stderr"), "w+", encoding="utf-8")
        self._read = {"stdout": 0, "stderr": 0}
        self.proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=self._out,  # pylint: disable=consider-using-with
                                     stderr=subprocess.STDOUT if merge_stderr else self._err,
                                     stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                     text=True, start_new_session=new_session,
                                     preexec_fn=default_signals if new_session else None)
        if stdin is not None:
            self.proc.stdin.write(stdin)
            self.proc.stdin.close()
        self.pid = self.proc.pid

    @property
    def returncode(self):
        return self.proc.returncode

    def poll(self):
        return self.proc.poll()

    def send_signal(self, signum):
        self.proc.send_signal(signum)

    def kill(self):
        self.proc.kill()

    def signal_group(self, signum):
        """`signum` to the whole process group (as a terminal's Ctrl-C); needs spawn(..., new_session=True)."""
        os.killpg(self.pid, signum)

    def _text(self, stream):
        with open(os.path.join(self._dir, stream if stream == "stderr" and self._err is not self._out
                               else "stdout"), encoding="utf-8", errors="replace") as f:
            return f.read()

    def output(self):
        """(stdout, stderr) so far (stderr "" when merged into stdout)."""
        return self._text("stdout"), "" if self._err is self._out else self._text("stderr")

    def has(self, text, stream="stdout"):
        """A condition for wait_until: `text` has appeared on `stream`."""
        return lambda: text in self._text(stream)

    def wait_until(self, condition, timeout=300.0):
        """wait_until(condition) that fails as soon as this process ends with the condition still false."""
        wait_until(condition, timeout, proc=self)

    def read_until(self, predicate, timeout=300.0, stream="stdout"):
        """The lines of `stream` not read yet, up to the first that satisfies `predicate`: (lines, the time it was
        seen); later lines stay unread. An AssertionError if the process ends or `timeout` passes first."""
        deadline, lines = time.time() + timeout, []
        while time.time() < deadline:
            ended = self.poll() is not None
            text = self._text(stream)
            while "\n" in text[self._read[stream]:]:
                end = text.index("\n", self._read[stream])
                lines.append(text[self._read[stream]:end])
                self._read[stream] = end + 1
                if predicate(lines[-1]):
                    return lines, time.time()
            if ended:
                break
            time.sleep(0.02)
        raise AssertionError(f"no such line within {timeout} s (rc {self.poll()}); {stream} so far:\n" +
                             "\n".join(lines))

    def finish(self, timeout=300):
        """(returncode, stdout, stderr) once the process has ended (stderr "" when merged into stdout)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        out, err = self.output()
        for f in {self._out, self._err}:
            f.close()
        shutil.rmtree(self._dir, ignore_errors=True)
        return self.returncode, out, err


def spawn(*args, program=None, env=None, merge_stderr=False, new_session=False, stdin=None, work_dir=None):
    """A fresh process running `albert-tf ARGS` (this checkout's albert_tf, checkout_env), or with `program` the
    program tests/programs/PROGRAM.py with ARGS as its argv. `env`: variables to add (a value None removes one);
    `new_session`: its own process group (signal_group reaches its workers); `stdin`: text to feed it. Returns a
    Spawned: read_until, wait_until, finish."""
    environment = checkout_env()
    for key, value in (env or {}).items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = str(value)
    return Spawned(_argv(args, program), environment, merge_stderr, new_session, stdin, work_dir)


def run_cli(command, args=(), timeout=900, check=True, env=None):
    """Runs `albert-tf COMMAND ARGS` in a fresh Python process (spawn) to its end; returns a CompletedProcess (text
    stdout and stderr). With `check`, a non-zero exit raises an AssertionError showing both."""
    proc = spawn(command, *args, env=env)
    code, out, err = proc.finish(timeout=timeout)
    if check and code != 0:
        raise AssertionError(f"{command} exited {code}\nstdout:\n{out}\nstderr:\n{err}")
    return subprocess.CompletedProcess(proc.proc.args, code, out, err)


def run_cli_killed_when(command, args, path, timeout=900):
    """Runs `albert-tf COMMAND ARGS` in a fresh process and SIGKILLs it from the outside as soon as `path` exists
    (e.g. a checkpoint's state file): a crash at a known point, with no hook in the product. Returns the killed
    process's CompletedProcess (returncode -SIGKILL unless it ended first)."""
    proc = spawn(command, *args)
    deadline = time.time() + timeout
    while not os.path.exists(path) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    code, out, err = proc.finish()
    return subprocess.CompletedProcess(proc.proc.args, code, out, err)


def run_program(name, *args, timeout=600, env=None, stdin=None):
    """Runs tests/programs/NAME.py ARGS in a fresh process (spawn) to its end; returns a CompletedProcess (text
    stdout and stderr), whatever its exit status."""
    proc = spawn(*args, program=name, env=env, stdin=stdin)
    code, out, err = proc.finish(timeout=timeout)
    return subprocess.CompletedProcess(proc.proc.args, code, out, err)


def run_python(code, timeout=600, **env):
    """Runs a one-line `python -c CODE` in a fresh process (checkout_env, `env` added); returns the
    CompletedProcess (text stdout and stderr), whatever its exit status. A longer program is a file in
    tests/programs/ (run_program)."""
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=checkout_env(**env), capture_output=True,
                          text=True, timeout=timeout, check=False)


def plan_refuses(cli, argv, message):
    """`albert-tf plan` of a small valid run (albert_base, v3-32, batch 4096, seq 512) with `argv`'s flags over it
    (a flag of the run replaced, others added) exits 2 with one error line containing `message` (`cli`: the conftest
    fixture)."""
    args = {"--config": "albert_base", "--topology": "v3-32", "--batch-size": "4096", "--max-seq-length": "512"}
    extra = []
    for flag, value in zip(argv[::2], argv[1::2]):
        if flag in args:
            args[flag] = value
        else:
            extra += [flag, value]
    code, out, err = cli("plan", *[x for kv in args.items() for x in kv], *extra)
    assert code == 2 and not out
    assert err.startswith("albert-tf plan: error: ") and message in err and err.count("\n") == 1, err


@contextlib.contextmanager
def file_size_limit(limit):
    """Inside the block every file this process writes is limited to `limit` bytes (RLIMIT_FSIZE's soft limit): a
    write past it fails at the operating system's write call, TensorFlow's C++ writers included, with EFBIG ("File
    too large"), as a write fails on a full disk. SIGXFSZ is ignored meanwhile, so the write returns the error."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def tree(directory):
    """The sorted relative paths of every file and folder under `directory` ([] when it does not exist)."""
    found = []
    for folder, folders, names in os.walk(directory):
        found += [os.path.relpath(os.path.join(folder, n), directory) for n in folders + names]
    return sorted(found)


def error_lines(stderr):
    """Our lines in a process's stderr (`albert-tf ...`; TensorFlow's start-up lines and progress left out)."""
    return [line for line in stderr.splitlines() if line.startswith("albert-tf")]


# ------------------------------------------------------------------------------------ pretraining runs
#: The pretraining tests' record shape and model: 32 tokens, 5 predictions, a one-layer 32-wide ALBERT.
PRETRAIN_SEQ, PRETRAIN_PRED = 32, 5
PRETRAIN_TINY = AlbertConfig(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=1,
                             num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)


def write_pretrain_data(directory, config=PRETRAIN_TINY, train=256, eval_records=64):
    """DIR/train.tfrecord, DIR/eval.tfrecord (generated records of PRETRAIN_SEQ x PRETRAIN_PRED) and
    DIR/albert_config.json: what the `pretrain_data` fixture holds. Returns the directory."""
    write_records(os.path.join(directory, "train.tfrecord"), train, PRETRAIN_SEQ, PRETRAIN_PRED, seed=0)
    if eval_records:
        write_records(os.path.join(directory, "eval.tfrecord"), eval_records, PRETRAIN_SEQ, PRETRAIN_PRED, seed=1)
    config.to_json_file(os.path.join(directory, "albert_config.json"))
    return directory


def pretrain_args(data_dir, model_dir, steps=6, **extra):
    """`albert-tf pretrain` flags for a short run on `data_dir` (write_pretrain_data's layout); `extra` as flags
    (name_with_underscores=value, True for a switch), in place of the defaults here (a flag is given once). The
    warm-up is 2 steps, fewer than `steps` (pretrain refuses a warm-up as long as the run)."""
    values = dict(config=os.path.join(data_dir, "albert_config.json"),
                  train_data=os.path.join(data_dir, "train.tfrecord"), model_dir=model_dir,
                  max_seq_length=PRETRAIN_SEQ, max_predictions=PRETRAIN_PRED, batch_size=16, num_train_steps=steps,
                  num_warmup_steps=min(2, steps - 1), steps_per_loop=2, save_checkpoints_steps=2, learning_rate=0.01)
    args = []
    for key, value in {**values, **extra}.items():
        args += [f"--{key.replace('_', '-')}"] + ([] if value is True else [value])
    return [str(a) for a in args]


def pretrain_config(data_dir, model_dir, steps=6, **changes):
    """The PretrainConfig of pretrain_args(data_dir, model_dir, steps), `changes` (field=value) over it."""
    from albert_tf.settings.pretrain_config import PretrainConfig  # pylint: disable=import-outside-toplevel

    values = dict(config=os.path.join(data_dir, "albert_config.json"),
                  train_data=os.path.join(data_dir, "train.tfrecord"), model_dir=str(model_dir),
                  max_seq_length=PRETRAIN_SEQ, max_predictions=PRETRAIN_PRED, batch_size=16, num_train_steps=steps,
                  num_warmup_steps=min(2, steps - 1), steps_per_loop=2, save_checkpoints_steps=2, learning_rate=0.01)
    return PretrainConfig(**{**values, **{k: str(v) if isinstance(v, os.PathLike) else v
                                          for k, v in changes.items()}})


def train_metrics(model_dir):
    """{step: row} of the `train` rows of MODEL_DIR/metrics.jsonl."""
    with open(os.path.join(model_dir, "metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return {r["step"]: r for r in rows if r["split"] == "train"}


def checkpoint_values(model_dir, step):
    """{name: array} of the variables of MODEL_DIR/ckpt-STEP (the save counter left out)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    reader = tf.train.load_checkpoint(os.path.join(model_dir, f"ckpt-{step}"))
    names = [n for n in reader.get_variable_to_shape_map() if "VARIABLE_VALUE" in n and "save_counter" not in n]
    return {n: reader.get_tensor(n) for n in names}


def assert_same_checkpoint(dir_a, dir_b, step, rtol=1e-5, atol=1e-6):
    """The two runs' checkpoints of `step` hold the same variables, model and optimizer, within the tolerance."""
    a, b = checkpoint_values(dir_a, step), checkpoint_values(dir_b, step)
    assert sorted(a) == sorted(b)
    assert any("model" in n for n in a) and any("optimizer" in n for n in a)
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=rtol, atol=atol, err_msg=name)


def assert_bit_exact(dir_a, dir_b, step):
    """The two runs' checkpoints of `step` are equal to the last bit, optimizer slots included."""
    a, b = checkpoint_values(dir_a, step), checkpoint_values(dir_b, step)
    assert sorted(a) == sorted(b) and any("optimizer" in n for n in a)
    assert max(float(np.abs(a[n] - b[n]).max()) for n in a) == 0.0


def resize_spm(spm_path, vocab_size, out_path):
    """A copy of a SentencePiece model grown to `vocab_size` pieces (rare extra pieces appended): a real model whose
    size matches a test config's vocab_size."""
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    with open(spm_path, "rb") as f:
        have = spm.SentencePieceProcessor(model_proto=f.read()).GetPieceSize()
    add_spm_pieces(spm_path, [(f"\u2581zzextra{i}", -1000.0 - i) for i in range(vocab_size - have)], out_path)
    return out_path


def add_spm_pieces(spm_path, pieces, out_path):
    """A copy of a SentencePiece model with (piece, score) pairs appended as normal pieces. Written at the protobuf
    wire level (ModelProto field 1 is the repeated piece, each with field 1 the string and field 2 the float
    score): appended entries join the repeated field."""
    import struct  # pylint: disable=import-outside-toplevel

    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    def varint(n):
        out = b""
        while True:
            byte, n = n & 0x7F, n >> 7
            out += bytes([byte | (0x80 if n else 0)])
            if not n:
                return out

    with open(spm_path, "rb") as f:
        data = f.read()
    have = spm.SentencePieceProcessor(model_proto=data).GetPieceSize()
    for text, score in pieces:
        text = text.encode("utf-8")
        piece = b"\x0a" + varint(len(text)) + text + b"\x15" + struct.pack("<f", score)
        data += b"\x0a" + varint(len(piece)) + piece
    assert spm.SentencePieceProcessor(model_proto=data).GetPieceSize() == have + len(pieces)
    with open(out_path, "wb") as f:
        f.write(data)
    return out_path


# ------------------------------------------------------------------------------------ serving exports
# Every op type the export's graph may hold. Source: TF Serving's model server links all of TensorFlow's core
# kernels (tensorflow/core/kernels via //tensorflow/core:all_kernels) and, from 2.20 on, the op library of a current
# TensorFlow Text (SentencePiece, NormalizeUTF8; tensorflow/serving WORKSPACE/`tensorflow_text` dependency; servers
# 2.16-2.19 embed TF Text 2.12). Ops listed here are core TF ops unless prefixed with their TF Text library name.
TF_TEXT_OPS = {"SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceTokenizeWithOffsetsOp", "NormalizeUTF8"}
CORE_OPS = {
    "Add", "AddV2", "All", "Any", "Assert", "AssignVariableOp", "BatchMatMulV2", "BiasAdd", "Cast", "ConcatV2",
    "Const", "Cumsum", "Equal", "Erf", "Exp", "ExpandDims", "Fill", "FloorDiv", "FloorMod", "GatherV2",
    "Greater", "GreaterEqual", "Identity", "IdentityN", "Less", "LessEqual", "LogicalAnd", "LogicalNot",
    "LogicalOr", "MatMul", "Max", "Maximum", "Mean", "Merge", "Min", "Minimum", "Mul", "NoOp", "NotEqual", "Pack",
    "PartitionedCall", "Placeholder", "Pow", "Prod", "RaggedGather", "RaggedRange", "RaggedTensorToTensor",
    "Range", "ReadVariableOp", "RealDiv", "RegexFullMatch", "RegexReplace", "Reshape", "Rsqrt", "Select",
    "SelectV2", "Shape", "Size", "Slice", "Softmax", "Split", "SplitV", "Sqrt", "SquaredDifference", "Squeeze",
    "StatefulPartitionedCall", "StaticRegexFullMatch", "StaticRegexReplace", "StopGradient", "StridedSlice",
    "StringJoin", "StringLower", "StringSplitV2", "Sub", "Sum", "Switch", "Tanh", "TensorListFromTensor",
    "TensorListGetItem", "TensorListReserve", "TensorListSetItem", "TensorListStack", "Tile", "TopKV2",
    "Transpose", "UnicodeTranscode", "Unique", "UnsortedSegmentJoin", "VarHandleOp", "Where", "ZerosLike",
    "SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename", "SaveSlices", "If",
    "StatelessIf", "While", "StatelessWhile", "Neg", "Square", "Log", "Abs", "OnesLike", "DivNoNan", "Floor",
    "Sign", "Relu", "Rank", "BroadcastTo", "BroadcastArgs", "ArgMax", "ReverseV2", "Cos", "Sin",
    "ReduceJoin", "StringLength", "Substr", "Bitcast", "Unpack", "ScatterNd", "TensorScatterUpdate", "Reciprocal",
    "RaggedTensorFromVariant", "RaggedTensorToVariant", "RaggedTensorToSparse", "DisableCopyOnRead", "Einsum",
    "DenseBincount", "UnsortedSegmentSum", "VarIsInitializedOp", "PlaceholderWithDefault", "Pad",
    # the SQuAD export's character offsets (tensorflow/core/kernels: unicode_ops, searchsorted_op, segment_reduction)
    "UnicodeDecode", "UnicodeDecodeWithOffsets", "UnicodeEncode", "LowerBound", "UnsortedSegmentMax",
    "UnsortedSegmentMin",
}


def op_types(saved_model_dir):
    """The op types a SavedModel's graph and functions hold (its own function names left out)."""
    from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=import-outside-toplevel

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    graph = proto.meta_graphs[0].graph_def
    ops = {node.op for node in graph.node}
    for function in graph.library.function:
        ops |= {node.op for node in function.node_def}
    return ops - {f.signature.name for f in graph.library.function}


def unregistered_ops(ops):
    """The ops (sorted) that are neither in CORE_OPS nor in TF_TEXT_OPS."""
    return sorted(set(ops) - CORE_OPS - TF_TEXT_OPS)


# ------------------------------------------------------------------------------------ released checkpoints
def write_tf1_checkpoints(jobs):
    """Writes checkpoints the way the original TF1 code does: tf.compat.v1 variables in a graph + Saver.

    `jobs`: [(directory, weights, prefix, with_optimizer_slots)]. One fresh process (tests/programs/
    write_tf1_checkpoints.py) writes them all, so TF1 graph mode stays out of the test process. Returns the
    checkpoint prefixes (DIR/model.ckpt-best).
    """
    args, paths = [], []
    for directory, weights, prefix, slots in jobs:
        os.makedirs(directory, exist_ok=True)
        npz = os.path.join(directory, "weights.npz")
        np.savez(npz, **{k.replace("/", "|"): v for k, v in weights.items()})
        paths.append(os.path.join(directory, "model.ckpt-best"))
        args.append(f"{npz}::{prefix}::{int(slots)}::{paths[-1]}")
    proc = run_program("write_tf1_checkpoints", *args, env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return paths


def write_hf_checkpoint(directory, cfg, tensors):
    """Writes a Hugging Face ALBERT directory: config.json (from `cfg`) and model.safetensors (`tensors`, named as
    Hugging Face names them)."""
    from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel

    os.makedirs(directory, exist_ok=True)
    hf_config = {k: v for k, v in cfg.items() if k != "hidden_act"}
    hf_config.update(hidden_act="gelu_new", model_type="albert", layer_norm_eps=1e-12,
                     architectures=["AlbertForPreTraining"], pad_token_id=0)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(hf_config, f)
    save_file(tensors, os.path.join(directory, "model.safetensors"))


def write_config(path, cfg):
    """Writes cfg as a released albert_config.json (with the original's unused keys); returns the path."""
    with open(path, "w") as f:
        json.dump({**cfg, "down_scale_factor": 1, "net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0,
                   "layers_to_keep": []}, f)  # the released files' unused keys must load
    return path


# ------------------------------------------------------------------------------------ serving in a fresh process
def serve_in_fresh_process(path, calls, work_dir):
    """Answers requests through the SavedModel at `path` in a fresh process that imports only TensorFlow and TF Text
    (tests/programs/serve_saved_model.py; it fails if albert_tf gets imported).

    Args:
      path: the SavedModel directory, or {call name: SavedModel directory}: one process (TensorFlow imported once)
        answers the calls of several SavedModels.
      calls: {name: (loader, signature, {input: array or list; strings as str})}; loader "tf2" (the loaded
        object's .signatures), "tf2-function" (its restored tf.function of that name: defaults apply) or "tf1"
        (TF Serving's way: a TF1 session, Session.run of the SignatureDef).
      work_dir: a directory for the request and answer files.
    Returns:
      {name: {output: numpy array (strings as str)}}.
    """
    inputs = {}
    for name, (_, _, arrays) in calls.items():
        assert "/" not in name, name
        inputs.update({f"{name}/{k}": np.asarray(v) for k, v in arrays.items()})
    inputs_path = os.path.join(work_dir, "serve_inputs.npz")
    out = os.path.join(work_dir, "serve_outputs.npz")
    np.savez(inputs_path, **inputs)
    script = program_path("serve_saved_model")
    paths = path if isinstance(path, dict) else dict.fromkeys(calls, path)
    result = subprocess.run(
        [sys.executable, script, json.dumps({n: [str(paths[n]), c[0], c[1]] for n, c in calls.items()}), inputs_path,
         out],
        capture_output=True, text=True, check=False, cwd=work_dir, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    served = dict(np.load(out))
    return {name: {k.split("/", 1)[1]: v for k, v in served.items() if k.split("/", 1)[0] == name}
            for name in calls}
