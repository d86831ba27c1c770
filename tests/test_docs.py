"""The documentation holds together: every relative link in the Markdown files resolves (file and #anchor), README.md
stays short and links every usage page, docs/README.md indexes every page, no user-facing page carries a
development log (commit hashes, dates, issue numbers), and the docstring of each package of albert_tf/ names each of
its modules (read with `ast`, nothing imported)."""
import ast
import os
import re
import sys

import pytest

from albert_tf.cloud import images
from albert_tf.runtime import devices
from helpers import REPO

USAGE_PAGES = ("data.md", "pretraining.md", "tpu.md", "fine-tuning.md", "serving.md", "planning.md",
               "benchmarks.md", "numerics.md")
README_MAX_LINES = 250
# Pages a user reads.
USER_FACING = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs", os.path.join("tpu", "README.md"))

PACKAGE = os.path.join(REPO, "albert_tf")

_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def markdown_files():
    """Every .md file of the checkout, as paths relative to REPO (hidden folders and build outputs left out)."""
    found = []
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("build", "dist", "node_modules")
                   and not d.endswith(".egg-info")]
        found += [os.path.relpath(os.path.join(folder, f), REPO) for f in files if f.endswith(".md")]
    return sorted(found)


def prose_lines(text):
    """The lines of a Markdown text outside fenced code blocks, with inline code spans blanked."""
    lines, fenced = [], None
    for line in text.splitlines():
        fence = _FENCE.match(line)
        if fence and (fenced is None or fence.group(1) == fenced):
            fenced = None if fenced else fence.group(1)
            continue
        if fenced is None:
            lines.append(_CODE_SPAN.sub("``", line))
    return lines


def slug(heading):
    """GitHub's anchor for a heading's text: link targets and Markdown punctuation dropped, lower case, spaces to
    hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(text):
    """The anchors of a Markdown text's headings (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen, result = {}, set()
    lines, fenced = [], None
    for line in text.splitlines():
        fence = _FENCE.match(line)
        if fence and (fenced is None or fence.group(1) == fenced):
            fenced = None if fenced else fence.group(1)
        elif fenced is None:
            lines.append(line)
    for line in lines:
        match = _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            result.add(base if count == 0 else f"{base}-{count}")
    return result


def links(text):
    """The link targets of a Markdown text, outside code."""
    return [target for line in prose_lines(text) for target in _LINK.findall(line)]


def broken_links(path):
    """'target: why' for each relative link of the file at REPO/path that does not resolve."""
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        text = f.read()
    problems = []
    for target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            continue  # http:, https:, mailto:
        file_part, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(REPO, os.path.dirname(path), file_part)) if file_part else \
            os.path.join(REPO, path)
        if not os.path.exists(resolved):
            problems.append(f"{target}: no such file")
        elif anchor and resolved.endswith(".md"):
            with open(resolved, encoding="utf-8") as f:
                if anchor not in anchors(f.read()):
                    problems.append(f"{target}: no heading with anchor #{anchor}")
    return problems


