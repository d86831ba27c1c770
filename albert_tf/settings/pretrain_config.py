"""`albert-tf pretrain`'s settings and result: `PretrainConfig`, `PretrainResult`, and the recipes (named presets of
the settings) with their one reader, `read_recipe`, for `albert-tf pretrain` and `albert-tf plan`. The call is
albert_tf/jobs/pretrain.py, the run albert_tf/training/pretraining.py. No TensorFlow.

    config = PretrainConfig(config="albert_base", train_data="data/train-*", model_dir="model", batch_size=256,
                            config_overrides={"vocab_size": 8000})
    PretrainConfig.from_recipe("paper_v2", config="albert_base", train_data=..., model_dir=...)

On the command line each field is a flag (`batch_size` → `--batch-size`, `config_overrides` → `--set KEY=VALUE`).
The model dir records the config (layout.PRETRAIN_RECORD_FILE); a resumed run must keep the fields marked
`same_on_resume`: those the data position depends on (the data order is a function of the seed and the step; a step
is a global batch). Others may change on a resume: a lower learning rate after a divergence, more steps, dropout
switched off.

`paper_v2` is the paper's setup (Lan et al., 2020, §4.1, and the v2 release): global batch 4096, LAMB learning rate
0.00176, 125,000 steps with 3,125 warm-up steps, sequences of 512 tokens with 20 masked positions, and no dropout
(the v2 models; paper §4.7). `paper_v1` is the same with the config's dropout (the v1 models); it equals the
defaults. `cpu_small` is a run one machine does in about an hour (a 2-layer, 256-wide model; see its entry).
`--recipe FILE.json` reads your own:

    {"description": "...", "base": "paper_v2", "flags": {"learning-rate": 0.001, "batch-size": 1024}}

with pretrain's flag names (without the leading dashes; field names such as `learning_rate` work too), over the
optional `base` preset. The order is: preset, then file, then the flags typed on the command line.
"""
import dataclasses
import json
import os

from albert_tf import run_config
from albert_tf.run_config import option
from albert_tf.runtime.signals import LOOP_SECONDS
from albert_tf.settings.defaults import MASKED_LM_PROB, PAPER, SEED
from albert_tf.settings.run_length import (check_run_batches, parse_phases, phase_bounds, run_phases,
                                           steps_for_tokens)
from albert_tf.settings.runtime_options import RuntimeOptions

COLLECTIVE_TIMEOUT_SECS = 300.0  # multi-worker: the longest a worker waits for its peers in one collective
# pretrain --schedule's names (albert_tf/training/schedules.py builds them); the first is the default
SCHEDULES = ("polynomial", "linear", "one-cycle", "wsd")
# pretrain --optimizer's names: LAMB (the paper's) and Keras' AdamW (albert_tf/training/pretrain_step.py)
PRETRAIN_OPTIMIZERS = ("lamb", "adamw")
# The fields that set a run's length: one of them (a budget replaces a recipe's --num-train-steps, and back)
LENGTH_FIELDS = ("num_train_steps", "budget_tokens", "budget_hours")
WSD_FIELDS = ("decay_start", "decay_length")  # the fields only --schedule wsd reads
DECAY_START, DECAY_LENGTH = 0.9, 0.1  # --schedule wsd's decay: from 90 % of the steps, over the last 10 %
HOURS_WARMUP = 2  # --budget-hours: the fewest warm-up steps (the step rate is measured within the warm-up)


