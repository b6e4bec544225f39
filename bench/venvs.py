"""Create (or reuse) one virtual environment per system under bench/.venvs/."""

import json
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from pathlib import Path

from paths import LOGS, VENVS

# C driver for MySQL/MariaDB; needs libmariadb-dev. PyMySQL is the fallback.
MYSQLCLIENT = "mysqlclient>=2.2.1"


def _pip(python: Path, args: list[str], log: Path) -> bool:
    """Run pip in the venv, appending its output to log; True on success."""
    with open(log, "a") as out:
        result = subprocess.run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=1800,
        )
    return result.returncode == 0


def ensure(
    name: str,
    requirements: list[str],
    *,
    editable: str | None = None,
    mysql: bool = True,
) -> dict:
    """Return {'python', 'mysqlclient'} for venv `name`, installing what it lacks
    (with the MySQL drivers unless ``mysql`` is false: a PostgreSQL-only system).

    A stamp file remembers what was installed, so a reused venv is only
    reinstalled when the requirements change.
    """
    venv = VENVS / name
    python = venv / "bin" / "python"
    stamp = venv / "bench-stamp.json"
    wanted = {"requirements": requirements, "editable": editable}
    if not mysql:  # stamped only when off, so the existing venvs stay valid
        wanted["mysql"] = False
    if stamp.exists():
        have = json.loads(stamp.read_text())
        if {k: have.get(k) for k in wanted} == wanted:
            if editable:
                compile_checkout(editable)
            return {"python": python, "mysqlclient": have["mysqlclient"]}
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"pip-{name}.log"
    print(f"  installing venv {name} (log: {log})", flush=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    args = [*requirements, *(["PyMySQL>=1.1"] if mysql else [])]
    if editable:
        args += ["-e", editable]
    if not _pip(python, args, log):
        raise RuntimeError(f"pip install failed for {name}; see {log}")
    has_mysqlclient = mysql and _pip(python, [MYSQLCLIENT], log)
    stamp.write_text(json.dumps({**wanted, "mysqlclient": has_mysqlclient}))
    if editable:
        compile_checkout(editable)
    return {"python": python, "mysqlclient": has_mysqlclient}


def mysql_driver(*installed: dict) -> str:
    """BENCH_MYSQL_DRIVER for processes run from these venvs (``ensure``'s
    results): mysqlclient where every one has it, else PyMySQL for all, so
    MariaDB figures compare like with like."""
    return "mysqlclient" if all(v["mysqlclient"] for v in installed) else "pymysql"


def compile_checkout(editable: str) -> None:
    """Compile the packages of an editable checkout (``path[extras]``), as pip
    compiles an installed one's: where PYTHONDONTWRITEBYTECODE is set, every
    start would compile them again (about 0.12 s of CPU a supervisor's start
    for ours, bench/boot.py). Each run, for the code changes between runs."""
    root = Path(editable.split("[", 1)[0])
    find = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = find["packages"]["find"]["include"]
    packages = [
        str(path)
        for path in sorted(root.iterdir())
        if (path / "__init__.py").exists()
        and any(fnmatch(path.name, pattern) for pattern in patterns)
    ]
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", *packages],
        check=True,
        stdout=subprocess.DEVNULL,
    )
