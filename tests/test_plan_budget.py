"""`albert-tf plan` with a run's length as pretrain says it (--budget-tokens, --budget-hours, --phases), priced
(--price-per-chip-hour: chip-hours and cost) and beside another recipe (--compare): figures by hand and from
pretrain's own settings. No TensorFlow."""
import json
import shlex

import pytest

import helpers
from albert_tf.config import AlbertConfig
from albert_tf.settings.pretrain_config import PretrainConfig
from albert_tf.training import costs, run_costs

# albert_base on v3-8 (8 cores, 4 chips), 10 steps: 75 % at 64, 25 % at 128, batch 64.
TINY = ("plan", "--config", "albert_base", "--topology", "v3-8", "--batch-size", "64", "--max-seq-length", "128",
        "--phases", "64:0.75,128:0.25")


def plan_json(cli, *argv):
    code, out, err = cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_phased_steps_and_tokens_by_hand_and_as_pretrain_counts_them(cli):
    p = plan_json(cli, *TINY, "--num-train-steps", "10")
    # the switch at round(0.75 x 10) = round(7.5), halves up: 8 steps at 64, then 2 at 128
    assert [(r["seq_length"], r["first_step"], r["steps"]) for r in p["phases"]] == [(64, 0, 8), (128, 8, 2)]
    assert [r["tokens"] for r in p["phases"]] == [8 * 64 * 64, 2 * 64 * 128]
    assert p["run_steps"] == 10 and p["tokens"] == 8 * 64 * 64 + 2 * 64 * 128 == 49_152
    pretrain = PretrainConfig(config="albert_base", train_data="d", model_dir="m", batch_size=64, max_seq_length=128,
                              phases="64:0.75,128:0.25", phase_data={"64": "d64"}, num_train_steps=10,
                              num_warmup_steps=1)
    assert [(ph.seq_length, first, end - first) for ph, first, end in pretrain.phase_steps()] == [
        (r["seq_length"], r["first_step"], r["steps"]) for r in p["phases"]]
    # each phase's memory and time is costs.estimate's at its own length; the largest (128) is the plan's estimate
    base = AlbertConfig.from_preset("albert_base")
    for row in p["phases"]:
        alone = costs.estimate(base, 64, row["seq_length"], 20, cores=8)
        assert row["hbm_per_core_bytes"] == alone["hbm_per_core_bytes"]
        assert row["time_s"] == pytest.approx(row["steps"] * alone["step_time_s"])
    assert p["seq_length"] == 128 and p["largest_phase"] == 1
    assert p["run_time_s"] == pytest.approx(sum(r["time_s"] for r in p["phases"]))


def test_budget_tokens_decides_the_steps_as_pretrain_does(cli):
    # 9 steps reach 7 x 4096 + 2 x 8192 = 45,056 tokens, 10 steps 49,152: the fewest reaching 49,152 is 10
    p = plan_json(cli, *TINY, "--budget-tokens", "49152")
    assert p["run_steps"] == 10 and p["tokens"] == 49_152
    p = plan_json(cli, *TINY, "--budget-tokens", "45057")
    assert p["run_steps"] == 10
    p = plan_json(cli, *TINY, "--budget-tokens", "45056")
    assert p["run_steps"] == 9
    # the recipe: paper_v2's 125,000 x 4096 x 512 tokens, 346,154 steps at 128 and 38,462 at 512
    p = plan_json(cli, "plan", "--config", "albert_base", "--topology", "v3-512", "--recipe", "paper_v2_phased")
    assert [r["steps"] for r in p["phases"]] == [346_154, 38_462] and p["run_steps"] == 384_616
    assert p["tokens"] == 346_154 * 4096 * 128 + 38_462 * 4096 * 512 >= 125_000 * 4096 * 512