@dataclasses.dataclass
class PretrainConfig(RuntimeOptions):  # pylint: disable=too-many-instance-attributes
    """Every setting of a pretraining run (see each field's help; `albert-tf pretrain --help` shows the same). Made,
    it is checked: every range and combination that needs no file (ValueError, one line naming the flag, as the
    CLI prints it); the files are checked when the run starts."""
    config: str = option(help="albert_config.json, a directory holding one, or a preset name (albert_base, ...)")
    train_data: str = option(help="glob of pretraining TFRecords (create-data's output)")
    model_dir: str = option(help="the pretrained-model directory to write (local or gs://)")
    config_overrides: dict = option(
        default_factory=dict, flag="--set", metavar="KEY=VALUE",
        help="change one key of --config (repeatable), e.g. --set vocab_size=8000; vocab_size=auto takes the "
             "--spm-model's size")
    eval_data: str | None = option(None, "glob of held-out pretraining TFRecords")
    max_seq_length: int = option(PAPER["max_seq_length"], "tokens per sequence (the records' length)",
                                 same_on_resume=True)
    max_predictions: int = option(PAPER["max_predictions"], "masked positions per sequence (max_predictions_per_seq)",
                                  same_on_resume=True)
    batch_size: int = option(PAPER["batch_size"], "the global batch, split across replicas",
                             aliases=("--train-batch-size",), same_on_resume=True)
    eval_batch_size: int | None = option(None, "global eval batch (default: --batch-size)")
    max_eval_steps: int = option(100, "batches per evaluation")
    eval_every_steps: int | None = option(None, "evaluate every N steps (default: at each checkpoint)")
    learning_rate: float = option(PAPER["learning_rate"], "the peak learning rate")
    num_train_steps: int = option(PAPER["num_train_steps"], "training steps in all")
    num_warmup_steps: int = option(PAPER["num_warmup_steps"], "steps of linear learning-rate warm-up")
    poly_power: float = option(1.0, "power of the polynomial decay")
    schedule: str = option(SCHEDULES[0], "the learning-rate schedule after the linear warm-up: polynomial (the "
                                         "paper's decay, --poly-power), linear (to 0 at the last step), one-cycle "
                                         "(a half cosine to 0 at the last step), wsd (the peak held, then a linear "
                                         "decay to 0: --decay-start, --decay-length)", choices=SCHEDULES)
    decay_start: float = option(DECAY_START, "with --schedule wsd: the step the decay starts at, a fraction of the "
                                             "steps")
    decay_length: float = option(DECAY_LENGTH, "with --schedule wsd: the decay's length, a fraction of the steps")
    optimizer: str = option(PRETRAIN_OPTIMIZERS[0], "lamb (the paper's) or adamw (Keras' AdamW: bias-corrected "
                                                    "Adam, weight decay 0.01 except LayerNorm and biases); both "
                                                    "after the global-norm clip at 1.0", choices=PRETRAIN_OPTIMIZERS,
                            same_on_resume=True)
    budget_tokens: int | None = option(
        None, "the run's length as tokens: --num-train-steps becomes the fewest steps whose batch x sequence "
              "tokens reach it (with --phases, summed over the phases), decided when the settings are made; "
              "replaces a recipe's --num-train-steps")
    budget_hours: float | None = option(
        None, "the run's length as hours of training steps: turned into a step count once, from the step rate "
              "measured after compilation (within the warm-up), and kept in the run record for every resume; "
              "replaces a recipe's --num-train-steps", same_on_resume=True)
    phases: str | None = option(
        None, "sequence-length phases in one run, SEQ:FRACTION[:BATCH],... (e.g. 128:0.9,512:0.1): each trains "
              "that fraction of the steps at that length (and global batch; default --batch-size), in order; "
              "--max-seq-length is the longest phase's, whose records --train-data holds", same_on_resume=True)
    phase_data: dict = option(
        default_factory=dict, flag="--phase-data", metavar="SEQ=GLOB",
        help="with --phases: the records of the phase of length SEQ (repeatable: one per phase shorter than "
             "--max-seq-length)")
    steps_per_loop: int = option(
        100, "the most steps per compiled host call (iterations_per_loop) and the steps per metrics row; a call "
             f"also ends after about {LOOP_SECONDS:g} s of wall time, so a stop signal is acted on within seconds")
    save_checkpoints_steps: int = option(5000, "save a checkpoint every N steps")
    save_checkpoints_secs: int = option(
        600, "also save when this many seconds have passed since the last save (0: off); bounds what a failure "
             "without notice loses")
    keep_checkpoint_max: int = option(5, "the newest checkpoints kept in the model dir, of any kind (the oldest are "
                                         "deleted): what a resume needs")
    keep_step_checkpoints: int | None = option(
        None, "the checkpoints of every --save-checkpoints-steps step are also kept apart in MODEL_DIR/steps/, out of "
              "reach of the clock saves' rotation: N keeps the newest N, 0 none (default: all), so a divergence "
              "noticed hours later can be rolled back")
    step_timeout: float = option(
        1800.0, "the command line exits 76 with one line when no training step, save or evaluation completes for this "
        "many seconds after the first step (a client hung on a lost TPU host; a relaunch resumes); 0: off")
    first_step_timeout: float = option(
        3600.0, "the same limit until the first step completes, counted from the start: it covers start-up, restore "
        "and XLA compile (10+ minutes for a large model on a pod); 0: off")
    no_dropout: bool = option(False, "train without dropout from the start")
    no_dropout_after_step: int | None = option(None, "remove dropout from this step on (paper §4.7)",)
    dynamic_masking: bool = option(False, "mask in the input pipeline (records made with --no-mask)",
                                   same_on_resume=True)
    masked_lm_prob: float = option(MASKED_LM_PROB, "with --dynamic-masking: the fraction of each sequence's tokens "
                                                   "masked (capped at --max-predictions); records made with masks "
                                                   "keep theirs", same_on_resume=True)
    sop_weight: float = option(1.0, "the sentence-order loss's weight in the trained loss, MLM + W x SOP (the "
                                    "paper's 1; 0 trains on MLM alone, the SOP head still measured and logged)",
                               same_on_resume=True)
    init: str | None = option(None, "the pretrained model to start from, its encoder and heads (weights only: the "
                                    "optimizer starts afresh): a pretrained-model directory, a released model's name "
                                    "(albert_base_v2, hf:OWNER/NAME) or a Hugging Face AlbertForPreTraining "
                                    "directory; not an export (it holds no heads)", aliases=("--init-checkpoint",))
    spm_model: str | None = option(None, "SentencePiece model copied into the model dir as spm.model")
    allow_unchecked_records: bool = option(
        False, "read records that carry no vocabulary fingerprint (no record-count index DIR/.NAME.record_counts.json "
               "beside them, as the original tool's, or an older release's index), unchecked against the vocabulary; "
               "without it they are refused when a vocabulary is known")
    seed: int = option(SEED, "seeds the data order and masking (the model init too)", same_on_resume=True)
    collective_timeout_secs: float = option(
        COLLECTIVE_TIMEOUT_SECS, "multi-worker runs (TF_CONFIG): a collective that waits longer than this for a peer "
        "worker fails and the run exits 76 to be relaunched (a hung peer; a dead one is noticed within seconds from "
        "its missing heartbeats); longer than any save or evaluation one worker does alone; 0: no limit")
    streams: int | None = option(
        None, "split each replica's batch into N slices that run through the encoder concurrently (on CPU this "
              "overlaps elementwise kernels with matmuls; default: 2 on CPU without --remat, else 1)")
    remat: bool = option(False, "rematerialization: keep only each block's input for the backward pass and "
                                "recompute the block there (one more forward of the blocks per step; a fraction of "
                                "the activation memory)")
    gradient_accumulation_steps: int = option(
        1, "run each replica's batch as N micro-batches whose gradients are summed before one LAMB update "
           "(activation memory of one micro-batch; the same loss, steps and schedule)")

    def __post_init__(self):
        run_config.check_fields(self, PretrainConfig.check)

    def check(self):
        """The ranges and combinations that need no file: positive sizes and counts, the time limits and warm-up
        >= 0, the masking settings (check_masking), a warm-up shorter than the run, the runtime block's checks (with
        --tpu the paths on Cloud Storage). The files are checked when the run starts."""
        run_config.check_minimum(self, POSITIVE_FIELDS, 1, "positive")
        run_config.check_minimum(self, NON_NEGATIVE_FIELDS, 0, ">= 0")
        run_config.check_range(self, ("sop_weight",), lambda value: 0 <= value < float("inf"), "a finite number >= 0")
        self.check_masking()
        check_predictions(self)
        self.check_phases()
        self.decide_length()
        if self.num_warmup_steps >= self.num_train_steps:
            length = (f"the {self.num_train_steps:,} steps of --budget-tokens {self.budget_tokens:,}"
                      if self.budget_tokens else f"--num-train-steps {self.num_train_steps:,}")
            raise ValueError(f"--num-warmup-steps {self.num_warmup_steps:,} is not less than {length}: the learning "
                             "rate would still be warming up when the run ends; give fewer warm-up steps (the "
                             f"paper's share, 2.5%, is {paper_warmup(self.num_train_steps):,})")
        self.check_schedule()
        self.check_runtime({**{run_config.flag_for(self, name): getattr(self, name) for name in PATH_FIELDS},
                            **{f"--phase-data {seq}": glob for seq, glob in self.phase_data.items()}})

    def decide_length(self):
        """The run's length (decide_length: one budget at most, --budget-tokens sets --num-train-steps); with
        --budget-hours a warm-up of at least HOURS_WARMUP steps, in which the rate is measured."""
        decide_length(self)
        if self.budget_hours is not None and self.num_warmup_steps < HOURS_WARMUP:
            raise ValueError(f"--budget-hours needs --num-warmup-steps >= {HOURS_WARMUP}, got "
                             f"{self.num_warmup_steps}: the step rate is measured within the warm-up, whose "
                             "learning rate does not depend on the run's length")

    def check_schedule(self):
        """--decay-start and --decay-length: fractions of the steps, only with --schedule wsd, the decay after the
        warm-up and ending by the last step (with --budget-hours the warm-up is compared when the length is
        known)."""
        if self.schedule != "wsd":
            for name in ("decay_start", "decay_length"):
                if getattr(self, name) != run_config.default_for(self, name):
                    raise ValueError(f"{run_config.flag_for(self, name)} {getattr(self, name)} needs --schedule wsd")
            return
        if not 0 < self.decay_length <= 1 or not 0 <= self.decay_start <= 1 - self.decay_length + 1e-9:
            raise ValueError(f"--decay-start {self.decay_start} and --decay-length {self.decay_length}: expected "
                             "fractions of the steps with --decay-length > 0 and their sum <= 1")
        if self.budget_hours is None and self.decay_start * self.num_train_steps < self.num_warmup_steps:
            raise ValueError(f"--decay-start {self.decay_start} is step {self.decay_start * self.num_train_steps:g}, "
                             f"inside the warm-up of {self.num_warmup_steps:,} steps")

    def check_phases(self):
        """--phases (run_length.parse_phases) with the longest phase at --max-seq-length (--train-data's records),
        --max-predictions within every phase's length, one --phase-data SEQ=GLOB per other phase and none else."""
        self.phase_data = {str(seq): glob for seq, glob in self.phase_data.items()}  # a JSON recipe's keys
        if not self.phases:
            if self.phase_data:
                raise ValueError("--phase-data needs --phases")
            return
        phases = check_phase_lengths(self)
        longest = self.max_seq_length  # (the longest phase's)
        wanted = sorted({str(p.seq_length) for p in phases if p.seq_length != longest})
        if sorted(self.phase_data) != wanted:
            raise ValueError(f"--phases {self.phases}: give the records of each shorter phase, --phase-data SEQ=GLOB "
                             f"for SEQ in {', '.join(wanted)} (got {', '.join(sorted(self.phase_data)) or 'none'})")

    def run_phases(self):
        """The run's phases (run_length.Phase, each with its batch): --phases, or one phase of --max-seq-length."""
        return run_phases(self.phases, self.max_seq_length, self.batch_size)

    def phase_steps(self):
        """[(Phase, first step, end step)] of the run (run_length.phase_bounds over --num-train-steps)."""
        phases = self.run_phases()
        return [(p, *bounds) for p, bounds in zip(phases, phase_bounds(phases, self.num_train_steps))]

    def phase_data_of(self, phase):
        """The records of `phase` (a run_length.Phase): --phase-data's glob, or --train-data for the longest."""
        return self.phase_data.get(str(phase.seq_length), self.train_data)

    def check_masking(self):
        """--masked-lm-prob's range, and that it changes only what --dynamic-masking masks (records made with masks
        carry their own)."""
        if not 0 < self.masked_lm_prob <= 1:
            raise ValueError(f"--masked-lm-prob must be in (0, 1], got {self.masked_lm_prob}")
        default = run_config.default_for(self, "masked_lm_prob")
        if self.masked_lm_prob != default and not self.dynamic_masking:
            raise ValueError(f"--masked-lm-prob {self.masked_lm_prob} needs --dynamic-masking: records made with "
                             "masks carry their own (create-data --masked-lm-prob)")

    @classmethod
    def from_recipe(cls, recipe, **values):
        """A recipe (a name in RECIPES or a .json file) with `values` over it (`config_overrides` key by key)."""
        return cls(**over_recipe(read_recipe(recipe), values))


