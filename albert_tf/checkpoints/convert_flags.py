"""The flags of `albert-tf convert`, in a module that imports no TensorFlow (`--help` stays fast and quiet)."""
from albert_tf.checkpoints import releases
from albert_tf.text import vocabulary


def add_arguments(parser):
    """Adds every `convert` flag to `parser` (an argparse parser)."""
    parser.add_argument("--release", metavar="NAME",
                        help="Google's released weights by name, downloaded (resumed, checked) and cached: "
                             f"{', '.join(releases.NAMES)}; or hf:OWNER/NAME, a Hugging Face hub id (needs "
                             "huggingface_hub). Takes the place of --from/--checkpoint/--config/--spm-model "
                             "(no default)")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help=f"where --release keeps downloads (default: ${releases.CACHE_ENV}, else "
                             "~/.cache/albert_tf); a cached release needs no network")
    parser.add_argument("--from", dest="source", choices=("tf1", "hf"),
                        help="tf1: google-research/albert or TF-Hub checkpoint; hf: Hugging Face directory (required "
                             "without --release; no default)")
    parser.add_argument("--checkpoint",
                        help="tf1: the checkpoint prefix (e.g. PATH/model.ckpt-best); hf: the directory (required "
                             "without --release; no default)")
    parser.add_argument("--config", 
                        help="albert_config.json (default: tf1: albert_config.json beside the checkpoint; hf: the "
                             "directory's config.json)")
    parser.add_argument("--spm-model", 
                        help="the SentencePiece model to copy into the output as spm.model (default: hf: the "
                             "directory's spiece.model if any; tf1: none)")
    parser.add_argument("--output",
                        help="the pretrained-model directory to write (required without --release; with it the "
                             "default is CACHE/models/NAME, reused when already converted)")
    vocabulary.add_casing_arguments(parser)
