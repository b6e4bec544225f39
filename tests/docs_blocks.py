"""Read the code blocks of the docs, so a test runs what a page shows."""

import re
import textwrap
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def code_block(page, language, after=None):
    """The first ``.. code-block:: language`` of docs/``page``, dedented.

    With ``after``, the first such block past that text on the page.
    """
    text = (DOCS / page).read_text()
    start = text.index(after) if after else 0
    start = text.index(f".. code-block:: {language}\n", start)
    lines = text[start:].splitlines()[2:]
    block = []
    for line in lines:
        if line and not line.startswith("   "):
            break
        block.append(line[3:])
    return "\n".join(block).strip() + "\n"


def code_blocks(page, language="python"):
    """Every ``.. code-block:: language`` body of docs/``page``, dedented."""
    return blocks_in((DOCS / page).read_text(), language)


def blocks_in(text, language):
    """Every ``.. code-block:: language`` body of reStructuredText ``text``.

    A body ends at the first line indented less than its own first line (a
    block inside a definition list is followed by more of the list's text).
    """
    blocks = []
    directive = rf"^( *)\.\. code-block:: {re.escape(language)}\n\n"
    for match in re.finditer(directive, text, re.M):
        lines = text[match.end() :].splitlines(keepends=True)
        indent = len(lines[0]) - len(lines[0].lstrip(" "))
        body = []
        for line in lines:
            if line.strip() and len(line) - len(line.lstrip(" ")) < indent:
                break
            body.append(line)
        blocks.append(textwrap.dedent("".join(body)).strip() + "\n")
    return blocks


def subsections(page, section, underline="~"):
    """{heading: text} of the subsections of docs/``page``'s ``section``.

    A subsection's heading is underlined with ``underline``; its text runs to
    the next heading of any level.
    """
    text = (DOCS / page).read_text()
    text = text[text.index(f"\n{section}\n") + len(section) + 2 :]
    headings = list(re.finditer(r"^(\S.*)\n([-=~^])\2+\n", text, re.M))
    found = {}
    for heading, following in zip(headings, [*headings[1:], None], strict=True):
        if heading.group(2) != underline:
            break
        end = following.start() if following else len(text)
        found[heading.group(1)] = text[heading.end() : end]
    return found


def block_with(page, marker, language="python"):
    """The one code block of docs/``page`` that holds ``marker``."""
    (found,) = [block for block in code_blocks(page, language) if marker in block]
    return found


def readme_block(marker, language="python"):
    """The one fenced ```language block of README.md that holds ``marker``."""
    text = (DOCS.parent / "README.md").read_text()
    blocks = re.findall(rf"^```{re.escape(language)}\n(.*?)^```$", text, re.M | re.S)
    (found,) = [block for block in blocks if marker in block]
    return found


def files_on(page):
    """{path: code} of the page's python blocks whose first line names the
    file they are, as ``# shop/tasks.py`` or ``# mysite/settings.py (after
    ...)``: what a reader writes to that file."""
    files = {}
    for block in code_blocks(page):
        named = re.match(r"# ((?:mysite|shop)/[\w/]+\.py)\b", block)
        if named:
            files[named.group(1)] = block
    return files
