"""What `albert-tf export --dtype bfloat16` changes: its outputs against the float32 export on real text.

    python benchmarks/export_dtype.py --model DIR --text PATH [--spm-model PATH] [--max-seq-length 128]

DIR is a pretrained-model directory or a fine-tuned classifier's `OUTPUT/best` (`albert-tf finetune`). Both
dtypes are exported from it (`export_encoder`, no warm-up records) and loaded in this process; the sentences are
the lines of PATH (a file, or every file under a directory; the text before the first tab, lines of fewer than 3
words skipped), the first `--sentences`, sent in batches of `--batch-size` to serving_default.
Printed: max and mean |Δ| of pooled_output and of sequence_output at real tokens, beside the largest |value| of the
float32 export; with a classifier head in DIR's checkpoint (`model/head`), its logits on both exports' pooled
outputs: max |Δ| and the share of sentences whose argmax (the served label) is the same.
"""
import argparse
import os
import sys
import tempfile

import common

HEAD = "model/head/_kernel/.ATTRIBUTES/VARIABLE_VALUE", "model/head/bias/.ATTRIBUTES/VARIABLE_VALUE"


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="a pretrained-model directory or a fine-tuned OUTPUT/best")
    p.add_argument("--text", required=True, help="a text file or a directory of them")
    p.add_argument("--spm-model", default=None, help="the SentencePiece model (default: DIR/spm.model)")
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--sentences", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=32)
    return p.parse_args(argv)


def read_sentences(path, count):
    """The first `count` lines of PATH (a file or every file under a directory, sorted) with at least 3 words, each
    cut at its first tab."""
    files = ([os.path.join(d, n) for d, _, names in sorted(os.walk(path)) for n in sorted(names)]
             if os.path.isdir(path) else [path])
    sentences = []
    for name in files:
        with open(name, encoding="utf-8", errors="replace") as f:
            for line in f:
                text = line.split("\t", 1)[0].strip()
                if len(text.split()) >= 3:
                    sentences.append(text)
                    if len(sentences) == count:
                        return sentences
    return sentences


def main(args):
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.serving.encoder_export import export_encoder  # pylint: disable=import-outside-toplevel

    sentences = read_sentences(args.text, args.sentences)
    outputs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in ("float32", "bfloat16"):
            path = export_encoder(args.model, os.path.join(tmp, dtype), seq_length=args.max_seq_length,
                                  spm_model=args.spm_model, warmup=False, dtype=dtype)
            serve = tf.saved_model.load(path).signatures["text"]
            got = [serve(text_a=tf.constant(sentences[i:i + args.batch_size]))
                   for i in range(0, len(sentences), args.batch_size)]
            outputs[dtype] = {k: np.concatenate([g[k].numpy() for g in got]) for k in got[0]}
    f32, bf16 = outputs["float32"], outputs["bfloat16"]
    real = f32["input_mask"] > 0
    tokens = int(real.sum())
    print(f"{common.now()} {len(sentences)} sentences ({tokens} tokens) of {args.text}, model {args.model}")
    for key in ("pooled_output", "sequence_output"):
        a, b = (f32[key][real], bf16[key][real]) if key == "sequence_output" else (f32[key], bf16[key])
        diff = np.abs(a - b)
        print(f"{key}: max |diff| {diff.max():.3g}, mean {diff.mean():.3g} (float32 max |value| "
              f"{np.abs(a).max():.3g})", flush=True)
    names = {n for n, _ in tf.train.list_variables(args.model)}
    if all(h in names for h in HEAD):
        kernel, bias = (tf.train.load_variable(args.model, h) for h in HEAD)
        logits = {d: outputs[d]["pooled_output"] @ kernel + bias for d in outputs}
        same = float(np.mean(logits["float32"].argmax(-1) == logits["bfloat16"].argmax(-1)))
        print(f"classifier logits: max |diff| {np.abs(logits['float32'] - logits['bfloat16']).max():.3g}; "
              f"same label for {same:.4f} of the sentences", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(_parse_args()))