def check_predictions(config):
    """Refuses a --max-predictions over --max-seq-length (`config`: a PretrainConfig or a PlanConfig)."""
    if config.max_predictions > config.max_seq_length:
        raise ValueError(f"--max-predictions {config.max_predictions} exceeds --max-seq-length "
                         f"{config.max_seq_length}")


def check_phase_lengths(config):
    """--phases of `config` (a PretrainConfig or a PlanConfig; run_length.parse_phases) with the longest phase at
    --max-seq-length (--train-data's records), --max-predictions within every phase's length and no length twice
    with the same batch (run_length.check_run_batches). Returns the phases."""
    phases = parse_phases(config.phases)
    check_run_batches(run_phases(config.phases, config.max_seq_length, config.batch_size))
    longest = max(p.seq_length for p in phases)
    if longest != config.max_seq_length:
        raise ValueError(f"--phases {config.phases}: the longest phase ({longest}) must be --max-seq-length "
                         f"({config.max_seq_length}), the length of --train-data's records")
    for phase in phases:
        if config.max_predictions > phase.seq_length:
            raise ValueError(f"--max-predictions {config.max_predictions} exceeds the phase length "
                             f"{phase.seq_length} of --phases {config.phases}")
    return phases


def decide_length(config):
    """The run's length of `config` (a PretrainConfig or a PlanConfig: pretrain's flags): one budget at most;
    --budget-tokens sets --num-train-steps (run_length.steps_for_tokens over the run's phases; a --num-train-steps
    other than its default and that count is refused: give one); --budget-hours leaves it to the run (one phase)."""
    if config.budget_tokens is not None and config.budget_hours is not None:
        raise ValueError("--budget-tokens and --budget-hours are exclusive: give one budget")
    run_config.check_minimum(config, ("budget_tokens",), 1, "positive")
    if config.budget_hours is not None and not config.budget_hours > 0:
        raise ValueError(f"--budget-hours must be positive, got {config.budget_hours}")
    default = run_config.default_for(config, "num_train_steps")
    if config.budget_tokens is not None:
        steps = steps_for_tokens(run_phases(config.phases, config.max_seq_length, config.batch_size),
                                 config.budget_tokens, config.batch_size)
        if config.num_train_steps not in (default, steps):
            raise ValueError(f"--num-train-steps {config.num_train_steps:,} and --budget-tokens "
                             f"{config.budget_tokens:,} ({steps:,} steps) disagree: give one")
        config.num_train_steps = steps
    if config.budget_hours is not None and config.phases:
        raise ValueError("--budget-hours and --phases are exclusive: the count is decided from the first "
                         "phase's step rate, before the later phases' are known; give --budget-tokens")


