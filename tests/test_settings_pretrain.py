"""The configs of pretrain, vocab, create-data, quickstart and plan are checked when they are made: every invalid
input of the tables below is refused by the Python constructor (ValueError, one line naming the flag) and by the
command line (exit 2, the same line after `albert-tf CMD: error: `), before anything runs. The messages are written
out here, not imported. Also: the batch plan's arithmetic, by hand."""
import pytest

from albert_tf import run_config
from albert_tf.settings.create_data_config import CreateDataConfig
from albert_tf.settings.plan_config import PlanConfig
from albert_tf.settings.pretrain_config import PretrainConfig
from albert_tf.settings.quickstart_config import QuickstartConfig
from albert_tf.settings.vocab_config import VocabConfig
from albert_tf.training.batch_plan import BatchPlan, plan_batches

# command: (config class, the required values every case starts from)
BASES = {
    "pretrain": (PretrainConfig, {"config": "albert_tiny", "train_data": "data/train-*", "model_dir": "model"}),
    "vocab": (VocabConfig, {"input": "corpus.txt", "output_prefix": "work/spm"}),
    "create-data": (CreateDataConfig, {"input": "corpus.txt", "spm_model": "spm.model", "output": "data/train"}),
    "quickstart": (QuickstartConfig, {}),
    "plan": (PlanConfig, {"config": "albert_base", "topology": "v3-32"}),
}

