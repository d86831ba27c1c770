"""How closely transformers and keras-hub run a model that `albert-tf convert --to hf` / `--to keras-hub` wrote:
max |Δ| per output against albert_tf on the same ids.

    python benchmarks/interchange.py [--config albert_base] [--sequences 4] [--seq-length 128] [--seed 0]
    python benchmarks/interchange.py --init HANDLE      # a pretrained model (any handle) instead

Without --init: an AlbertPretrainer of the preset's shapes whose every weight is random and nonzero (N(0, 0.02),
LayerNorm gains 1 + N(0, 0.02)), saved as a pretrained-model directory. The model is written by the command line
(`albert-tf convert --init DIR --to hf|keras-hub --output ...`) and loaded by the other side's own code:
transformers' AlbertModel and AlbertForPreTraining (`from_pretrained`, float32, CPU) and keras-hub's
AlbertBackbone (`from_preset`). The ids are uniform over [5, vocab_size), two segments, the last sequence padded
from 3/4 of its length; 20 masked positions per sequence.
Printed, per target: max |Δ| of sequence_output (real tokens), pooled_output, and (transformers' pretraining
model) the MLM logits at the masked positions and the SOP logits; albert_tf's largest |value| of each beside.
Needs the dev extra (torch, transformers, keras-hub).
"""
import argparse
import os
import sys
import tempfile

import numpy as np


def _parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="albert_base", help="a preset name or albert_config.json (random weights)")
    p.add_argument("--init", default=None, help="a pretrained model's handle instead of random weights")
    p.add_argument("--sequences", type=int, default=4)
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def random_model(config, seed, directory):
    """A pretrained-model directory holding an AlbertPretrainer of `config` with random nonzero weights."""
    from albert_tf import AlbertConfig, AlbertPretrainer  # pylint: disable=import-outside-toplevel

    model = AlbertPretrainer(AlbertConfig.from_preset(config) if not config.endswith(".json")
                             else AlbertConfig.from_json_file(config))
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        value = rng.normal(0.0, 0.02, variable.shape) + (1.0 if "gamma" in variable.path else 0.0)
        variable.assign(value.astype(np.float32))
    model.save_pretrained(directory)
    return directory


def random_inputs(config, sequences, length, seed):
    rng = np.random.default_rng(seed + 1)
    mask = np.ones([sequences, length], np.int32)
    mask[-1, length * 3 // 4:] = 0
    types = np.zeros([sequences, length], np.int32)
    types[:, length // 2:] = 1
    positions = np.stack([rng.choice(np.arange(1, length * 3 // 4), 20, replace=False) for _ in range(sequences)])
    return {"input_word_ids": rng.integers(5, config.vocab_size, [sequences, length]).astype(np.int32),
            "input_mask": mask, "input_type_ids": types, "masked_lm_positions": positions.astype(np.int32)}


def transformers_outputs(directory, inputs):
    import torch  # pylint: disable=import-outside-toplevel
    import transformers  # pylint: disable=import-outside-toplevel

    feed = {"input_ids": torch.tensor(inputs["input_word_ids"], dtype=torch.long),
            "attention_mask": torch.tensor(inputs["input_mask"], dtype=torch.long),
            "token_type_ids": torch.tensor(inputs["input_type_ids"], dtype=torch.long)}
    with torch.no_grad():
        base = transformers.AlbertModel.from_pretrained(directory).eval()(**feed)
        outputs = {"sequence_output": base.last_hidden_state.numpy(), "pooled_output": base.pooler_output.numpy()}
        if "AlbertForPreTraining" in open(os.path.join(directory, "config.json"), encoding="utf-8").read():
            heads = transformers.AlbertForPreTraining.from_pretrained(directory).eval()(**feed)
            positions = inputs["masked_lm_positions"].astype(np.int64)[..., None]
            outputs["mlm_logits"] = np.take_along_axis(heads.prediction_logits.numpy(), positions, axis=1)
            outputs["sop_logits"] = heads.sop_logits.numpy()
    return outputs


def keras_hub_outputs(directory, inputs):
    import keras_hub  # pylint: disable=import-outside-toplevel

    backbone = keras_hub.models.AlbertBackbone.from_preset(directory)
    out = backbone({"token_ids": inputs["input_word_ids"], "segment_ids": inputs["input_type_ids"],
                    "padding_mask": inputs["input_mask"]})
    return {name: np.asarray(value) for name, value in out.items()}


def max_diffs(theirs, ours, mask):
    """{output: (max |Δ|, albert_tf's max |value|)}; sequence_output at real tokens only."""
    found = {}
    for name, value in theirs.items():
        delta, scale = np.abs(value - ours[name]), np.abs(ours[name])
        if name == "sequence_output":
            delta, scale = delta[mask.astype(bool)], scale[mask.astype(bool)]
        found[name] = (float(delta.max()), float(scale.max()))
    return found


def main(argv=None):
    args = _parse_args(argv)
    import albert_tf  # pylint: disable=import-outside-toplevel
    from albert_tf.cli import main as cli  # pylint: disable=import-outside-toplevel

    with tempfile.TemporaryDirectory(prefix="albert_tf_interchange_") as tmp:
        init = args.init or random_model(args.config, args.seed, os.path.join(tmp, "model"))
        model = albert_tf.load_pretrained(init)
        inputs = random_inputs(model.config, args.sequences, args.seq_length, args.seed)
        ours = {k: np.asarray(v) for k, v in model(inputs, training=False).items() if k != "encoder_outputs"}
        print(f"albert_tf {type(model).__name__} of {args.init or args.config + ' (random weights)'}: "
              f"{args.sequences} x {args.seq_length} ids, seed {args.seed}")
        for target, read in (("hf", transformers_outputs), ("keras-hub", keras_hub_outputs)):
            output = os.path.join(tmp, target)
            if cli(["convert", "--init", init, "--to", target, "--output", output]) != 0:
                sys.exit(f"convert --to {target} failed")
            diffs = max_diffs(read(output, inputs), ours, inputs["input_mask"])
            print(f"{target:9s} " + "  ".join(f"{name} {d:.2e} (|max| {s:.3g})" for name, (d, s) in diffs.items()),
                  flush=True)


if __name__ == "__main__":
    main()