def test_a_batch_ramp_is_planned_phase_by_phase_as_pretrain_counts_it(cli):
    """--phases 128:0.25:16,128:0.25:32,128:0.5 at --batch-size 64 over 8 steps: 2 steps at batch 16, 2 at 32, 4 at
    64 (tokens by hand); the largest phase by memory is the last; the text names it by length and batch."""
    ramp = ("plan", "--config", "albert_base", "--topology", "v3-8", "--batch-size", "64", "--max-seq-length", "128",
            "--phases", "128:0.25:16,128:0.25:32,128:0.5", "--num-train-steps", "8")
    p = plan_json(cli, *ramp)
    assert [(r["batch_size"], r["first_step"], r["steps"]) for r in p["phases"]] == [(16, 0, 2), (32, 2, 2),
                                                                                     (64, 4, 4)]
    assert p["tokens"] == (2 * 16 + 2 * 32 + 4 * 64) * 128 and p["largest_phase"] == 2
    pretrain = PretrainConfig(config="albert_base", train_data="d", model_dir="m", batch_size=64, max_seq_length=128,
                              phases="128:0.25:16,128:0.25:32,128:0.5", num_train_steps=8, num_warmup_steps=1)
    assert [(ph.batch_size, first, end - first) for ph, first, end in pretrain.phase_steps()] == [
        (r["batch_size"], r["first_step"], r["steps"]) for r in p["phases"]]
    code, out, _ = cli(*ramp)
    assert code == 0 and "phases (the flags fit the phase at seq 128, batch 64, the most memory per core" in out


def test_budget_hours_are_steps_at_the_estimated_step_time(cli):
    p = plan_json(cli, "plan", "--config", "albert_base", "--topology", "v3-8", "--batch-size", "256",
                  "--max-seq-length", "128", "--budget-hours", "2", "--price-per-chip-hour", "3")
    step = p["phases"][0]["step_time_s"]
    assert p["run_steps"] == int(2 * 3600 / step) and p["budget_hours"] == 2
    assert 2 * 3600 - step < p["run_time_s"] <= 2 * 3600
    # a v3-8 is 4 chips (8 cores, 2 per chip): 2 h are 8 chip-hours (less the part of a step not bought)
    assert p["chips"] == 4 and p["chip_hours"] == pytest.approx(4 * p["run_time_s"] / 3600)
    assert p["chip_hours"] == pytest.approx(8, rel=1e-4) and p["cost"] == pytest.approx(3 * p["chip_hours"])
    code, out, _ = cli("plan", "--config", "albert_base", "--topology", "v3-8", "--batch-size", "256",
                       "--max-seq-length", "128", "--budget-hours", "2")
    assert code == 0 and "--budget-hours 2 at the estimated step time" in out
    assert "--budget-hours 2.0" in out.rstrip().splitlines()[-1]  # the command says the budget, not a count


@pytest.mark.parametrize("topology, chips", [("v3-8", 4), ("v5litepod-16", 16), ("v4-128", 64), ("v5p-128", 64),
                                             ("v3-512", 256), ("v2-32", 16), ("cpu", None)])
def test_chips_and_chip_hours(topology, chips):
    assert run_costs.chips_of(topology) == chips
    assert run_costs.chip_hours(topology, 2 * 3600) == (None if chips is None else 2 * chips)


def test_cost_line(cli):
    argv = ("plan", "--config", "albert_base", "--topology", "v5litepod-16", "--batch-size", "256",
            "--max-seq-length", "128", "--num-train-steps", "1000")
    p = plan_json(cli, *argv, "--price-per-chip-hour", "1.2")
    hours = 1000 * p["step_time_s"] / 3600
    assert p["chips"] == 16 and p["chip_hours"] == pytest.approx(16 * hours)
    assert p["cost"] == pytest.approx(1.2 * 16 * hours)
    code, out, _ = cli(*argv, "--price-per-chip-hour", "1.2")
    line = next(x for x in out.splitlines() if "chip-hours" in x)
    assert code == 0 and line == (f"  16 chips x {hours:,.1f} h = {16 * hours:,.1f} chip-hours; at 1.2 per "
                                  f"chip-hour: cost {1.2 * 16 * hours:,.2f}")
    assert plan_json(cli, *argv)["cost"] is None  # no price, no cost; the chip-hours stay
    _, out, _ = cli(*argv)
    assert "chip-hours" in out and "cost" not in out


