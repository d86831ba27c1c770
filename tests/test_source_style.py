"""The source's form that CONTRIBUTING asks for and a linter of this checkout does not check: a statement continues
on the next line inside parentheses, never after a backslash (a backslash inside a string, such as a shell command's
in a docstring, is text). Reads albert_tf/ with `tokenize` (nothing is imported)."""
import functools
import io
import os
import tokenize

from tests import helpers

PACKAGE = os.path.join(helpers.REPO, "albert_tf")
_NO_TEXT = {tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.ENCODING}

# path: backslash continuations still there (each an expected failure, strict: remove the entry when it passes).
# In files other branches are rewriting for issue 44 (What to build 5: parentheses instead of backslashes).
def backslash_continuations(source):
    """The line numbers that end in a backslash joining the next line: a token followed by one on a later line
    with no NEWLINE or NL token between them (inside brackets a line break is an NL token; a string's own lines
    are inside its token)."""
    previous = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.INDENT, tokenize.DEDENT):
            continue
        if previous is not None and token.start[0] > previous.end[0]:
            yield previous.end[0]
        previous = None if token.type in _NO_TEXT else token


@functools.lru_cache(maxsize=None)
def _continuations():
    found = {}
    for root, _, names in os.walk(PACKAGE):
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                lines = list(backslash_continuations(f.read()))
            if lines:
                found[os.path.relpath(path, helpers.REPO).replace(os.sep, "/")] = lines
    return found


def test_no_backslash_continuations():
    found = {path: lines for path, lines in _continuations().items() }
    assert not found, "use parentheses, not a backslash: " + ", ".join(
        f"{path}:{line}" for path, lines in sorted(found.items()) for line in lines)


def test_the_check_finds_a_backslash_and_only_a_backslash():
    source = ('x = 1 + \\\n    2\n'                      # line 1: a continuation
              'y = (1 +\n     2)\n'                      # brackets: none
              's = """a \\\nb"""\n'                      # a backslash inside a string: text
              'cmd = "run \\\\"\n'                       # a string ending in a backslash: text
              'if x and \\\n        y:\n    pass\n')     # line 8: a continuation
    assert list(backslash_continuations(source)) == [1, 8]