def at_pod_defaults(config):
    """Whether `config` (a PretrainConfig or a PlanConfig) is left at the pod recipe's batch and steps (4096 ×
    125,000: PretrainConfig's defaults, the paper's run), which `pretrain` refuses on a CPU (check_cpu_run)."""
    return all(getattr(config, name) == run_config.default_for(PretrainConfig, name)
               for name in ("batch_size", "num_train_steps"))


def check_cpu_run(config):
    """Refuses a run on this machine's CPU left at the pod recipe's batch and steps (weeks here): one line asking
    for both, and where to size them."""
    if at_pod_defaults(config):
        raise ValueError(
            f"--batch-size {config.batch_size} and --num-train-steps {config.num_train_steps:,} are the pod recipe's "
            "defaults (weeks of training on a CPU); give both for this machine, e.g. --batch-size 32 "
            "--num-train-steps 2000 --num-warmup-steps 200 (`albert-tf plan --config CONFIG --topology cpu` says "
            "how long they take here and prints a run of about an hour that fits)")


def paper_warmup(num_train_steps):
    """The paper's share of warm-up steps, 2.5 % (3,125 of 125,000), for a run of `num_train_steps`."""
    return num_train_steps * 25 // 1000


# The fields checked when a PretrainConfig is made (None, an unset optional field, passes).
POSITIVE_FIELDS = ("max_seq_length", "max_predictions", "batch_size", "num_train_steps", "steps_per_loop",
                   "save_checkpoints_steps", "keep_checkpoint_max", "max_eval_steps", "gradient_accumulation_steps",
                   "streams")
