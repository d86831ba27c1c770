"""`albert-tf plan`: parameters and FLOPs against hand counts and the built model, memory, fits / does not fit,
times, the learning-rate rule, input errors, and no TensorFlow import."""
import json
import math
import shlex

import pytest

import helpers
from albert_tf.config import AlbertConfig
from albert_tf.runtime import devices
from albert_tf.training import costs

TINY = AlbertConfig.from_preset("albert_tiny")  # V 1000, E 16, H 32, 4 layers in 2 groups, 4 heads, FFN 64
# The README's counts (tests/test_modeling.py::test_paper_parameter_counts checks them against the built models).
PAPER_TOTALS = {"albert_base": 11_813_810, "albert_large": 17_847_474, "albert_xlarge": 59_021_490,
                "albert_xxlarge": 223_158_450}
PAPER_ENCODERS = {"albert_base": 11_683_584, "albert_large": 17_683_968, "albert_xlarge": 58_724_864,
                  "albert_xxlarge": 222_595_584}


def test_tiny_parameters_by_hand():
    # embeddings: (V 1000 + positions 128 + types 2) * E 16 = 18080, LayerNorm 2*16 = 32, projection 16*32 + 32
    embeddings = 18080 + 32 + 544
    attention = 2 * (4 * (32 * 32 + 32) + 2 * 32)        # 2 groups: q, k, v, output (+bias), LayerNorm
    ffn = 2 * (32 * 64 + 64 + 64 * 32 + 32 + 2 * 32)      # 2 groups: in, out (+bias), LayerNorm
    pooler = 32 * 32 + 32
    mlm = 32 * 16 + 16 + 2 * 16 + 1000                    # dense H→E, LayerNorm, output bias (decoder tied)
    sop = 32 * 2 + 2
    counts = costs.parameter_counts(TINY)
    assert counts["encoder"] == embeddings + attention + ffn + pooler == 36_800
    assert counts["total"] == 36_800 + mlm + sop == 38_426


@pytest.mark.parametrize("changes", [
    {}, {"sharing": "attention"}, {"sharing": "ffn"}, {"sharing": "none"},
    {"embedding_size": 32},                               # E == H: no projection
    {"inner_group_num": 2, "num_hidden_groups": 1},
    {"sharing": "none", "inner_group_num": 2},
], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "all")
def test_parameters_equal_the_built_model(changes):
    from albert_tf.modeling.base import count_params  # pylint: disable=import-outside-toplevel
    from albert_tf.modeling.pretrainer import AlbertPretrainer  # pylint: disable=import-outside-toplevel

    config = TINY.replace(**changes)
    model = AlbertPretrainer(config)
    counts = costs.parameter_counts(config)
    assert (counts["encoder"], counts["total"]) == (count_params(model.encoder), count_params(model))


@pytest.mark.parametrize("preset", sorted(PAPER_TOTALS))
def test_paper_parameter_counts(preset):
    counts = costs.parameter_counts(AlbertConfig.from_preset(preset))
    assert (counts["encoder"], counts["total"]) == (PAPER_ENCODERS[preset], PAPER_TOTALS[preset])


def test_bert_large_config():
    config = AlbertConfig.from_preset("bert_large")
    assert (config.embedding_size, config.hidden_size, config.num_hidden_layers, config.sharing) == \
        (1024, 1024, 24, "none")
    counts = costs.parameter_counts(config)
    # BERT-large is "334M" (Devlin et al.; the ALBERT paper's Table 1); ours has a 30,000-piece vocabulary.
    assert counts["encoder"] == 334_607_360 and counts["total"] == 335_691_058
    assert costs.parameter_sets(config) == (24, 24)


