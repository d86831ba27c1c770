"""The one shape of a command's messages on stderr: `albert-tf COMMAND: error|warning|note: TEXT`. Library code
that warns or notes (a lock taken over, a SQuAD question without a prediction, a deprecated spelling) does not know
which command runs it: the command line (albert_tf.cli) names it (`command`), and `say` uses the innermost name
(`albert-tf: ...` outside any). No TensorFlow, no other module of the package: any layer may import it.

    with messages.command("finetune"):
        messages.say("warning", "1 of 7 SQuAD questions have no prediction")
        # albert-tf finetune: warning: 1 of 7 SQuAD questions have no prediction
"""
import contextlib
import sys

KINDS = ("error", "warning", "note")
_COMMANDS = []  # the commands running, innermost last


@contextlib.contextmanager
def command(name):
    """Inside the block, messages name the command `name` (e.g. "create-data")."""
    _COMMANDS.append(name)
    try:
        yield
    finally:
        _COMMANDS.pop()


def line(kind, text, name=None):
    """`albert-tf NAME: KIND: TEXT`; NAME is `name`, else the running command's."""
    if kind not in KINDS:
        raise ValueError(f"a message is one of {', '.join(KINDS)}, got {kind!r}")
    name = name or (_COMMANDS[-1] if _COMMANDS else None)
    return f"albert-tf{' ' + name if name else ''}: {kind}: {text}"


def say(kind, text, name=None):
    """Prints `line(kind, text, name)` on stderr."""
    print(line(kind, text, name), file=sys.stderr, flush=True)


__all__ = ["command", "line", "say"]
