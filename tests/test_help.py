"""`albert-tf COMMAND --help`: fast (no TensorFlow imported) and every option's default shown exactly once."""
import re

import pytest

from albert_tf.jobs import BY_NAME
from tests.helpers import run_program


def _option_blocks(text):
    """{first flag: its help entry, continuation lines joined} for the entries of the options section."""
    blocks, current = {}, None
    section = text.split("options:", 1)[1]
    for line in section.splitlines():
        match = re.match(r"^  (-[\w-]+)", line)
        if match:
            current = match.group(1)
            blocks[current] = line
        elif current and line.startswith("    "):
            blocks[current] += " " + line.strip()
    return blocks


def _optional_flags(text):
    """The flags the usage line shows in brackets (optional, alone or as `[--a | --b]`); the others are required."""
    usage = text.split("options:", 1)[0]
    return {flag for group in re.findall(r"\[([^\[\]]+)", usage) for flag in re.findall(r"(?:^|\| )(--[\w-]+)", group)}


@pytest.mark.parametrize("command", sorted(BY_NAME))
def test_help_imports_no_tensorflow_and_shows_each_default_once(command):
    proc = run_program("help_imports", command, env={"COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    assert "TENSORFLOW_IMPORTED False" in proc.stdout, f"{command} --help imported TensorFlow"
    blocks, optional = _option_blocks(proc.stdout), _optional_flags(proc.stdout)
    assert len(blocks) > 3
    for flag, entry in blocks.items():
        if flag == "-h":
            continue
        mentions = len(re.findall(r"default", entry, flags=re.IGNORECASE))
        expected = 1 if flag in optional else 0
        assert mentions == expected, f"{command} {flag}: {mentions} 'default' mentions in {entry!r}"


def test_help_shows_the_parsed_default():
    """The appended default is the value the parser really uses (vocab --vocab-size: 30000, once)."""
    proc = run_program("help_imports", "vocab", env={"COLUMNS": "250"})
    entry = _option_blocks(proc.stdout)["--vocab-size"]
    assert entry.endswith("pieces, special ones included; auto: sized from the corpus (at most what it holds) "
                          "(default: 30000)"), entry


def test_each_command_summary_names_what_it_does(capsys, monkeypatch):
    """`albert-tf --help` lists each command with its summary; convert's names `--to` too (before: importing only)."""
    from albert_tf import cli  # pylint: disable=import-outside-toplevel

    monkeypatch.setenv("COLUMNS", "250")  # each summary on its command's line
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    convert = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("convert"))
    assert "--to" in convert and "transformers or keras-hub" in convert
