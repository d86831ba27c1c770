"""pretrain's step watchdog (albert_tf/runtime/watchdog.py) with a fake clock: the first step has its own, larger
limit counted from the start (start-up, restore, XLA compile); after it, no step, save or evaluation for
--step-timeout seconds ends the run with one line (the command line exits 76). A limit of 0 is off."""
import subprocess
import sys

import helpers
from albert_tf.runtime import exit_codes
from albert_tf.runtime.watchdog import StepWatchdog
from albert_tf.settings.pretrain_config import PretrainConfig


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_compile_within_the_first_limit_is_not_stopped_then_a_hang_is():
    clock = Clock()
    watchdog = StepWatchdog(first_limit=3600, limit=1800, on_expire=None, clock=clock)
    clock.now += 25 * 60  # start-up and a 25-minute compile
    assert watchdog.expired() is None
    watchdog.beat()  # the first step
    clock.now += 1800
    assert watchdog.expired() is None
    clock.now += 1
    assert watchdog.expired().startswith("no training step completed for 1801s (--step-timeout 1800)")


def test_a_first_step_that_never_comes():
    clock = Clock()
    watchdog = StepWatchdog(first_limit=3600, limit=1800, on_expire=None, clock=clock)
    clock.now += 3601
    assert watchdog.expired().startswith("the first training step did not complete within 3601s of the start "
                                         "(--first-step-timeout 3600")
    assert StepWatchdog(0, 0, None, clock=clock, started=0.0).expired() is None  # off


def test_the_thread_calls_on_expire_once():
    clock, lines = Clock(), []
    with StepWatchdog(first_limit=10, limit=10, on_expire=lines.append, clock=clock, poll=0.01) as watchdog:
        clock.now += 11
        watchdog._thread.join(timeout=10)  # pylint: disable=protected-access
    assert len(lines) == 1 and "--first-step-timeout 10" in lines[0]


def test_the_command_line_exits_76_with_one_line():
    program = ("import time\nfrom albert_tf.runtime.watchdog import StepWatchdog, exit_lost\n"
               "with StepWatchdog(0.2, 0.2, exit_lost('albert-tf pretrain'), poll=0.05):\n    time.sleep(30)\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == exit_codes.RUNTIME_LOST
    assert result.stderr.strip().splitlines()[-1].startswith("albert-tf pretrain: error: the first training step")


def test_pretrain_config_has_the_limits():
    config = PretrainConfig(config="albert_tiny", train_data="x", model_dir="y")
    assert (config.first_step_timeout, config.step_timeout) == (3600.0, 1800.0)


def test_pretrain_on_the_command_line_is_watched_from_its_start(tmp_path):
    """A first-step limit shorter than TensorFlow's start-up: the run exits 76 with the watchdog's one line (so the
    watchdog is armed at the start of `albert-tf pretrain`, before the strategy and the compile)."""
    helpers.write_records(str(tmp_path / "train.tfrecord"), 16, seq_length=16, max_predictions=2, vocab_size=100)
    result = helpers.run_cli("pretrain", ["--config", "albert_tiny", "--set", "vocab_size=100", "--train-data",
                                          tmp_path / "train.tfrecord", "--model-dir", tmp_path / "model",
                                          "--max-seq-length", "16", "--max-predictions", "2", "--batch-size", "2",
                                          "--num-train-steps", "2", "--num-warmup-steps", "1",
                                          "--first-step-timeout", "0.05"], check=False)
    assert result.returncode == exit_codes.RUNTIME_LOST, result.stderr
    assert "albert-tf pretrain: error: the first training step did not complete within" in result.stderr
