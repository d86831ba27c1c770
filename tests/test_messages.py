"""What a user reads: no TensorFlow start-up noise from the CLI, and one clear line (rc 2) for each bad input."""
import os
import subprocess
import sys

import pytest

from albert_tf import run_config
from tests.helpers import REPO

_NOISE_MARKERS = ("cuInit", "E0000", "I0000", "W0000", "absl::InitializeLog")


def _python(code, *args):
    """`python -c CODE ARGS` in a fresh process as a user runs it: this checkout's albert_tf, no
    TF_CPP_MIN_LOG_LEVEL of the test run's. Returns the CompletedProcess (text stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = REPO
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600, check=False)


def _noise(stderr):
    return [line for line in stderr.splitlines() if any(marker in line for marker in _NOISE_MARKERS)]


def test_cli_stderr_has_no_tensorflow_startup_lines():
    """The CLI's quiet import, then a TensorFlow op (device initialization, the CUDA probe on a GPU-less machine)."""
    proc = _python("import sys; from albert_tf import cli; cli.quiet_tensorflow('pretrain', verbose=False); "
                   "import tensorflow as tf; print(int(tf.reduce_sum(tf.ones(3))))")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "3"
    assert _noise(proc.stderr) == [], proc.stderr


def test_cli_command_stderr_is_one_line(tmp_path):
    """A whole command (export, which imports TensorFlow) on a user mistake: its error line and nothing else."""
    proc = _python("import sys; from albert_tf.cli import main; sys.exit(main(sys.argv[1:]))",
                   "export", "--init", str(tmp_path / "missing"), "--output", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert _noise(proc.stderr) == []


def test_import_albert_tf_leaves_the_log_level_alone():
    proc = _python("import os, albert_tf; print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))")
    assert proc.stdout.strip() == "None", proc.stderr


# ---------------------------------------------------------------------------------------------- quickstart's echo
def test_quickstart_echoes_pasteable_commands_that_parse_to_its_configs():
    """Each step's echoed line (made from its config by run_config.to_argv), split as a shell would (shlex.split: no
    glob expansion inside quotes) and parsed by the CLI, gives back the config the quickstart runs."""
    import shlex  # pylint: disable=import-outside-toplevel

    from albert_tf import cli  # pylint: disable=import-outside-toplevel
    from albert_tf.jobs import quickstart  # pylint: disable=import-outside-toplevel

    config = quickstart.QuickstartConfig(output="/tmp/albert quickstart", num_train_steps=40, seed=1)
    steps = quickstart.pretraining_steps(config.output, config) + [quickstart.finetune_step(config.output, config)]
    for step in steps:
        command = quickstart.command_line(step)
        argv = shlex.split(command)[1:]
        assert "'/tmp/albert quickstart/" in command
        parsed = cli.build_parser(argv).parse_args(argv)
        assert run_config.config_from_args(type(step), parsed) == step, command


def test_quickstart_next_steps_are_commands_the_cli_accepts():
    import shlex  # pylint: disable=import-outside-toplevel

    from albert_tf import cli  # pylint: disable=import-outside-toplevel
    from albert_tf.jobs import quickstart  # pylint: disable=import-outside-toplevel

    lines = quickstart.next_steps("/tmp/q s/finetune/export")
    commands = [shlex.split(line) for line in lines if line.startswith("  ")]
    assert [c[1] for c in commands] == ["run", "vocab", "create-data", "pretrain", "export", "finetune"]
    assert commands[0][commands[0].index("-v") + 1] == "/tmp/q s/finetune/export:/models/albert"
    assert "corpus/*.txt" in commands[1] and "work/data/train-*" in commands[3]
    for argv in commands[1:]:  # each parses with the real parser (no TensorFlow needed)
        args = cli.build_parser(argv[1:]).parse_args(argv[1:])
        assert args.command == argv[1]


# ---------------------------------------------------------------------------------------------- plan's counts
def test_summary_line_counts_in_sensible_units():
    """albert_tiny's 36,800-parameter encoder read "0.0M" before; the units here are worked out by hand."""
    from albert_tf.training.costs import count_text  # pylint: disable=import-outside-toplevel

    assert [count_text(v) for v in (800, 36_800, 11_683_584, 223_000_000, 999_600, 1_200_000_000)] == [
        "800", "36.8K", "11.7M", "223M", "1M", "1.2B"]


def test_summary_line_of_albert_tiny():
    """pretrain's start line for albert_tiny: its parameter count (from plan's own counts) in thousands."""
    from albert_tf.config import load_config  # pylint: disable=import-outside-toplevel
    from albert_tf.training import costs  # pylint: disable=import-outside-toplevel

    estimate = costs.estimate(load_config("albert_tiny"), global_batch=8, seq_length=128, cores=1)
    line = costs.summary_line(estimate)
    assert 1_000 <= estimate["parameters"] < 1_000_000
    assert line.startswith(f"plan: {estimate['parameters'] / 1e3:.3g}K parameters, "), line


# ---------------------------------------------------------------------------------------------- finetune's progress
class _Clock:
    """A settable clock for ProgressLog."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_progress_log_lines_by_steps_and_by_time():
    """steps_per_epoch 10, 2 epochs, batch 16, every 4 steps or 15 s; training starts at t=100, the first step
    (compiling) ends at t=105, then 0.25 s a step: the rates, elapsed and ETA below are worked out by hand."""
    import io  # pylint: disable=import-outside-toplevel

    from albert_tf.training.callbacks import ProgressLog  # pylint: disable=import-outside-toplevel

    clock, out = _Clock(), io.StringIO()
    log = ProgressLog(10, 2, 16, every_steps=4, every_seconds=15, clock=clock, stream=out)
    log.on_train_begin()
    log.on_epoch_begin(0)
    for batch in range(10):
        clock.now = 105.0 + 0.25 * batch
        log.on_train_batch_end(batch, {"loss": 0.69314718})
    log.on_epoch_begin(1)
    clock.now = 125.0  # a slow step: 18 s since the last line (step 9, t=107) → a line before 4 more steps
    log.on_train_batch_end(0, {"loss": 0.5})
    assert out.getvalue().splitlines() == [
        "progress: step 5/20 (25.0%) | 4 steps/s | 64 examples/s | elapsed 6s | ETA 4s | epoch 1/2 | loss 0.6931",
        "progress: step 9/20 (45.0%) | 4 steps/s | 64 examples/s | elapsed 7s | ETA 3s | epoch 1/2 | loss 0.6931",
        "progress: step 11/20 (55.0%) | 0.5 steps/s | 8 examples/s | elapsed 25s | ETA 18s | epoch 2/2 | loss 0.5000",
    ]


@pytest.mark.slow
def test_finetune_logs_progress_lines_and_total_time_when_not_a_terminal(tmp_path, tiny_spm_model):
    """Through the CLI with stdout a pipe (a log): ProgressLog's lines (no Keras bar), and the done line's total."""
    import re  # pylint: disable=import-outside-toplevel

    from tests import finetune_helpers as fh  # pylint: disable=import-outside-toplevel
    from tests.helpers import run_cli  # pylint: disable=import-outside-toplevel

    init = fh.save_random_init(str(tmp_path / "init"), tiny_spm_model)
    data = fh.write_sst2(str(tmp_path / "sst2"), 48, 8)
    proc = run_cli("finetune", ["--task", "sst2", "--data-dir", data, "--init", init, "--output", tmp_path / "out",
                                "--epochs", 1, "--batch-size", 16, "--max-seq-length", 16, "--log-every", 1])
    progress = [line for line in proc.stderr.splitlines() if line.startswith("progress: ")]  # progress: stderr
    assert not [line for line in proc.stdout.splitlines() if line.startswith("progress: ")]
    number = r"[\d,]+(\.\d+)?"  # 1,234 examples/s
    pattern = (rf"progress: step (?P<step>[23])/3 \({number}%\) \| {number} steps/s \| {number} examples/s \| "
               rf"elapsed (\d+[dhm])?\d+[hms] \| ETA (\d+[dhm])?\d+[hms] \| epoch 1/1 \| loss {number}")
    assert [re.fullmatch(pattern, line).group("step") for line in progress] == ["2", "3"], proc.stderr
    assert "\x08" not in proc.stdout and "━" not in proc.stdout  # no progress bar in a log
    assert re.search(r"^done in (\d+[dhm])?\d+[hms]: best epoch 1: ", proc.stdout, flags=re.MULTILINE), proc.stdout


# ---------------------------------------------------------------------------------------------- bad inputs, one line
def _first_error_line(argv, cli):
    """(exit code, first stderr line) of `albert-tf ARGV` run in this process (the cli fixture)."""
    code, _, err = cli(*argv)
    return code, (err.splitlines() or [""])[0]


def _file(path):
    path.write_text("not a directory\n", encoding="utf-8")
    return path


def test_a_file_given_as_an_output_directory_is_one_line(tmp_path, cli, corpus_file, tiny_spm_model):
    """pretrain --model-dir / finetune --output / export --output FILE, create-data --output FILE/x: rc 2, one line
    naming the flag (they were FailedPreconditionError tracebacks), and the file left as it was."""
    f = _file(tmp_path / "f")
    cases = [
        (["pretrain", "--config", "albert_tiny", "--train-data", tmp_path / "none*", "--model-dir", f],
         f"albert-tf pretrain: error: --model-dir {f} is a file; expected a directory"),
        (["finetune", "--task", "sst2", "--data-dir", tmp_path, "--init", tmp_path, "--output", f],
         f"albert-tf finetune: error: --output {f} is a file; expected a directory"),
        (["export", "--init", tmp_path, "--output", f],
         f"albert-tf export: error: --output {f} is a file; expected a directory"),
        (["create-data", "--input", corpus_file, "--spm-model", tiny_spm_model, "--output", f / "sub" / "train"],
         f"albert-tf create-data: error: --output {f / 'sub' / 'train'}: {f} is a file, not a directory"),
    ]
    for argv, expected in cases:
        assert _first_error_line(argv, cli) == (2, expected), argv
    assert f.read_text(encoding="utf-8") == "not a directory\n"


def test_check_output_dir_accepts_new_and_existing_directories(tmp_path, monkeypatch):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.files import check_output_dir  # pylint: disable=import-outside-toplevel

    check_output_dir(tmp_path, "--output")
    check_output_dir(tmp_path / "new" / "deeper", "--output")
    check_output_dir(tmp_path / "new" / "prefix", "--output", prefix=True)
    asked = []  # object stores: asked once whether the path exists (the bucket answers, or a fault is raised)
    monkeypatch.setattr(tf.io.gfile, "exists", lambda path: asked.append(path) or False)
    check_output_dir("gs://bucket/model", "--model-dir")
    check_output_dir("gs://bucket/data/train", "--output", prefix=True)
    assert asked == ["gs://bucket/model", "gs://bucket/data/train"]


def test_misleading_messages_say_what_is_wrong(tmp_path, cli, corpus_file, tiny_spm_model):
    """A missing export --init (was "no spm.model"), --spm-model DIRECTORY (was "not found" / "no such file"),
    --input DIRECTORY (was "matches no file"), finetune --data-dir FILE (was "no such directory")."""
    spm_dir, model_dir = tmp_path / "spm_dir", tmp_path / "model"
    spm_dir.mkdir()
    model_dir.mkdir()
    (model_dir / "spm.model").write_bytes(open(tiny_spm_model, "rb").read())  # pylint: disable=consider-using-with
    corpus_dir = os.path.dirname(corpus_file)
    cases = [
        (["export", "--init", tmp_path / "nothing", "--output", tmp_path / "out"],
         f"albert-tf export: error: --init {tmp_path / 'nothing'}: no such directory and not a released model's "
         "name (expected a pretrained-model directory, an `albert-tf export` BASE or BASE/N, a Hugging Face ALBERT "
         "directory or a released model's name: albert_base_v1, albert_large_v1, albert_xlarge_v1, "
         "albert_xxlarge_v1, albert_base_v2, albert_large_v2, albert_xlarge_v2, albert_xxlarge_v2, hf:OWNER/NAME)"),
        (["export", "--init", model_dir, "--spm-model", spm_dir, "--output", tmp_path / "out"],
         f"albert-tf export: error: --spm-model {spm_dir} is a directory; expected a file"),
        (["create-data", "--input", corpus_file, "--spm-model", model_dir, "--output", tmp_path / "data" / "train"],
         f"albert-tf create-data: error: --spm-model {model_dir} is a directory; expected a file; did you mean "
         f"{model_dir / 'spm.model'}?"),
        (["pretrain", "--config", "albert_tiny", "--train-data", tmp_path / "none*", "--model-dir", tmp_path / "m",
          "--spm-model", spm_dir],
         f"albert-tf pretrain: error: --spm-model {spm_dir} is a directory; expected a file"),
        (["create-data", "--input", corpus_dir, "--spm-model", tiny_spm_model, "--output", tmp_path / "d" / "t"],
         f"albert-tf create-data: error: --input '{corpus_dir}' is a directory; pass the files in it, e.g. "
         f"'{corpus_dir}/*'"),
        (["vocab", "--input", corpus_dir + "/", "--output-prefix", tmp_path / "v"],
         f"albert-tf vocab: error: --input '{corpus_dir}/' is a directory; pass the files in it, e.g. "
         f"'{corpus_dir}/*'"),
    ]
    for argv, expected in cases:
        assert _first_error_line(argv, cli) == (2, expected), argv
    assert not (tmp_path / "out").exists() and not (tmp_path / "data").exists() and not (tmp_path / "m").exists()


def test_finetune_spm_model_directory_and_data_dir_file(tmp_path, cli, tiny_spm_model):
    """finetune --spm-model DIRECTORY (was "no such file") and --data-dir FILE (was "no such directory")."""
    from tests import finetune_helpers as fh  # pylint: disable=import-outside-toplevel

    f, spm_dir = _file(tmp_path / "f"), tmp_path / "spm_dir"
    spm_dir.mkdir()
    init = fh.save_random_init(str(tmp_path / "init"), tiny_spm_model)
    common = ["finetune", "--task", "sst2", "--init", init, "--output", tmp_path / "ft"]
    assert _first_error_line([*common, "--data-dir", tmp_path, "--spm-model", init], cli) == (
        2, f"albert-tf finetune: error: --spm-model {init} is a directory; expected a file; did you mean "
           f"{os.path.join(init, 'spm.model')}?")
    assert _first_error_line([*common, "--data-dir", f], cli) == (
        2, f"albert-tf finetune: error: --data-dir {f} is a file; expected the directory holding the sst2 files")
    assert not (tmp_path / "ft").exists()


# ---------------------------------------------------------------------------------------------- message prefixes
def test_library_warnings_and_notes_name_the_command(tmp_path, cli, monkeypatch):
    """`albert-tf COMMAND: error|warning|note: ...` everywhere: a library's note (a stale lock taken over) names the
    command the CLI runs (before: the bare line); outside a command, `albert-tf: note: ...`."""
    from albert_tf import messages  # pylint: disable=import-outside-toplevel
    from albert_tf.jobs import vocab as vocab_job  # pylint: disable=import-outside-toplevel

    assert messages.line("warning", "w", "convert") == "albert-tf convert: warning: w"
    assert messages.line("note", "n") == "albert-tf: note: n"
    with messages.command("finetune"):
        assert messages.line("error", "e") == "albert-tf finetune: error: e"
    with pytest.raises(ValueError):
        messages.line("info", "x")
    monkeypatch.setattr(vocab_job, "vocab", lambda config: messages.say("note", "taking over the stale lock L")
                        or vocab_job.VocabResult("m", "v", "c", 0))
    (tmp_path / "x.txt").write_text("a sentence.\n")  # past vocab.preflight's check of --input
    code, _, err = cli("vocab", "--input", tmp_path / "x.txt", "--output-prefix", tmp_path / "v")
    assert (code, err) == (0, "albert-tf vocab: note: taking over the stale lock L\n")