def test_tiny_flops_by_hand():
    # seq 8, 2 predictions; per applied block (4 blocks):
    qkv, out = 3 * 8 * 32 * 32, 8 * 32 * 32                 # 24576, 8192
    scores = context = 8 * 8 * 32                           # heads 4 × L 8 × L 8 × head size 8 = 2048
    ffn_in = ffn_out = 8 * 32 * 64                          # 16384
    per_block = qkv + out + scores + context + ffn_in + ffn_out
    assert per_block == 69_632
    projection = 8 * 16 * 32                                # E→H on 8 tokens
    heads = 32 * 32 + 2 * 32 * 16 + 2 * 16 * 1000 + 32 * 2  # pooler, MLM dense H→E and decoder on 2 positions, SOP
    macs = projection + 4 * per_block + heads
    assert macs == 316_736
    got = costs.forward_macs(TINY, 8, 2)
    assert got["total"] == macs and got["blocks"] == 4 * per_block and got["mlm_decoder"] == 32_000
    assert costs.training_flops_per_example(TINY, 8, 2) == 3 * 2 * macs == 1_900_416
    assert costs.training_flops_per_example(TINY, 8, 2) == 1_900_416  # what pretrain's MFU uses
    estimate = costs.estimate(TINY, 16, 8, 2, cores=8)
    assert estimate["flops_per_step"] == 16 * 1_900_416
    # E == H: no projection term
    assert costs.forward_macs(TINY.replace(embedding_size=32), 8, 2)["embedding_projection"] == 0


