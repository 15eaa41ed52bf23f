"""Code the docs quote is code that builds: a ```cpp block right below the line
`<!-- quoted from PATH -->` (PATH relative to the repository root) must stand in PATH verbatim,
its lines contiguous, up to a common leading indentation.
"""
import pathlib
import re

import pytest

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]
DOCS = [SOURCE_DIR / "include/fusekit/pattern/README.md"]
MARKER = re.compile(r"<!-- quoted from (\S+) -->")


def quotes(doc):
    """(doc, line, path, block) for each marker; block is None where no ```cpp block follows."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    found = []
    for i, line in enumerate(lines):
        marker = MARKER.fullmatch(line.strip())
        if not marker:
            continue
        block = None
        if i + 1 < len(lines) and lines[i + 1].strip() == "```cpp":
            end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
            if end is not None:
                block = lines[i + 2:end]
        found.append((doc, i + 1, marker.group(1), block))
    return found


def dedented(lines):
    lines = [line.rstrip() for line in lines]
    indent = min((len(line) - len(line.lstrip()) for line in lines if line), default=0)
    return [line[indent:] for line in lines]


def stands_in(block, source):
    block = dedented(block)
    return any(dedented(source[i:i + len(block)]) == block
               for i in range(len(source) - len(block) + 1))


QUOTES = [q for doc in DOCS for q in quotes(doc)]


def test_the_docs_mark_their_quotes():
    assert QUOTES, "no '<!-- quoted from PATH -->' marker: nothing is checked"


@pytest.mark.parametrize("doc, line, path, block", QUOTES,
                         ids=[f"{doc.name}:{line}" for doc, line, _, _ in QUOTES])
def test_quote_stands_in_its_source(doc, line, path, block):
    where = f"{doc.relative_to(SOURCE_DIR)}:{line}"
    assert block, f"{where}: the marker is not right above a non-empty ```cpp block"
    source = SOURCE_DIR / path
    assert source.is_file(), f"{where} quotes {path}, which does not exist"
    assert stands_in(block, source.read_text(encoding="utf-8").splitlines()), (
        f"{where}: the block is not in {path} as it stands; quote the file again")
