"""The flags of `albert-tf convert`, in a module that imports no TensorFlow (`--help` stays fast and quiet)."""
from albert_tf.text import vocabulary


def add_arguments(parser):
    """Adds every `convert` flag to `parser` (an argparse parser)."""
    parser.add_argument("--from", dest="source", required=True, choices=("tf1", "hf"),
                        help="tf1: google-research/albert or TF-Hub checkpoint; hf: Hugging Face directory")
    parser.add_argument("--checkpoint", required=True,
                        help="tf1: the checkpoint prefix (e.g. PATH/model.ckpt-best); hf: the directory")
    parser.add_argument("--config", 
                        help="albert_config.json (default: tf1: albert_config.json beside the checkpoint; hf: the "
                             "directory's config.json)")
    parser.add_argument("--spm-model", 
                        help="the SentencePiece model to copy into the output as spm.model (default: hf: the "
                             "directory's spiece.model if any; tf1: none)")
    parser.add_argument("--output", required=True, help="the pretrained-model directory to write")
    vocabulary.add_casing_arguments(parser)