def test_tiny_activation_memory_by_hand():
    # bf16, per-core batch 2, seq 8: per block 2 bytes × 2 × (8 [L,H] tensors 8·8·32 + 2 [L,I] 2·8·64
    # + scores and probabilities 2·4·8·8)
    per_block = 2 * 2 * (8 * 8 * 32 + 2 * 8 * 64 + 2 * 4 * 8 * 8)
    assert per_block == 14_336
    embeddings = 2 * 2 * 2 * 8 * 16
    heads = 2 * 2 * (2 * 32 + 3 * 2 * 16 + 2 * 32) + 8 * 2 * 2 * 1000
    act = costs.activation_bytes(TINY, 2, 8, 2, "bfloat16")
    assert (act["per_block"], act["blocks"], act["total"]) == (per_block, 4 * per_block,
                                                               4 * per_block + embeddings + heads)
    remat = costs.activation_bytes(TINY, 2, 8, 2, "bfloat16", remat=True)
    assert remat["blocks"] == 4 * 2 * 2 * 8 * 32 + 2 * per_block   # the inputs + two blocks' working set
    # float32 doubles everything but the float32 logits; dropout adds masks at the compute dtype
    assert costs.activation_bytes(TINY, 2, 8, 2, "float32")["per_block"] == 2 * per_block
    dropout = TINY.replace(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    assert costs.activation_bytes(dropout, 2, 8, 2, "bfloat16")["per_block"] == \
        per_block + 2 * 2 * (4 * 8 * 8 + 2 * 8 * 32)
    # state: weights 4 + m, v 8 + gradients 4 (+ bf16 copies 2) bytes per parameter (+ 4: accumulation's sum)
    estimate = costs.estimate(TINY, 16, 8, 2, cores=8)
    assert estimate["hbm_per_core_bytes"] == 38_426 * 18 + act["total"]
    # 2 micro-batches of 1 per core: the activations of one example, and the gradient sum
    accumulated = costs.estimate(TINY, 16, 8, 2, cores=8, accumulation_steps=2)
    assert accumulated["micro_batch"] == 1
    assert accumulated["hbm_per_core_bytes"] == 38_426 * 22 + costs.activation_bytes(TINY, 1, 8, 2, "bfloat16")["total"]
    assert accumulated["flops_per_step"] == estimate["flops_per_step"]


def test_xxlarge_on_v3_512_fits_and_times():
    config = AlbertConfig.from_preset("albert_xxlarge")
    p = costs.estimate(config, 4096, 512, 20, cores=512, steps=125_000, mfu=0.5, topology="v3-512")
    # 8 per core: the measured activation model (two [b, heads, L, L] tensors per block) needs --remat
    assert p["per_core_batch"] == 8 and p["fits"] is False and p["recommended"]["flags"]["--remat"] is True
    assert p["hbm_capacity_bytes"] == 16 * 2 ** 30
    peak = 512 / 2 * 123e12
    assert p["peak_flops"] == pytest.approx(peak)
    assert p["step_time_s"] == pytest.approx(p["flops_per_step"] / (0.5 * peak))
    assert p["total_time_s"] == pytest.approx(125_000 * p["step_time_s"])
    # remat: less memory, one more forward of the blocks
    r = costs.estimate(config, 4096, 512, 20, cores=512, steps=125_000, remat=True)
    assert r["hbm_per_core_bytes"] < p["hbm_per_core_bytes"] and r["fits"] and not r["advice"]
    assert r["recommended"]["hbm_per_core_bytes"] == r["hbm_per_core_bytes"]
    extra = 2 * p["forward_macs_per_example"]["blocks"] * 4096
    assert r["step_time_s"] == pytest.approx((p["flops_per_step"] + extra) / (0.5 * peak))


@pytest.mark.parametrize("topology, cores", [("v3-1024", 1024), ("v3-2048", 2048)])
def test_v3_slices_up_to_2048_cores(topology, cores):
    """v3 slices go to v3-2048 (256 hosts); the paper's batch of 4096 there is 4 or 2 examples per core, and the
    step time at the same MFU scales as 1 / cores from v3-512's (the FLOPs per step do not change)."""
    assert devices.topology_cores(topology) == cores
    config = AlbertConfig.from_preset("albert_xxlarge")
    big = costs.estimate(config, 4096, 512, 20, cores=cores, steps=125_000, topology=topology)
    base = costs.estimate(config, 4096, 512, 20, cores=512, steps=125_000, topology="v3-512")
    assert big["per_core_batch"] == 4096 // cores and big["flops_per_step"] == base["flops_per_step"]
    assert big["peak_flops"] == pytest.approx(cores / 2 * 123e12)
    assert big["step_time_s"] == pytest.approx(base["step_time_s"] * 512 / cores)
    assert big["fits"] and big["hbm_per_core_bytes"] < base["hbm_per_core_bytes"]


def test_does_not_fit_names_what_to_change():
    config = AlbertConfig.from_preset("albert_xxlarge")
    p = costs.estimate(config, 4096, 384, 20, cores=8, topology="v3-8")   # 512 examples per core
    assert p["fits"] is False
    text = " ".join(p["advice"])
    assert "per-core batch" in text and "v3-512" in text
    best = int(text.split("per-core batch ")[1].split()[0])
    budget = 0.9 * 16 * 2 ** 30
    state = p["hbm_per_core_bytes"] - p["activations_bytes"]
    fits = lambda b: state + costs.activation_bytes(config, b, 384, 20, "bfloat16")["total"] <= budget  # noqa: E731
    assert fits(best) and (not fits(best + 1) if best < 8 else best % 8 == 0 and not fits(best + 8))
    assert "DOES NOT FIT" in costs.report(p) and "DOES NOT FIT" in costs.summary_line(p)
    # a case that --remat alone rescues, and accumulation too: both keep the global batch and come first
    p16 = costs.estimate(config, 16 * 512, 512, 20, cores=512)
    assert p16["fits"] is False and any(a.startswith("--remat fits") for a in p16["advice"])
    assert costs.estimate(config, 16 * 512, 512, 20, cores=512, remat=True)["fits"]
    keeps = [i for i, a in enumerate(p16["advice"]) if "keeps the global batch" in a]
    changes = [i for i, a in enumerate(p16["advice"]) if "changes the recipe" in a]
    assert keeps and changes and max(keeps) < min(changes)
    # a model whose state alone exceeds a core
    huge = config.replace(sharing="none", num_hidden_layers=24)
    advice = costs.estimate(huge, 512, 128, 20, cores=512)["advice"]
    assert len(advice) == 1 and "whatever the batch" in advice[0]


@pytest.mark.parametrize("preset", ["albert_xxlarge", "albert_xlarge"])
@pytest.mark.parametrize("topology", ["v3-64", "v3-128"])
def test_the_paper_batch_on_fewer_cores_ends_with_flags_that_fit(cli, preset, topology):
    """Batch 4096 on 64 or 128 cores does not fit as is; the plan ends with `albert-tf pretrain` flags that keep the
    global batch, name only pretrain's flags, and fit when planned again."""
    code, out, _ = cli("plan", "--config", preset, "--topology", topology, "--recipe", "paper_v2")
    assert code == 0 and "DOES NOT FIT" in out
    command = shlex.split(out.rstrip().splitlines()[-1])  # as a shell reads it, pasted
    assert command[:2] == ["albert-tf", "pretrain"] and command[command.index("--config") + 1] == preset
    from albert_tf import cli as albert_cli  # pylint: disable=import-outside-toplevel
    from albert_tf.jobs import pretrain  # pylint: disable=import-outside-toplevel

    args = albert_cli.build_parser(["pretrain"]).parse_args(command[1:])  # every flag exists (argparse exits otherwise)
    config = pretrain.config_from_args(args)  # the recipe's values under the typed flags, as pretrain reads them
    assert config.batch_size == 4096 and config.max_seq_length == 512 and args.recipe == "paper_v2"
    assert config.train_data == "gs://BUCKET/records/train-*"  # the glob quoted: the shell leaves it to pretrain
    remat, steps = config.remat, config.gradient_accumulation_steps
    assert remat or steps > 1
    again = costs.estimate(AlbertConfig.from_preset(preset), 4096, 512, 20, cores=devices.topology_cores(topology),
                          remat=remat, accumulation_steps=steps)
    assert again["fits"] and again["hbm_per_core_bytes"] <= 0.9 * 16 * 2 ** 30
    # the plan run with those flags fits as is and still ends with the command
    flags = ["--remat"] if remat else []
    flags += ["--gradient-accumulation-steps", str(steps)]
    code, out, _ = cli("plan", "--config", preset, "--topology", topology, "--recipe", "paper_v2", *flags)
    assert "DOES NOT FIT" not in out and shlex.split(out.rstrip().splitlines()[-1]) == command


def test_accumulation_steps_must_divide_the_per_core_batch():
    with pytest.raises(ValueError, match="--gradient-accumulation-steps 3 does not divide the per-core batch 8"):
        costs.estimate(TINY, 64, 8, 2, cores=8, accumulation_steps=3)


def test_learning_rate_rule():
    assert costs.learning_rate_for(4096) == pytest.approx(0.00176)
    assert costs.learning_rate_for(1024) == pytest.approx(0.00088)
    assert costs.learning_rate_for(16384) == pytest.approx(0.00352)
    assert "sqrt" in costs.LEARNING_RATE_RULE


def test_host_memory():
    # tiny, 2 replicas of 8 examples each, float32: per replica 16 bytes per parameter + activations of 8
    expected = 2 * (38_426 * 16 + costs.activation_bytes(TINY, 8, 8, 2, "float32")["total"])
    assert costs.host_memory_bytes(TINY, 16, 8, 2, replicas=2, dtype="float32") == expected
    base = AlbertConfig.from_preset("albert_base")
    assert costs.host_memory_bytes(base, 4096, 512, 20) > 100 * 2 ** 30      # the paper's batch: not a laptop
    assert costs.host_memory_bytes(base, 8, 128, 20) < 2 * 2 ** 30
    # CPU use from pretrain: no HBM, no peak
    line = costs.summary_line(costs.estimate(base, 8, 128, 20, cores=1, dtype="float32", peak_flops_per_core=None,
                                           memory_per_core=None))
    assert line.startswith("plan: 11.8M parameters, 1 replica(s) x 8 examples") and "/step at" not in line


def test_cli_text_says_how_flops_are_counted(cli):
    code, out, err = cli("plan", "--config", "albert_base", "--topology", "v3-64", "--batch-size", "4096",
                              "--max-seq-length", "512", "--num-train-steps", "125000")
    assert code == 0 and err == ""  # the plan is the result: stdout
    assert "11,813,810" in out and "3 x forward" in out and "masked positions only" in out
    assert "64 per core" in out and "fits" in out and "125,000 steps" in out and "sqrt(B / 4096)" in out


@pytest.mark.parametrize("argv, message", [
    (["--topology", "v3-4096"], "--topology v3-4096: not a TPU v3 slice: expected one of v3-8, v3-32, v3-64"),
    (["--topology", "v5litepod-3"], "--topology v5litepod-3: not a TPU v5e slice: expected one of v5litepod-1, "
                                    "v5litepod-4, v5litepod-8, v5litepod-16, v5litepod-32, v5litepod-64, "
                                    "v5litepod-128, v5litepod-256 (N counts chips)"),
    (["--topology", "v4-12"], "--topology v4-12: not a TPU v4 slice: expected one of v4-8, v4-16"),
    (["--topology", "v6e-64"], "--topology v6e-64: TPU v6e is refused: TensorFlow failed"),
    (["--topology", "v6e-64"], "`albert-tf convert --to keras-hub` and train it with keras-hub on its JAX"),
    (["--topology", "tpu7x-64"], "--topology tpu7x-64: TPU7x is refused: Google: \"TensorFlow is not supported\""),
    (["--topology", "tpu7x-64"], "`albert-tf convert --to keras-hub`"),
    (["--topology", "h100-8"], "--topology h100-8: not a TPU slice; expected PREFIX-N: v2-N (N cores: 8, 32,"),
    (["--batch-size", "100"], "--batch-size 100 is not divisible by the 32 cores of v3-32"),
    (["--max-seq-length", "1024"], "--max-seq-length 1024 exceeds the config's max_position_embeddings 512"),
    (["--max-predictions", "600"], "--max-predictions 600 exceeds --max-seq-length 512"),
    (["--mfu", "1.5"], "--mfu 1.5: expected a fraction in (0, 1]"),
    (["--batch-size", "0"], "--batch-size must be positive, got 0"),
    (["--num-train-steps", "-3"], "--num-train-steps must be positive, got -3"),
    (["--config", "no_such_model"], "unknown preset 'no_such_model'"),
    (["--set", "vocab_sise=8000"], "--set vocab_sise=...: 'vocab_sise' is not an AlbertConfig key"),
    (["--set", "hidden_size=100"], "--set: AlbertConfig field 'hidden_size': 100 is not divisible by"),
])
def test_cli_errors(cli, argv, message):
    helpers.plan_refuses(cli, argv, message)


def test_json_and_no_tensorflow_import():
    result = helpers.run_program("cli_imports", "plan", "--config", "albert_xxlarge", "--topology", "v3-512",
                                 "--batch-size", "4096", "--max-seq-length", "512", "--num-train-steps", "125000",
                                 "--remat", "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["rc"] == 0 and got["heavy"] == []
    p = json.loads(got["stdout"])
    for key in ("parameters", "flops_per_step", "hbm_per_core_bytes", "hbm_capacity_bytes", "fits", "step_time_s",
                "total_time_s"):
        assert key in p
    assert p["parameters"] == 223_158_450 and p["fits"] is True and p["hbm_capacity_bytes"] == 16 * 2 ** 30
    assert p["flops_per_step"] == 4096 * costs.training_flops_per_example(
        AlbertConfig.from_preset("albert_xxlarge"), 512, 20)
    assert math.isclose(p["total_time_s"], 125_000 * p["step_time_s"])


def test_set_overrides_the_config_and_is_repeated_in_the_command(cli):
    code, out, _ = cli("plan", "--config", "albert_base", "--set", "vocab_size=8000", "--topology", "v3-8",
                            "--batch-size", "256", "--max-seq-length", "128", "--json")
    got = json.loads(out)
    expected = costs.parameter_counts(AlbertConfig.from_preset("albert_base").replace(vocab_size=8000))["total"]
    assert code == 0 and got["parameters"] == expected and got["config"]["vocab_size"] == 8000
    assert "--config albert_base --set vocab_size=8000 --max-seq-length 128 --batch-size 256" in got["pretrain_command"]


def test_old_plan_spellings_work_with_a_notice(cli):
    code, out, err = cli("plan", "--config", "albert_base", "--topology", "v3-8", "--seq-length", "128",
                              "--steps", "10", "--json")
    got = json.loads(out)
    assert code == 0 and got["seq_length"] == 128 and got["steps"] == 10
    assert err.splitlines() == [
        "albert-tf plan: note: --seq-length is deprecated and will be removed in the next release; use "
        "--max-seq-length",
        "albert-tf plan: note: --steps is deprecated and will be removed in the next release; use --num-train-steps"]


def test_cpu_topology_is_this_machine_with_pretrains_memory_rule(cli, monkeypatch):
    """--topology cpu: the host's memory holds every replica, with the overhead and slack pretrain checks a CPU run
    against (costs.host_need_bytes): the plan fits exactly when pretrain's check passes, and the batch the plan
    recommends when it does not fit passes that check."""
    total = 8 * 2 ** 30
    monkeypatch.setattr(costs, "host_total_bytes", lambda: total)
    base = AlbertConfig.from_preset("albert_base")
    for batch in (16, 64, 256):
        code, out, _ = cli("plan", "--config", "albert_base", "--topology", "cpu", "--batch-size", str(batch),
                                "--max-seq-length", "128", "--json")
        got = json.loads(out)
        need = costs.host_need_bytes(base, batch, 128, 20)
        assert code == 0 and got["fits"] is (need <= total) and got["dtype"] == "float32" and got["cores"] == 1
        assert got["step_time_s"] > 0  # at this machine's measured matmul rate
        command = got["pretrain_command"]
        assert command.endswith("--train-data 'data/train-*' --model-dir model") and "--tpu" not in command
        if not got["fits"]:
            option = got["recommended"]["flags"]
            assert costs.host_need_bytes(base, option["--batch-size"], 128, 20,
                                        remat=option.get("--remat", False),
                                        accumulation_steps=option.get("--gradient-accumulation-steps", 1)) <= total
    code, out, _ = cli("plan", "--config", "albert_base", "--topology", "cpu", "--cpu-replicas", "2",
                            "--batch-size", "16", "--max-seq-length", "128")
    assert code == 0 and "this machine's CPU (2 replica(s))" in out and "GiB RAM" in out
    assert "--cpu-replicas 2" in out.rstrip().splitlines()[-1]


def test_plan_on_cpu_says_the_time_and_prints_a_command_pretrain_accepts(cli, monkeypatch):
    """Issue 48 D13. Before: `plan --topology cpu` printed no time for a CPU, and at the pod recipe's batch and steps
    (4096 x 125,000) it recommended `--gradient-accumulation-steps 256` at those, which pretrain refuses on a CPU,
    its refusal sending the user back to the plan "for how long it takes". Now: the time at this machine's measured
    matmul rate (here a 40 GFLOP/s machine of 16 GiB), and a command of about an hour that pretrain's own parser
    and CPU checks (its rule for the pod recipe's batch and steps, its memory check) accept."""
    from albert_tf import cli as albert_cli  # pylint: disable=import-outside-toplevel
    from albert_tf.jobs import plan as plan_job  # pylint: disable=import-outside-toplevel
    from albert_tf.jobs import pretrain  # pylint: disable=import-outside-toplevel
    from albert_tf.settings.pretrain_config import check_cpu_run  # pylint: disable=import-outside-toplevel
    from albert_tf.training.batch_plan import plan_batches  # pylint: disable=import-outside-toplevel
    from albert_tf.training.pretraining import check_host_memory  # pylint: disable=import-outside-toplevel

    rate, total = 40e9, 16 * 2 ** 30
    monkeypatch.setattr(costs, "host_total_bytes", lambda: total)
    monkeypatch.setattr(plan_job, "_MEASURED", {"rate": rate}, raising=False)  # (before: no such measurement)
    code, out, _ = cli("plan", "--config", "albert_base", "--topology", "cpu", "--max-seq-length", "128")
    assert code == 0
    base = AlbertConfig.from_preset("albert_base")
    per_example = costs.training_flops_per_example(base, 128, 20)
    pod_step = 4096 * per_example / (0.5 * rate)  # the pod recipe's step at MFU 0.5: 3.8 h, by hand
    assert 3.8 * 3600 < pod_step < 3.9 * 3600
    assert f"time: {pod_step / 3600:.3g} h per step at MFU 0.5 of 40 GFLOP/s peak (this machine's float32" in out
    assert f"125,000 steps: {costs.total_text(125_000 * pod_step)}" in out and "55 years" in out  # 54.8
    assert out.startswith("note: pretrain refuses the pod recipe's --batch-size 4096 and --num-train-steps 125,000 on a "
                          "CPU (55 years here, estimated); the command at the end is a run of about 1 h here")
    command = shlex.split(out.rstrip().splitlines()[-1])
    assert command[:2] == ["albert-tf", "pretrain"]
    config = pretrain.config_from_args(albert_cli.build_parser(["pretrain"]).parse_args(command[1:]))
    check_cpu_run(config)  # not the pod recipe's batch and steps
    model = base.replace(vocab_size=base.vocab_size)
    check_host_memory(config, model, plan_batches(config, 1, False), "float32", total=total)
    batch, steps = config.batch_size, config.num_train_steps
    assert (batch, config.learning_rate) == (64, 0.00022)  # 0.00176 * sqrt(64 / 4096) = 0.00022
    assert costs.host_need_bytes(model, 2 * batch, 128, 20) > total  # the largest power of two that fits: 16.03 GiB
    step = batch * per_example / (0.5 * rate)  # 216 s
    assert steps == int(3600 / step) == 16 and 0.9 * 3600 < steps * step <= 3600  # about an hour at that step time


def test_host_batch_that_fits():
    base = AlbertConfig.from_preset("albert_base").replace(vocab_size=8000)
    total = 24 * 2 ** 30
    batch = costs.host_batch_that_fits(base, 128, 20, total=total)
    assert batch in (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert costs.host_need_bytes(base, batch, 128, 20) <= total
    assert batch == 256 or costs.host_need_bytes(base, 2 * batch, 128, 20) > total
    assert costs.host_batch_that_fits(base, 128, 20, total=2 ** 30) == 0  # the overhead alone takes it


def test_plan_prints_one_total_the_recommended_plans(cli):
    """albert_xxlarge on v3-512 does not fit without --remat: the one total printed is the recommended (remat) plan's,
    125,000 times its own step time, not the given plan's (before: both, and "68.5 h (68.5 h)")."""
    code, out, _ = cli("plan", "--config", "albert_xxlarge", "--topology", "v3-512", "--recipe", "paper_v2")
    assert code == 0
    totals = [line for line in out.splitlines() if "125,000 steps:" in line]
    assert len(totals) == 1 and totals[0].startswith("fits instead: "), out
    plan = costs.estimate(AlbertConfig.from_preset("albert_xxlarge"), global_batch=4096, seq_length=512,
                          max_predictions=20, cores=512, dtype="bfloat16", steps=125_000)
    option = plan["recommended"]
    assert option["flags"].get("--remat") and not plan["fits"]
    step = option["executed_flops_per_step"] / (plan["mfu"] * plan["peak_flops"])
    assert step > plan["step_time_s"] * 1.2  # the recomputed forward: another total than the given plan's
    assert f"125,000 steps: {costs.total_text(step * 125_000)}:" in totals[0]
    assert [costs.total_text(s) for s in (2520, 246_600, 330_000)] == ["42 min", "68.5 h", "3.82 days (91.7 h)"]


# The paper's run (paper_v2: batch 4096, seq 512, 125,000 steps) on a slice of each generation, by hand from the
# generations' facts: devices (v3: one per core, 2 per chip; v4/v5p: one per chip, N counts cores; v5e: one per
# chip, N counts chips), hosts (4 chips per host; v5e 8), HBM per device and bf16 peak per chip.
@pytest.mark.parametrize("topology, devices_, hosts, unit, hbm_gib, peak", [
    ("v5litepod-256", 256, 32, "chip", 16, 256 * 197e12),
    ("v3-512", 512, 64, "core", 16, 256 * 123e12),
    ("v4-128", 64, 16, "chip", 32, 64 * 275e12),
    ("v5p-128", 64, 16, "chip", 95, 64 * 459e12),
])
def test_the_paper_run_on_every_generation(cli, topology, devices_, hosts, unit, hbm_gib, peak):
    args = ("plan", "--config", "albert_xxlarge", "--topology", topology, "--recipe", "paper_v2")
    code, out, _ = cli(*args, "--json")
    p = json.loads(out)
    assert code == 0 and p["cores"] == devices_ and p["hosts"] == hosts and p["device"] == unit
    assert p["per_core_batch"] == 4096 // devices_ and p["hbm_capacity_bytes"] == hbm_gib * 2 ** 30
    assert p["peak_flops"] == pytest.approx(peak) and p["mfu"] == 0.5
    option = p["recommended"]  # what fits: the flags it needs, its memory within the table's HBM, its hours
    assert option["keeps_global_batch"] and option["hbm_per_core_bytes"] <= 0.9 * hbm_gib * 2 ** 30
    remat, steps = bool(option["flags"].get("--remat")), option["flags"].get("--gradient-accumulation-steps", 1)
    again = costs.estimate(AlbertConfig.from_preset("albert_xxlarge"), 4096, 512, 20, cores=devices_, remat=remat,
                           accumulation_steps=steps, memory_per_core=hbm_gib * 2 ** 30,
                           peak_flops_per_core=peak / devices_)
    assert again["fits"] and again["hbm_per_core_bytes"] == option["hbm_per_core_bytes"]
    seconds = 125_000 * option["executed_flops_per_step"] / (0.5 * peak)
    code, text, _ = cli(*args)
    assert f"on {topology} ({devices_} TensorFlow devices, {devices_ // hosts} per host, on {hosts} host(s)) = " \
           f"{4096 // devices_} per {unit}" in text
    assert f"MFU 0.5 of {peak / 1e15:.3g} PFLOP/s peak ({topology}: TPU " in text
    assert f"125,000 steps: {costs.total_text(seconds)}" in text
    command = text.rstrip().splitlines()[-1]
    assert command.startswith("  albert-tf pretrain --recipe paper_v2 --config albert_xxlarge")
    assert ("--remat" in command) == remat and (f"--gradient-accumulation-steps {steps}" in command) == (steps > 1)


# The public reports of v4 pods failing on the tf-2.18 and tf-2.19 images, as issue threads of TensorFlow.
V4_POD_REPORTS = ("github.com/tensorflow/tensorflow/issues/82208", "github.com/tensorflow/tensorflow/issues/93618")


@pytest.mark.parametrize("topology, pod_of_v4", [("v4-128", True), ("v4-16", True), ("v4-8", False),
                                                 ("v3-512", False), ("v5p-128", False), ("v5litepod-256", False)])
def test_a_v4_pod_slice_is_planned_with_one_line_naming_the_reports_of_broken_v4_pods(cli, topology, pod_of_v4):
    """A note, not a refusal: the plan is printed as for any slice, after one line naming both reports."""
    code, out, _ = cli("plan", "--config", "albert_base", "--topology", topology, "--recipe", "paper_v2")
    assert code == 0 and out.rstrip().splitlines()[-1].startswith("  albert-tf pretrain ")
    noted = [line for line in out.splitlines() if line.startswith("note:")]
    if not pod_of_v4:
        assert not noted
        return
    assert len(noted) == 1 and out.startswith(f"note: {topology} is a TPU v4 pod slice (")
    assert all(report in noted[0] for report in V4_POD_REPORTS) and "tf-2.18" in noted[0] and "tf-2.19" in noted[0]