def _read(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        return f.read()


def test_slugs_and_links_follow_githubs_rules():
    assert slug("Reading records: `albert_tf.data.pretraining_dataset`") == \
        "reading-records-albert_tfdatapretraining_dataset"
    assert slug("Fitting a model on fewer cores: `--remat`, `--gradient-accumulation-steps`") == \
        "fitting-a-model-on-fewer-cores---remat---gradient-accumulation-steps"
    assert slug("The planner's model, in [detail](x.md)") == "the-planners-model-in-detail"
    text = "# A\n## A\n```\n# not a heading [x](missing.md)\n```\nsee [b](b.md#a-1) and `[c](c.md)`\n"
    assert anchors(text) == {"a", "a-1"}
    assert links(text) == ["b.md#a-1"]


def test_a_broken_link_and_a_missing_anchor_are_found(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Title\n## Usage\n", encoding="utf-8")
    (tmp_path / "README.md").write_text("[ok](docs/page.md#usage) [gone](docs/gone.md) [bad](docs/page.md#nope) "
                                        "[web](https://example.com/x.md) [self](#readme)\n# README\n",
                                        encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "REPO", str(tmp_path))
    assert broken_links("README.md") == ["docs/gone.md: no such file",
                                         "docs/page.md#nope: no heading with anchor #nope"]


@pytest.mark.parametrize("path", markdown_files())
def test_every_relative_link_resolves(path):
    assert not broken_links(path), f"{path}: " + "; ".join(broken_links(path))


def test_readme_is_short_and_links_every_usage_page():
    readme = _read("README.md")
    assert len(readme.splitlines()) <= README_MAX_LINES
    linked = {os.path.normpath(t.partition("#")[0]) for t in links(readme)}
    missing = [page for page in USAGE_PAGES if os.path.join("docs", page) not in linked]
    assert not missing, f"README.md does not link {missing}"
    assert {"CONTRIBUTING.md", "docs/README.md"} <= linked


def test_the_docs_index_lists_every_page():
    pages = sorted(f for f in os.listdir(os.path.join(REPO, "docs")) if f.endswith(".md") and f != "README.md")
    linked = {t.partition("#")[0] for t in links(_read("docs/README.md"))}
    assert set(USAGE_PAGES) <= set(pages)
    assert not [p for p in pages if p not in linked], "docs/README.md does not link every page"


_HISTORY = re.compile(r"\bissue[ -]?\d+"                                        # issue numbers
                      r"|\b20\d\d-[01]\d(-[0-3]\d)?\b"                           # dates
                      r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,10}\b"       # commit hashes
                      r"|\bthis session\b", re.IGNORECASE)


def test_user_facing_pages_carry_no_development_log():
    paths = [p for p in markdown_files() if p in USER_FACING or p.startswith("docs" + os.sep)]
    found = [f"{p}: {m.group(0)}" for p in paths for line in prose_lines(_read(p)) for m in _HISTORY.finditer(line)]
    assert not found, found


def test_the_development_log_pattern():
    for text in ("(issue 20 item 1)", "on 2026-11-23", "main f067730", "from this session's run"):
        assert _HISTORY.search(text), text
    for text in ('preds.answers["56ddde6b9a695914005b9628"]', "tensorflow/serving#2267", "U+1CCD6", "1.33e-5",
                 "2,325 GiB", "v3-512", "the issues page"):
        assert not _HISTORY.search(text), text


_IMAGE_NAME = re.compile(r"\btpu-vm-tf-\d+\.\d+\.\d+[a-z0-9-]*")
TPU_PAGES = (os.path.join("tpu", "README.md"), os.path.join("docs", "tpu.md"))


@pytest.mark.parametrize("page", TPU_PAGES)
def test_the_tpu_pages_name_no_image_the_package_would_not_pick(page):
    """A TensorFlow image the runbook names carries a release the keeper picks from (images.TPU_TENSORFLOW): an older
    default left in a page is stale."""
    named = sorted({m.rstrip("-") for m in _IMAGE_NAME.findall(_read(page))})
    assert named, page
    outside = [n for n in named if devices.parse_image(n) is None or not images.in_range(devices.parse_image(n))]
    assert not outside, f"{page} names images outside TensorFlow {images.TPU_TENSORFLOW}: {outside}"


def test_the_runbook_names_every_fixed_default_image():
    """tpu/README.md names the image create_tpu.sh takes for one host and for a pod of each supported generation."""
    text = _read(os.path.join("tpu", "README.md"))
    defaults = {images.default_image(hosts, g) for g in devices.SUPPORTED for hosts in (1, 2)}
    assert not [d for d in sorted(defaults) if f"`{d}`" not in text]


# The names a line of a package's module list starts with: "    name   what it holds", "    a, b, c   ...", "    sub/".
_LISTED = re.compile(r"^\s+((?:[\w/]+, )*[\w/]+)(?=\s|$)")


def unnamed_modules(package_dir, dotted):
    """The modules and subpackages of the package at `package_dir` (import path `dotted`) that its docstring does not
    name: neither at the start of one of its indented lines (alone or in a list "a, b, c"; a subpackage as "sub/")
    nor as DOTTED.NAME."""
    with open(os.path.join(package_dir, "__init__.py"), encoding="utf-8") as f:
        docstring = ast.get_docstring(ast.parse(f.read()), clean=False) or ""
    listed = {name.rstrip("/") for line in docstring.splitlines() for match in [_LISTED.match(line)] if match
              for name in match.group(1).split(", ")}
    modules = sorted(n[:-3] for n in os.listdir(package_dir) if n.endswith(".py") and n != "__init__.py")
    modules += sorted(n for n in os.listdir(package_dir)
                      if os.path.isfile(os.path.join(package_dir, n, "__init__.py")))
    return [m for m in modules if m not in listed and not re.search(rf"\b{re.escape(dotted)}\.{m}\b", docstring)]


def _packages():
    """(directory, import path) of every package below albert_tf/ (the top package's docstring is the public API;
    README's code map lists its modules)."""
    return [(folder, os.path.relpath(folder, REPO).replace(os.sep, "."))
            for folder, dirs, files in os.walk(PACKAGE) if folder != PACKAGE and "__init__.py" in files
            and not dirs.sort()]


@pytest.mark.parametrize("package_dir, dotted", _packages(), ids=[dotted for _, dotted in _packages()])
def test_a_packages_docstring_names_its_modules(package_dir, dotted):
    missing = unnamed_modules(package_dir, dotted)
    assert not missing, f"{dotted}'s docstring does not name {missing}"


def test_an_unnamed_module_is_found(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("")
    for name in ("listed", "in_a_list", "dotted", "only_in_prose"):
        (tmp_path / f"{name}.py").write_text("")
    (tmp_path / "__init__.py").write_text('"""A package.\n\n    listed    one\n    in_a_list, other   two\n'
                                          '    sub/      three\n\nSee pkg.dotted; only_in_prose is not listed."""\n')
    assert unnamed_modules(str(tmp_path), "pkg") == ["only_in_prose"]