INVALID = [
    # pretrain: sizes and counts, time limits, masking, lengths, warm-up, the runtime block
    ("pretrain", {"batch_size": 0}, "--batch-size must be positive, got 0"),
    ("pretrain", {"max_seq_length": -1}, "--max-seq-length must be positive, got -1"),
    ("pretrain", {"num_train_steps": 0}, "--num-train-steps must be positive, got 0"),
    ("pretrain", {"steps_per_loop": 0}, "--steps-per-loop must be positive, got 0"),
    ("pretrain", {"save_checkpoints_steps": 0}, "--save-checkpoints-steps must be positive, got 0"),
    ("pretrain", {"keep_checkpoint_max": 0}, "--keep-checkpoint-max must be positive, got 0"),
    ("pretrain", {"max_eval_steps": 0}, "--max-eval-steps must be positive, got 0"),
    ("pretrain", {"gradient_accumulation_steps": 0}, "--gradient-accumulation-steps must be positive, got 0"),
    ("pretrain", {"streams": 0}, "--streams must be positive, got 0"),
    ("pretrain", {"num_warmup_steps": -1}, "--num-warmup-steps must be >= 0, got -1"),
    ("pretrain", {"save_checkpoints_secs": -5}, "--save-checkpoints-secs must be >= 0, got -5"),
    ("pretrain", {"step_timeout": -1.0}, "--step-timeout must be >= 0, got -1.0"),
    ("pretrain", {"first_step_timeout": -2.0}, "--first-step-timeout must be >= 0, got -2.0"),
    ("pretrain", {"collective_timeout_secs": -1.0}, "--collective-timeout-secs must be >= 0, got -1.0"),
    ("pretrain", {"keep_step_checkpoints": -1}, "--keep-step-checkpoints must be >= 0, got -1"),
    ("pretrain", {"masked_lm_prob": 1.5, "dynamic_masking": True}, "--masked-lm-prob must be in (0, 1], got 1.5"),
    ("pretrain", {"masked_lm_prob": 0.0, "dynamic_masking": True}, "--masked-lm-prob must be in (0, 1], got 0.0"),
    ("pretrain", {"sop_weight": -0.5}, "--sop-weight must be a finite number >= 0, got -0.5"),
    ("pretrain", {"sop_weight": float("inf")}, "--sop-weight must be a finite number >= 0, got inf"),
    ("pretrain", {"masked_lm_prob": 0.3}, "--masked-lm-prob 0.3 needs --dynamic-masking: records made with masks "
                                          "carry their own (create-data --masked-lm-prob)"),
    ("pretrain", {"max_predictions": 600}, "--max-predictions 600 exceeds --max-seq-length 512"),
    ("pretrain", {"num_train_steps": 1000}, "--num-warmup-steps 3,125 is not less than --num-train-steps 1,000: the "
                                            "learning rate would still be warming up when the run ends; give fewer "
                                            "warm-up steps (the paper's share, 2.5%, is 25)"),
    ("pretrain", {"cpu_replicas": 0}, "--cpu-replicas must be >= 1, got 0"),
    # pretrain: the schedule, the budgets, the phases
    ("pretrain", {"decay_start": 0.5}, "--decay-start 0.5 needs --schedule wsd"),
    ("pretrain", {"schedule": "wsd", "decay_start": 0.95}, "--decay-start 0.95 and --decay-length 0.1: expected "
                                                           "fractions of the steps with --decay-length > 0 and their "
                                                           "sum <= 1"),
    ("pretrain", {"schedule": "wsd", "decay_start": 0.01}, "--decay-start 0.01 is step 1250, inside the warm-up of "
                                                           "3,125 steps"),
    ("pretrain", {"budget_tokens": 10**9, "budget_hours": 1.0}, "--budget-tokens and --budget-hours are exclusive: "
                                                                "give one budget"),
    ("pretrain", {"budget_tokens": 0}, "--budget-tokens must be positive, got 0"),
    ("pretrain", {"budget_hours": -1.0}, "--budget-hours must be positive, got -1.0"),
    ("pretrain", {"budget_hours": 1.0, "num_warmup_steps": 1}, "--budget-hours needs --num-warmup-steps >= 2, got 1"),
    ("pretrain", {"budget_hours": 1.0, "phases": "128:0.9,512:0.1", "phase_data": {"128": "d"}},
     "--budget-hours and --phases are exclusive"),
    # 4096 x 512 = 2,097,152 tokens a step: 10^9 tokens are 477 steps (476 give 998,244,352), within the warm-up
    ("pretrain", {"budget_tokens": 10**9}, "--num-warmup-steps 3,125 is not less than the 477 steps of "
                                           "--budget-tokens 1,000,000,000"),
    ("pretrain", {"budget_tokens": 10**10, "num_train_steps": 5000}, "--num-train-steps 5,000 and --budget-tokens "
                                                                      "10,000,000,000 (4,769 steps) disagree: give "
                                                                      "one"),
    ("pretrain", {"phases": "128:0.9,512"}, "--phases '128:0.9,512': expected SEQ:FRACTION[:BATCH],... "
                                            "(e.g. 128:0.9,512:0.1), got '512'"),
    ("pretrain", {"phases": "128:0.9,512:0.2"}, "--phases '128:0.9,512:0.2': the fractions sum to 1.1, not 1"),
    ("pretrain", {"phases": "128:0.5,256:0.5"}, "--phases 128:0.5,256:0.5: the longest phase (256) must be "
                                                "--max-seq-length (512)"),
    ("pretrain", {"phases": "128:0.9,512:0.1"}, "--phases 128:0.9,512:0.1: give the records of each shorter phase, "
                                                "--phase-data SEQ=GLOB for SEQ in 128 (got none)"),
    ("pretrain", {"phases": "16:0.9,512:0.1", "phase_data": {"16": "d16-*"}}, "--max-predictions 20 exceeds the "
                                                                              "phase length 16"),
    ("pretrain", {"phase_data": {"128": "d128-*"}}, "--phase-data needs --phases"),
    ("pretrain", {"phases": "512:0.5,512:0.5"}, "--phases '512:0.5,512:0.5': a sequence length is given twice with "
                                                "the same batch; give a length again only with another batch"),
    ("pretrain", {"phases": "512:0.5:4096,512:0.5"}, "--phases: sequence length 512 comes twice with global batch "
                                                     "4096 (a phase without BATCH has --batch-size)"),
    ("pretrain", {"tpu": "my-tpu"}, "--train-data data/train-*: with --tpu, data and the model dir must be on Cloud "
                                    "Storage (gs://...), because the TPU hosts cannot read this machine's local files"),
    ("pretrain", {"tpu": "my-tpu", "train_data": "gs://b/d-*", "model_dir": "gs://b/m", "init": "/local/model"},
     "--init /local/model: with --tpu"),
    ("pretrain", {"tpu": "my-tpu", "cpu_replicas": 2, "train_data": "gs://b/d-*", "model_dir": "gs://b/m"},
     "--tpu and --cpu-replicas are exclusive"),
    # vocab
    ("vocab", {"vocab_size": 10}, "--vocab-size 10 is too small: the special and user-defined symbols alone take 13 "
                                  "ids"),
    ("vocab", {"max_sentences": 0}, "--max-sentences must be at least 1, got 0"),
    # create-data
    ("create-data", {"max_seq_length": 4}, "--max-seq-length must be at least 5 ([CLS] a [SEP] b [SEP]), got 4"),
    ("create-data", {"max_predictions": 0}, "--max-predictions must be at least 1, got 0"),
    ("create-data", {"masked_lm_prob": 1.5}, "--masked-lm-prob must be in [0, 1], got 1.5"),
    ("create-data", {"ngram": 0}, "--ngram must be at least 1, got 0"),
    ("create-data", {"dupe_factor": 0}, "--dupe-factor must be at least 1, got 0"),
    ("create-data", {"short_seq_prob": -0.5}, "--short-seq-prob must be in [0, 1], got -0.5"),
    ("create-data", {"seed": -1}, "--seed must be non-negative, got -1"),
    ("create-data", {"num_shards": 0}, "--num-shards must be at least 1, got 0"),
    ("create-data", {"workers": 0}, "--workers must be at least 1, got 0"),
    ("create-data", {"beam_options": ["--runner=DataflowRunner"]},
     "Beam pipeline options (--runner=DataflowRunner) go with --beam"),
    # quickstart
    ("quickstart", {"num_train_steps": 0}, "--num-train-steps must be positive, got 0"),
    ("quickstart", {"finetune_epochs": 0}, "--finetune-epochs must be positive, got 0"),
    ("quickstart", {"seed": -1}, "--seed must be >= 0, got -1"),
    # plan
    ("plan", {"batch_size": 0}, "--batch-size must be positive, got 0"),
    ("plan", {"num_train_steps": -3}, "--num-train-steps must be positive, got -3"),
    ("plan", {"max_predictions": 600}, "--max-predictions 600 exceeds --max-seq-length 512"),
    ("plan", {"mfu": 1.5}, "--mfu 1.5: expected a fraction in (0, 1]"),
    ("plan", {"batch_size": 100}, "--batch-size 100 is not divisible by the 32 cores of v3-32 (every core takes an "
                                  "equal share)"),
    ("plan", {"gradient_accumulation_steps": 3}, "--gradient-accumulation-steps 3 does not divide the per-core batch "
                                                 "128"),
    ("plan", {"topology": "v3-4096"}, "--topology v3-4096: not a TPU v3 slice: expected one of v3-8, v3-32,"),
    ("plan", {"topology": "cpu", "cpu_replicas": 0}, "--cpu-replicas must be >= 1, got 0"),
]