NON_NEGATIVE_FIELDS = ("num_warmup_steps", "save_checkpoints_secs", "collective_timeout_secs", "step_timeout",
                       "first_step_timeout", "keep_step_checkpoints")
PATH_FIELDS = ("train_data", "eval_data", "model_dir", "init")  # with --tpu: on Cloud Storage


@dataclasses.dataclass
class PretrainResult:
    """What `albert_tf.pretrain` returns.

    status: "done" (trained to num_train_steps), "complete" (the model dir already was), "stopped" (a signal:
      saved, the same config resumes) or "non-finite" (a loss was NaN/inf: stopped without saving).
    step: the last trained (or restored) step. checkpoint: the latest checkpoint's path, or None.
    metrics: the last `train` metrics row (loss, masked_lm_accuracy, ...), eval_metrics: the last `eval` row
      ({} when none ran in this call). exit_code: the CLI's (albert_tf.runtime.exit_codes: 0 done or complete,
      75 stopped by SIGTERM, 130 by SIGINT, 3 non-finite).
    """
    status: str
    step: int
    model_dir: str
    checkpoint: str | None = None
    metrics: dict = dataclasses.field(default_factory=dict)
    eval_metrics: dict = dataclasses.field(default_factory=dict)
    exit_code: int = 0


# ---------------------------------------------------------------------------------------------- recipes
CPU_SMALL_MODEL = {"vocab_size": 8000, "embedding_size": 128, "hidden_size": 256, "num_hidden_layers": 2,
                   "num_hidden_groups": 1, "inner_group_num": 1, "num_attention_heads": 4, "intermediate_size": 1024,
                   "hidden_act": "gelu", "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
                   "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02}
RECIPES = {
    "paper_v2": {"description": "the ALBERT paper's pretraining (v2 models: no dropout)",
                 "values": {**PAPER, "no_dropout": True}},
    "paper_v1": {"description": "the ALBERT paper's pretraining (v1 models: the config's dropout)",
                 "values": dict(PAPER)},
    # BERT's recipe at ALBERT's tokens: paper_v2's 125,000 x 4096 x 512 tokens, 90 % of the steps at length 128 and
    # 10 % at 512 (Devlin et al. 2019, §A.2), so 384,616 steps (346,154 at 128 and 38,462 at 512: the fewest whose
    # tokens reach paper_v2's), with the paper's warm-up share (2.5 %: 9,615 steps).
    "paper_v2_phased": {"description": "paper_v2's tokens with 90 % of the steps at sequence length 128 and 10 % at "
                                       "512, as BERT did (give --phase-data 128=GLOB: records of length 128)",
                        "values": {**{k: v for k, v in PAPER.items() if k != "num_train_steps"}, "no_dropout": True,
                                   "phases": "128:0.9,512:0.1", "num_warmup_steps": 9615,
                                   "budget_tokens": PAPER["num_train_steps"] * PAPER["batch_size"]
                                   * PAPER["max_seq_length"]}},
    # A laptop's run (docs/fine-tuning-quality.md "Does pretraining help?" measures what it buys): a 2-layer,
    # 256-wide ALBERT at seq 64, batch 128, 6,600 steps (244 examples/s in `pretrain` on a quiet 2-core Xeon without
    # AMX: 55-58 min; with AMX sooner). 2 layers, not 4: per token the two depths learned alike there, and in the same
    # hour the 2-layer model saw 1.8x the tokens and beat the 4-layer one at every label count. Re-masked every step
    # (a static mask on a laptop-sized corpus is memorised), no dropout (it only slows a model this far from fitting
    # its corpus), LAMB at 5e-3 (between the 1e-2 at batch 32 that trains the 128-wide model of DESIGN.md's measured
    # facts and the paper's 1.76e-3 at batch 4096) with a 6 % warm-up. Its --set gives every size of the model, so
    # any --config preset yields the same model.
    "cpu_small": {"description": "a pretraining a laptop can do in about an hour: 2 layers, 256 wide, E 128, "
                                 "8000-piece vocabulary, seq 64, batch 128, 6600 steps, dynamic masking (records "
                                 "made with --no-mask)",
                  "values": {"config_overrides": CPU_SMALL_MODEL,
                             "batch_size": 128, "max_seq_length": 64, "max_predictions": 10,
                             "dynamic_masking": True, "no_dropout": True, "learning_rate": 0.005,
                             "num_train_steps": 6600, "num_warmup_steps": 412, "save_checkpoints_steps": 600,
                             "steps_per_loop": 50}},
}
_FILE_FIELDS = ("description", "base", "flags")


def _read_file(recipe):
    """The JSON object of a recipe file; one line naming the file when it is missing or malformed."""
    if not os.path.exists(recipe):
        raise FileNotFoundError(f"--recipe {recipe}: no such file")
    with open(recipe, encoding="utf-8") as f:
        try:
            values = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{recipe}: not valid JSON ({e})") from None
    if not isinstance(values, dict) or not isinstance(values.get("flags"), dict):
        raise ValueError(f"{recipe}: field 'flags': expected an object of pretrain flags, e.g. "
                         '{"flags": {"learning-rate": 0.00176}}')
    unknown = sorted(set(values) - set(_FILE_FIELDS))
    if unknown:
        raise ValueError(f"{recipe}: unknown field(s) {', '.join(unknown)}; expected {', '.join(_FILE_FIELDS)}")
    if values.get("base") is not None and values["base"] not in RECIPES:
        raise ValueError(f"{recipe}: field 'base': expected one of {', '.join(RECIPES)}, got {values['base']!r}")
    return values


def replaced_in_recipe(recipe_values, values):
    """The recipe's fields that `values` replace besides their own: a length (LENGTH_FIELDS: --num-train-steps or a
    budget) given over a recipe replaces the recipe's length, whichever field holds it; a --schedule other than wsd
    given over a recipe replaces the recipe's wsd decay (WSD_FIELDS), which only wsd reads."""
    dropped = set()
    if any(name in values for name in LENGTH_FIELDS):
        dropped |= {name for name in LENGTH_FIELDS if name in recipe_values and name not in values}
    if values.get("schedule", "wsd") != "wsd":
        dropped |= {name for name in WSD_FIELDS if name in recipe_values and name not in values}
    return dropped


def over_recipe(recipe_values, values):
    """`values` ({field: value}: typed flags, keyword arguments) over a recipe's values; `config_overrides` (`--set`)
    merge key by key, so `--set vocab_size=4000` changes one key of the recipe's model and keeps the others; a
    length given replaces the recipe's (replaced_in_recipe)."""
    dropped = replaced_in_recipe(recipe_values, values)
    merged = {**{k: v for k, v in recipe_values.items() if k not in dropped}, **values}
    if "config_overrides" in recipe_values and "config_overrides" in values:
        merged["config_overrides"] = {**recipe_values["config_overrides"], **values["config_overrides"]}
    return merged


def read_recipe(recipe):
    """A recipe's PretrainConfig values {field: value}: a name in RECIPES, or a .json file (its `base` preset's
    values, then its flags). A misspelled flag or a value of the wrong type is refused with one line."""
    if recipe in RECIPES:
        return dict(RECIPES[recipe]["values"])
    if not str(recipe).endswith(".json"):
        raise ValueError(f"--recipe {recipe!r}: unknown; expected one of {', '.join(RECIPES)} or a .json file")
    values = _read_file(recipe)
    base = dict(RECIPES[values["base"]]["values"]) if values.get("base") else {}
    return {**base, **run_config.values_from_mapping(PretrainConfig, values["flags"], f"--recipe {recipe}")}


__all__ = ["PretrainConfig", "PretrainResult", "RECIPES", "CPU_SMALL_MODEL", "read_recipe", "over_recipe",
           "replaced_in_recipe", "SCHEDULES", "DECAY_START", "DECAY_LENGTH", "PRETRAIN_OPTIMIZERS", "LENGTH_FIELDS",
           "WSD_FIELDS", "HOURS_WARMUP",
           "COLLECTIVE_TIMEOUT_SECS", "POSITIVE_FIELDS", "NON_NEGATIVE_FIELDS", "PATH_FIELDS", "check_predictions",
           "check_phase_lengths", "decide_length", "paper_warmup"]
