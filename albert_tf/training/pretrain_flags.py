"""The flags of `albert-tf pretrain`, in a module that imports no TensorFlow: `albert-tf pretrain --help` builds
its parser from here and stays fast and quiet (albert_tf/training/pretrain.py does the work)."""
from albert_tf.training import recipes

LOOP_SECONDS = 10.0  # the wall time of one compiled call once the step time is known (loop.LoopLength)
COLLECTIVE_TIMEOUT_SECS = 300.0  # multi-worker: the longest a worker waits for its peers in one collective


def add_arguments(parser):
    """Adds every `pretrain` flag to `parser` (an argparse parser); `--recipe` last."""
    a = parser.add_argument
    a("--config", required=True, help="albert_config.json, a directory holding one, or a preset name")
    a("--train-data", required=True, help="glob of pretraining TFRecords (create-data's output)")
    a("--model-dir", required=True, help="the pretrained-model directory to write (local or gs://)")
    a("--tpu", default=None, help="TPU name or address (`local` on a TPU VM); data and model dir must be gs://")
    a("--eval-data", default=None, help="glob of held-out pretraining TFRecords")
    a("--max-seq-length", type=int, default=512, help="tokens per sequence (the records' length)")
    a("--max-predictions", type=int, default=20, help="masked positions per sequence (max_predictions_per_seq)")
    a("--train-batch-size", type=int, default=4096, help="the global batch, split across replicas")
    a("--eval-batch-size", type=int, default=None, help="global eval batch (default: the train batch size)")
    a("--max-eval-steps", type=int, default=100, help="batches per evaluation")
    a("--eval-every-steps", type=int, default=None, help="evaluate every N steps (default: at each checkpoint)")
    a("--learning-rate", type=float, default=0.00176, help="the peak learning rate")
    a("--num-train-steps", type=int, default=125000, help="training steps in all")
    a("--num-warmup-steps", type=int, default=3125, help="steps of linear learning-rate warm-up")
    a("--poly-power", type=float, default=1.0, help="power of the polynomial decay")
    a("--steps-per-loop", type=int, default=100,
      help="the most steps per compiled host call (iterations_per_loop) and the steps per metrics row; a call "
           f"also ends after about {LOOP_SECONDS:g} s of wall time, so a stop signal is acted on within seconds")
    a("--save-checkpoints-steps", type=int, default=5000, help="save a checkpoint every N steps")
    a("--save-checkpoints-secs", type=int, default=600,
      help="also save when this many seconds have passed since the last save (0: off); bounds what a failure "
           "without notice loses")
    a("--keep-checkpoint-max", type=int, default=5, help="checkpoints kept (the oldest are deleted)")
    a("--dtype", choices=("float32", "bfloat16"), default=None,
      help="compute dtype; variables stay float32 (default: bfloat16 on TPU, float32 elsewhere)")
    a("--xla", choices=("auto", "on", "off"), default="auto",
      help="jit-compile the forward/backward on GPU/CPU (TPU always compiles); auto: on for GPU, off for CPU")
    a("--no-dropout", action="store_true", help="train without dropout from the start")
    a("--no-dropout-after-step", type=int, default=None, help="remove dropout from this step on (paper §4.7)")
    a("--dynamic-masking", action="store_true", help="mask in the input pipeline (records made with --no-mask)")
    a("--init-checkpoint", default=None, help="a pretrained-model directory to start from (weights only)")
    a("--spm-model", default=None, help="SentencePiece model copied into the model dir as spm.model (default: none)")
    a("--seed", type=int, default=12345, help="seeds the data order and masking (the model init too)")
    a("--cpu-replicas", type=int, default=None, help="split the CPU into N replicas (tests the distributed path)")
    a("--collective-timeout-secs", type=float, default=COLLECTIVE_TIMEOUT_SECS,
      help="multi-worker runs (TF_CONFIG): a collective that waits longer than this for a peer worker fails and "
           "the run exits 76 to be relaunched (a hung peer; a dead one is noticed within seconds from its missing "
           "heartbeats); longer than any save or evaluation one worker does alone; 0: no limit")
    a("--streams", type=int, default=None,
      help="split each replica's batch into N slices that run through the encoder concurrently (on CPU this "
           "overlaps elementwise kernels with matmuls; default: 2 on CPU without --remat, else 1)")
    a("--remat", action="store_true",
      help="rematerialization: keep only each block's input for the backward pass and recompute the block there "
           "(one more forward of the blocks per step; a fraction of the activation memory)")
    a("--gradient-accumulation-steps", type=int, default=1,
      help="run each replica's batch as N micro-batches whose gradients are summed before one LAMB update "
           "(activation memory of one micro-batch; the same loss, steps and schedule)")
    recipes.add_arguments(parser)  # --recipe paper_v2 etc.: last, it marks the defaults above (typed flags win)