def _case_id(case):
    command, values, _ = case
    return f"{command}-{'-'.join(values)}"


@pytest.mark.parametrize("command, values, message", INVALID, ids=[_case_id(c) for c in INVALID])
def test_invalid_input_is_refused_by_the_constructor_and_the_cli_with_the_same_line(cli, command, values, message):
    cls, base = BASES[command]
    with pytest.raises(ValueError) as info:
        cls(**{**base, **values})
    said = str(info.value)
    assert said.startswith(message) and "\n" not in said, said
    code, out, err = cli(command, *run_config.argv_of(cls, {**base, **values}))
    assert (code, err) == (2, f"albert-tf {command}: error: {said}\n"), (code, out, err)


@pytest.mark.parametrize("command", sorted(BASES))
def test_the_bases_are_valid(command):
    """The tables' starting points are accepted: each refusal above comes from its own values."""
    cls, base = BASES[command]
    assert cls(**base) == cls(**base)


def test_a_pretrain_config_without_its_required_fields_names_the_bad_range_first_then_what_is_missing():
    with pytest.raises(ValueError, match=r"^--batch-size must be positive, got 0$"):
        PretrainConfig(batch_size=0)
    with pytest.raises(ValueError) as info:
        PretrainConfig(batch_size=8, num_train_steps=100, num_warmup_steps=10)
    assert str(info.value) == ("PretrainConfig: config, train_data, model_dir required (the command line's --config, "
                               "--train-data, --model-dir)")


def test_a_token_budget_decides_the_steps_and_replaces_a_recipes_length():
    """ceil(T / (batch x seq)) by hand; with phases the fewest steps whose phases' tokens reach T; a length typed over
    a recipe replaces the recipe's (whichever field holds it); both budgets or a disagreeing --num-train-steps in one
    layer are refused (above)."""
    base = BASES["pretrain"][1]
    assert PretrainConfig(**base, budget_tokens=10**10, num_warmup_steps=100).num_train_steps == 4769
    assert 4768 * 4096 * 512 < 10**10 <= 4769 * 4096 * 512
    # 128:0.9,512:0.1 at batch 4096: N=10 → phases of 9 and 1 steps, 9·128 + 512 = 1664 tokens per example
    phased = PretrainConfig(**base, budget_tokens=1664 * 4096, num_warmup_steps=1, phases="128:0.9,512:0.1",
                            phase_data={"128": "d128-*"})
    assert phased.num_train_steps == 10
    assert [(p.seq_length, first, end) for p, first, end in phased.phase_steps()] == [(128, 0, 9), (512, 9, 10)]
    over = PretrainConfig.from_recipe("cpu_small", **base, budget_tokens=128 * 64 * 1000)
    assert (over.num_train_steps, over.budget_tokens) == (1000, 128 * 64 * 1000)
    assert PretrainConfig.from_recipe("paper_v2_phased", **base, num_train_steps=100000,
                                      phase_data={"128": "d"}).budget_tokens is None


