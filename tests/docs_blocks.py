"""Read the code blocks of the docs, so a test runs what a page shows."""

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
