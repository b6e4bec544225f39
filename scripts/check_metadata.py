"""Check the built wheel's metadata: our name, our links, a PyPI-safe description.

Usage: python scripts/check_metadata.py DIST_DIR (holding one wheel).
"""

import re
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

REQUIRED_CLASSIFIERS = {
    "Framework :: Django :: 5.2",
    "Framework :: Django :: 6.0",
    "Framework :: Django :: 6.1",
}
REQUIRED_URLS = {"Documentation", "Source", "Changelog"}


def problems_of(metadata, version):
    if metadata["Name"] != "django-steady-queue":
        yield f"the name is {metadata['Name']!r}, not 'django-steady-queue'"
    if metadata["Version"] != version:
        yield f"the version is {metadata['Version']}, steady_queue says {version}"
    if metadata["License-Expression"] != "MIT":
        yield "no License-Expression: MIT"
    if "LICENSE" not in (metadata.get_all("License-File") or []):
        yield "the LICENSE file is not in the wheel's metadata"
    missing = REQUIRED_CLASSIFIERS - set(metadata.get_all("Classifier") or [])
    if missing:
        yield f"missing classifiers: {sorted(missing)}"
    urls = dict(
        (part.strip() for part in entry.split(",", 1))
        for entry in metadata.get_all("Project-URL") or []
    )
    if REQUIRED_URLS - set(urls):
        yield f"missing Project-URLs: {sorted(REQUIRED_URLS - set(urls))}"
    # The hints of checks and errors name pages of docs/, which ship in the
    # sdist: each page named must exist.
    root = Path(__file__).resolve().parent.parent
    for module in sorted((root / "steady_queue").rglob("*.py")):
        for page in set(re.findall(r"docs/[\w-]+\.rst", module.read_text())):
            if not (root / page).is_file():
                yield f"{module.relative_to(root)} names {page}, which does not exist"
    required = [
        entry
        for entry in metadata.get_all("Requires-Dist") or []
        if "extra ==" not in entry
    ]
    if any(entry.lower().startswith("opentelemetry") for entry in required):
        yield "OpenTelemetry is a required dependency: it belongs in the otel extra"
    if metadata["Description-Content-Type"] != "text/markdown":
        yield "the description is not marked as Markdown"
    description = metadata.get_payload()
    if re.search(r"\]\((?!https?://)[^)]+\)", description):
        yield "the description has a relative link (it would be broken on PyPI)"
    if re.search(r"\bmake \w", description):
        yield "the description mentions a make target (none exists for users)"
    if 'pip install "django-steady-queue' not in description:
        yield "the description does not say how to install django-steady-queue"


def main(dist):
    (wheel,) = Path(dist).glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode())
    init = Path(__file__).resolve().parent.parent / "steady_queue" / "__init__.py"
    version = re.search(r'__version__ = "([^"]+)"', init.read_text()).group(1)
    found = list(problems_of(metadata, version))
    for problem in found:
        print(f"package metadata: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