def test_a_batch_ramp_is_one_length_again_with_other_batches_each_repeat_drawn_anew():
    """--phases 512:0.25:1024,512:0.25:2048,512:0.5 (--batch-size 4096): one length, no --phase-data, three batches;
    the fewest steps whose tokens reach T (by hand: N=8 → 2·1024 + 2·2048 + 4·4096 = 22,528 examples of 512); each
    repeat of the length draws its data order with the seed + its repeat count."""
    from albert_tf.settings.run_length import repeat_index  # pylint: disable=import-outside-toplevel
    from albert_tf.training.pretraining import phase_config  # pylint: disable=import-outside-toplevel

    base = BASES["pretrain"][1]
    ramp = PretrainConfig(**base, budget_tokens=22528 * 512, num_warmup_steps=1,
                          phases="512:0.25:1024,512:0.25:2048,512:0.5")
    assert ramp.num_train_steps == 8
    assert [(p.batch_size, first, end) for p, first, end in ramp.phase_steps()] == [(1024, 0, 2), (2048, 2, 4),
                                                                                     (4096, 4, 8)]
    phases = ramp.run_phases()
    assert [repeat_index(phases, i) for i in range(3)] == [0, 1, 2]
    assert [phase_config(ramp, p, repeat_index(phases, i)).seed for i, p in enumerate(phases)] == [
        ramp.seed, ramp.seed + 1, ramp.seed + 2]
    assert [(c.batch_size, c.train_data) for c in (phase_config(ramp, p) for p in phases)] == [
        (1024, ramp.train_data), (2048, ramp.train_data), (4096, ramp.train_data)]
    mixed = [p for p, _, _ in PretrainConfig(**base, num_warmup_steps=1, phases="128:0.2:64,512:0.3,128:0.5",
                                             phase_data={"128": "d128-*"}).phase_steps()]
    assert [repeat_index(mixed, i) for i in range(3)] == [0, 0, 1]


def test_masked_lm_prob_at_its_default_needs_no_dynamic_masking():
    """The default (0.15, the original's) is what records made with masks carry: accepted without
    --dynamic-masking; any other value only with it."""
    base = BASES["pretrain"][1]
    assert PretrainConfig(**base, masked_lm_prob=0.15).masked_lm_prob == 0.15
    assert PretrainConfig(**base, masked_lm_prob=0.2, dynamic_masking=True).masked_lm_prob == 0.2


def test_a_pod_run_with_gs_paths_is_accepted():
    config = PretrainConfig(config="albert_base", train_data="gs://b/d-*", eval_data="gs://b/e-*",
                            model_dir="gs://b/m", init="gs://b/init", tpu="my-pod")
    assert config.tpu == "my-pod"


# ---------------------------------------------------------------------------------------------- the batch plan
@pytest.mark.parametrize("batch, replicas, steps, accelerator, streams, expected", [
    # (global, replicas, accumulation, accelerator, --streams) → (per replica, micro-batch, streams), by hand
    (64, 4, 2, False, None, (16, 8, 2)),     # CPU: two streams by default
    (64, 4, 2, True, None, (16, 8, 1)),      # an accelerator: one
    (96, 8, 4, False, None, (12, 3, 1)),     # 2 does not divide the micro-batch 3: the default falls back to 1
    (64, 1, 1, False, 4, (64, 64, 4)),       # --streams as given
])
def test_the_batch_plan_splits_the_global_batch(batch, replicas, steps, accelerator, streams, expected):
    config = PretrainConfig(**BASES["pretrain"][1], batch_size=batch, gradient_accumulation_steps=steps,
                            streams=streams)
    plan = plan_batches(config, replicas, accelerator)
    assert (plan.per_replica, plan.micro_batch, plan.streams) == expected
    assert plan == BatchPlan(global_batch=batch, replicas=replicas, accumulation_steps=steps, streams=expected[2],
                             eval_global_batch=batch)


@pytest.mark.parametrize("values, replicas, message", [
    ({"batch_size": 60}, 8, "--batch-size 60 is not divisible by the 8 replicas"),
    ({"batch_size": 64, "eval_batch_size": 12}, 8, "--eval-batch-size 12 is not divisible by the 8 replicas"),
    ({"batch_size": 64, "gradient_accumulation_steps": 3}, 4,
     "--gradient-accumulation-steps 3 does not divide the per-replica batch 16 (--batch-size 64 / 4 replicas)"),
    ({"batch_size": 64, "streams": 3}, 4, "--streams 3 does not divide the per-replica batch 16"),
    ({"batch_size": 64, "streams": 3, "gradient_accumulation_steps": 2}, 4,
     "--streams 3 does not divide the per-replica micro-batch 8"),
])
def test_the_batch_plan_refuses_what_does_not_divide(values, replicas, message):
    config = PretrainConfig(**BASES["pretrain"][1], **values)
    with pytest.raises(ValueError) as info:
        plan_batches(config, replicas, accelerator=False)
    assert str(info.value).startswith(message)