def test_compare_prints_both_runs_side_by_side(cli):
    argv = ("plan", "--config", "albert_xxlarge", "--topology", "v3-512", "--recipe", "paper_v2",
            "--price-per-chip-hour", "1", "--compare", "paper_v2_phased")
    rows = plan_json(cli, *argv)["compare"]
    assert [r["recipe"] for r in rows] == ["paper_v2", "paper_v2_phased"]
    assert [r["steps"] for r in rows] == [125_000, 384_616]
    assert rows[0]["tokens"] == 125_000 * 4096 * 512 and rows[1]["tokens"] == 346_154 * 4096 * 128 + 38_462 * 4096 * 512
    for row in rows:  # 256 chips of a v3-512, 1 per chip-hour
        assert row["chip_hours"] == pytest.approx(256 * row["hours"])
        assert row["cost"] == pytest.approx(row["chip_hours"])
    # the phased run's hours are its phases' (the same --remat both: the 512 phase needs it)
    alone = plan_json(cli, "plan", "--config", "albert_xxlarge", "--topology", "v3-512", "--recipe", "paper_v2_phased")
    assert rows[1]["hours"] == pytest.approx(alone["run_time_s"] / 3600)
    code, out, _ = cli(*argv)
    lines = out.splitlines()
    table = lines[lines.index("side by side (times and costs are estimates at the assumed MFU):") + 1:][:3]
    assert table[0].split() == ["run", "steps", "tokens", "seq", "x", "batch", "hours", "chip-hours", "cost"]
    assert table[1].split()[:3] == ["paper_v2", "125,000", "262B"]
    assert table[2].split()[:3] == ["paper_v2_phased", "384,616", "262B"]
    assert table[1].split()[-1] == f"{rows[0]['cost']:,.2f}" and table[2].split()[-1] == f"{rows[1]['cost']:,.2f}"
    assert lines[-1].startswith("  albert-tf pretrain --recipe paper_v2 ")  # the last line stays the command


def test_phased_command_pastes_into_pretrain(cli):
    code, out, _ = cli("plan", "--config", "albert_xxlarge", "--topology", "v3-512", "--recipe", "paper_v2_phased")
    command = shlex.split(out.rstrip().splitlines()[-1])
    from albert_tf import cli as albert_cli  # pylint: disable=import-outside-toplevel
    from albert_tf.jobs import pretrain  # pylint: disable=import-outside-toplevel

    config = pretrain.config_from_args(albert_cli.build_parser(["pretrain"]).parse_args(command[1:]))
    assert code == 0 and "--num-train-steps" not in command and "--batch-size" not in command
    assert config.num_train_steps == 384_616 and config.phases == "128:0.9,512:0.1" and config.remat
    assert config.phase_data == {"128": "gs://BUCKET/records/train-128-*"}


@pytest.mark.parametrize("argv, message", [
    (["--price-per-chip-hour", "-1"], "--price-per-chip-hour -1.0: expected a price >= 0"),
    (["--compare", "nope"], "--compare 'nope': unknown; expected one of paper_v2, paper_v1, paper_v2_phased"),
    (["--compare", "missing.json"], "--compare missing.json: --recipe missing.json: no such file"),
    (["--budget-tokens", "1000", "--budget-hours", "1"], "--budget-tokens and --budget-hours are exclusive"),
    (["--budget-hours", "1", "--phases", "128:0.5,512:0.5"], "--budget-hours and --phases are exclusive"),
    (["--budget-hours", "0"], "--budget-hours must be positive, got 0.0"),
    (["--budget-tokens", "0"], "--budget-tokens must be positive, got 0"),
    (["--budget-tokens", "4096000", "--num-train-steps", "7"], "--num-train-steps 7 and --budget-tokens 4,096,000 "
                                                                "(2 steps) disagree: give one"),
    (["--phases", "128:0.5,256:0.5"], "--phases 128:0.5,256:0.5: the longest phase (256) must be --max-seq-length"),
    (["--phases", "128:0.5,512:0.4"], "the fractions sum to 0.9, not 1"),
    (["--phases", "512:0.5:4096,512:0.5"], "--phases: sequence length 512 comes twice with global batch 4096"),
    (["--topology", "cpu", "--budget-hours", "1"], "--budget-hours with --topology cpu"),
])
def test_bad_input_is_one_line(cli, argv, message):
    helpers.plan_refuses(cli, argv, message)
