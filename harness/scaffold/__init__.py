"""``harness new-task NAME``: a task package that runs as generated.

It writes an installable package (its ``pyproject.toml`` registers the task under the
``harness.tasks`` entry point), the task with its four arms (treatment, control, positive and
negative control), its suite (``default``, ``smoke`` and ``ci`` profiles) and a contract test
that uses ``harness.testing``. Every check runs before the first file is written: a refused name
or folder leaves nothing behind.
"""
from __future__ import annotations

import importlib.util
import keyword
import re
from pathlib import Path

from harness.tasks import registered_tasks

TEMPLATE_DIR = Path(__file__).resolve().parent / "template"
TASK_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
TASK_NAME_RULE = "a lowercase Python identifier of 1-40 characters (a-z, 0-9, _), starting with a letter"
# the package's own tests/ folder, and names Windows keeps for devices (a folder of that name cannot be made there)
RESERVED_TASK_NAMES = frozenset({"tests", "con", "prn", "aux", "nul", *(f"{port}{n}" for port in ("com", "lpt")
                                                                         for n in range(1, 10))})


class ScaffoldError(ValueError):
    """A name or folder the scaffold refuses; nothing was written."""


def _files(name: str) -> dict[str, str]:
    """Relative path -> template file."""
    return {
        "pyproject.toml": "pyproject.toml.tmpl",
        "README.md": "README.md.tmpl",
        "suite.yaml": "suite.yaml.tmpl",
        f"{name}/__init__.py": "init.py.tmpl",
        f"{name}/task.py": "task.py.tmpl",
        "tests/test_contract.py": "test_contract.py.tmpl",
    }


def class_stem(name: str) -> str:
    """``label_smoothing`` -> ``LabelSmoothing``."""
    return "".join(part.capitalize() for part in name.split("_"))


def check_new_task(name: str, out: Path) -> None:
    """Refuse a name that is not a plain word, already registered or already importable, and an
    output folder that exists and is not empty."""
    if not TASK_NAME.fullmatch(name) or keyword.iskeyword(name) or name.endswith("_"):
        raise ScaffoldError(f"task name {name!r} is not a plain word ({TASK_NAME_RULE})")
    if name in RESERVED_TASK_NAMES:
        raise ScaffoldError(f"task name {name!r} is reserved (the package's tests/ folder, or a Windows device "
                            "name); pick another")
    if name in registered_tasks():
        raise ScaffoldError(f"task name {name!r} is already registered ({registered_tasks()[name]}); pick another")
    if importlib.util.find_spec(name) is not None:
        raise ScaffoldError(f"task name {name!r} is already an importable module here; pick another")
    if out.is_symlink():
        raise ScaffoldError(f"--out {out} is a symbolic link; give a new or empty folder")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ScaffoldError(f"--out {out} exists and is not an empty folder; give a new or empty one")


def write_task_package(name: str, out: Path) -> list[Path]:
    """Write the package for task ``name`` into ``out`` (checked first); the files written."""
    check_new_task(name, out)
    texts = {relative: (TEMPLATE_DIR / template).read_text(encoding="utf-8")
             .replace("{{name}}", name).replace("{{Class}}", class_stem(name))
             for relative, template in _files(name).items()}
    written = []
    for relative, text in texts.items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
