"""vocab figure: lines longer than SentencePiece's limit, cut into sentences vs the trainer's limit raised.

SentencePiece skips a sentence longer than its max_sentence_length (4192 bytes by default). `albert-tf vocab` cuts
such lines into sentences at sentence ends, else spaces, else character boundaries (albert_tf.data.corpus); the
other way is to raise the trainer's limit to the longest line. Three vocabularies of the same corpus:

    drop    the lines as they are, the default limit: long lines are skipped (what `vocab` did before the cut)
    split   `vocab` as it is: long lines cut into sentences of at most 4192 bytes
    raise   the lines as they are, max_sentence_length raised to the longest line

Real long-line text: the copyright files Debian packages install (/usr/share/doc/*/copyright), each paragraph
joined into one line, a blank line between files (or --corpus FILE). Each vocabulary is trained in a child process
(peak RSS from os.wait4, wall time); then the share of the corpus's text bytes each trainer saw, the pieces that
split and raise share, and the tokens per 1,000 text bytes of the long lines and of all lines under each model.
The last line is parseable:
    drop_seen=... split_seen=... raise_seen=... shared_pieces=... split_rss_mb=... raise_rss_mb=... ...
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import common

MODES = ("drop", "split", "raise")


def write_copyright_corpus(path):
    """Debian's copyright files → one paragraph per line, a blank line between files. Returns the path."""
    files = sorted(glob.glob("/usr/share/doc/*/copyright"))
    if not files:
        sys.exit("no /usr/share/doc/*/copyright files here: pass --corpus FILE (with lines over 4192 bytes)")
    with open(path, "w", encoding="utf-8") as out:
        for name in files:
            with open(name, encoding="utf-8", errors="replace") as f:
                paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", f.read()) if p.strip()]
            if paragraphs:
                out.write("\n".join(paragraphs) + "\n\n")
    return path


def child(mode, corpus, prefix, vocab_size):
    """Trains one vocabulary (in a fresh process); prints a JSON line: seconds and lines cut, or the error."""
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    from albert_tf.data import vocab  # pylint: disable=import-outside-toplevel

    if mode == "drop":  # the trainer's default limit whatever the lines: what it skips stays unseen
        train = spm.SentencePieceTrainer.train
        spm.SentencePieceTrainer.train = lambda **kw: train(**dict(kw, max_sentence_length=vocab.LINE_LIMIT))
    start = time.time()
    try:
        result = vocab.train_vocab(corpus, prefix, vocab_size=vocab_size,
                                   line_limit=vocab.LINE_LIMIT if mode == "split" else 1 << 40)
    except ValueError as e:  # e.g. drop: too little text left for the vocabulary size
        print(json.dumps({"error": str(e)}))
        return
    print(json.dumps({"seconds": time.time() - start, "split_lines": result.stats["split_lines"]}))


def run_child(mode, corpus, prefix, vocab_size):
    proc = subprocess.Popen([sys.executable, __file__, common.CHILD_FLAG, mode, corpus, prefix, str(vocab_size)],
                            stdout=subprocess.PIPE, env=common.child_env(), cwd=common.REPO)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status:
        sys.exit(f"{mode}: the child process failed (wait status {status})")
    result = json.loads(out.decode().strip().splitlines()[-1])
    result["rss_mb"] = usage.ru_maxrss / 1024
    return result


def long_lines_of(corpus, limit):
    """(the non-blank lines over `limit` bytes: what `drop` leaves unseen, all non-blank lines)."""
    with open(corpus, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    return [line for line in lines if len(line.encode("utf-8")) > limit], lines


def tokens_per_kb(model, lines):
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    tokenizer = AlbertTokenizer(model)
    tokens = sum(len(tokenizer.encode(line)) for line in lines)
    return 1000 * tokens / sum(len(line.encode("utf-8")) for line in lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", help="a text file with long lines (default: built from Debian's copyright files)")
    parser.add_argument("--vocab-size", type=int, default=8000)
    args = parser.parse_args()
    from albert_tf.data import vocab  # pylint: disable=import-outside-toplevel

    with tempfile.TemporaryDirectory() as work:
        corpus = args.corpus or write_copyright_corpus(os.path.join(work, "copyright.txt"))
        results = {mode: run_child(mode, corpus, os.path.join(work, mode), args.vocab_size) for mode in MODES}
        long_lines, lines = long_lines_of(corpus, vocab.LINE_LIMIT)
        long_share = sum(len(x.encode()) for x in long_lines) / sum(len(x.encode()) for x in lines)
        figures = {"long_lines": len(long_lines), "long_share": round(long_share, 4)}
        print(f"{len(lines)} lines, {len(long_lines)} over {vocab.LINE_LIMIT} bytes holding "
              f"{100 * long_share:.1f}% of the text; vocab size {args.vocab_size}")
        for mode, r in results.items():
            seen = 1 - long_share if mode == "drop" else 1.0
            if "error" in r:
                print(f"{mode:6s} failed: {r['error']}")
                continue
            model = os.path.join(work, mode + ".model")
            figures.update({f"{mode}_seen": round(seen, 4), f"{mode}_rss_mb": round(r["rss_mb"]),
                            f"{mode}_seconds": round(r["seconds"], 1),
                            f"{mode}_tokens_per_kb_long": round(tokens_per_kb(model, long_lines), 1),
                            f"{mode}_tokens_per_kb_all": round(tokens_per_kb(model, lines), 1)})
            print(f"{mode:6s} saw {100 * seen:5.1f}% of the text bytes, peak RSS {figures[f'{mode}_rss_mb']} MB, "
                  f"{figures[f'{mode}_seconds']} s; tokens per 1,000 bytes: long lines "
                  f"{figures[f'{mode}_tokens_per_kb_long']}, all {figures[f'{mode}_tokens_per_kb_all']}")
        pieces = {}
        for mode in ("split", "raise"):
            with open(os.path.join(work, mode + ".vocab"), encoding="utf-8") as f:
                pieces[mode] = {line.split("\t")[0] for line in f}
        figures["shared_pieces"] = round(len(pieces["split"] & pieces["raise"]) / len(pieces["split"]), 4)
    print(f"split and raise share {100 * figures['shared_pieces']:.1f}% of their pieces")
    print(" ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == common.CHILD_FLAG:
        child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
