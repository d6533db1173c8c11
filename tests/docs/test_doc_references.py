"""What the docs and the code's own comments point at exists (issue 30, item 8).

* docs/reliability.md's promise table: promises 1..N in order, each with a section of its own
  (`## N. …`), and every test the page names (`tests/…py`, `…py::test_name`, a bare
  `test_name`) is a test file or a test function defined in the suite.
* Every link between the pages (`page.md#anchor`, `#anchor`) lands on a heading of that page
  (GitHub's anchor of it) or an explicit `<a id="…">`.
* Docstrings and comments of runstore/, tests/, bench/ and tools/: every `runstore.x.y` name and
  every repository source path they cite exists (the same check test_doc_examples.py makes of
  the pages), so a module that moves leaves no stale pointer behind.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path
from typing import Iterator

from test_doc_examples import REPO, pages, references, resolves

PAGES = [*pages(), REPO / "docs" / "cli.md"]


def defined_tests() -> tuple[set[str], set[str]]:
    """(test file paths relative to the repository, names of test functions) of the suite."""
    files = {p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("test_*.py")}
    names = {m for p in (REPO / "tests").rglob("test_*.py")
             for m in re.findall(r"(?m)^\s*(?:async )?def (test_\w+)", p.read_text())}
    return files, names


def test_every_promise_has_a_section_and_existing_tests() -> None:
    page = (REPO / "docs" / "reliability.md").read_text()
    rows = re.findall(r"(?m)^\| (\d+) \| (.+) \| (.+) \|$", page)
    assert [int(n) for n, _, _ in rows] == list(range(1, len(rows) + 1)) and len(rows) >= 21
    sections = [int(n) for n in re.findall(r"(?m)^## (\d+)\. ", page)]
    assert sections == list(range(1, len(rows) + 1)), sections
    files, names = defined_tests()
    missing = []
    for n, _, tests in rows:
        named = re.findall(r"tests/[\w/]+\.py(?:::\w+)?", tests)
        assert named, f"promise {n} names no test"
        for ref in named:
            path, _, fn = ref.partition("::")
            if path not in files or (fn and not re.search(
                    rf"(?m)^\s*def {fn}\b", (REPO / path).read_text())):
                missing.append(f"promise {n}: {ref}")
    for name in set(re.findall(r"\b(test_\w+)", page)):
        stem = name.rstrip("_")
        if name not in names and not any(n.startswith(stem) for n in names) \
                and not any(f.endswith(f"/{name}.py") for f in files):
            missing.append(f"docs/reliability.md names {name}")
    assert not missing, "\n".join(missing)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces -."""
    text = re.sub(r"`|\*\*", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"(?ms)^```.*?^```", "", path.read_text())
    found = {anchor(h) for h in re.findall(r"(?m)^#{1,6} (.+)$", text)}
    return found | set(re.findall(r'<a id="([^"]+)"', text))


def test_links_between_the_pages_land_on_an_anchor() -> None:
    broken = []
    for page in PAGES:
        text = re.sub(r"(?ms)^```.*?^```", "", page.read_text())
        for target, frag in re.findall(r"\]\(([\w./-]*?\.md|)#([\w-]+)\)", text):
            dest = (page.parent / target) if target else page
            if not dest.exists() or frag not in anchors(dest):
                broken.append(f"{page.relative_to(REPO)}: {target}#{frag}")
    assert not broken, "links to anchors that do not exist:\n" + "\n".join(broken)


def comments_and_docstrings(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of each comment and triple-quoted string of a Python file."""
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.COMMENT or (
                tok.type == tokenize.STRING
                and tok.string.lstrip("rbuRBU").startswith(('"""', "'''"))):
            yield tok.start[0], tok.string


def test_the_code_the_comments_name_exists(tmp_path: Path) -> None:
    """A `runstore.x.y` name or a source path in a docstring or comment exists (a name the
    package itself spells as a string, such as a logger's, counts as existing)."""
    package = "\n".join(p.read_text() for p in (REPO / "runstore").rglob("*.py"))
    stale = []
    for root in ("runstore", "tests", "bench", "tools"):
        for path in sorted((REPO / root).rglob("*.py")):
            for line, text in comments_and_docstrings(path):
                part = tmp_path / "part.md"
                part.write_text(text)
                for offset, name in references(part):
                    if name != "runstore.x.y" and not resolves(name) \
                            and f'"{name}"' not in package:
                        stale.append(f"{path.relative_to(REPO)}:{line + offset - 1}: {name}")
    assert not stale, "comments name code that does not exist:\n" + "\n".join(stale)
