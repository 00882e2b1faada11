"""The source code a task's results depend on, hashed into every trial's identity.

A trial is reused only while the code that produced it is unchanged: an edit to training code that
forgot a version bump must rerun, not pass a gate on stored numbers. The code is found statically,
from the task class's module along its ``import`` statements (absolute and relative), keeping every
module the task reaches that is not versioned elsewhere:

- the task's own package: the top-level package of an installed or outside task (``demo`` for
  ``demo.task``, the module itself for a single file), or ``harness.tasks.<name>`` for a built-in
  (its ``mechanism/`` subpackage, the model under test, included);
- any other module it reaches, inside a package or a lone file beside it (a shared ``helpers.py`` on
  the path), and what that module imports in turn;
- native sources (``.c``, ``.cpp``, ``.cu``, ``.h``) in the folders of the packages reached, which
  a task may compile on first use (the fused ER2 decode kernel).

Left out: the standard library and installed distributions (whatever lies in the interpreter's or the
environment's library folders; every record lists their versions), and the harness's spine (seeding,
the training loop, storage, statistics), versioned with the harness, whose commit every record keeps:
hashing it would rerun every stored trial and every baseline on any refactor of the harness. Reading the
import graph from the source rather than from ``sys.modules`` gives the same answer in every process,
whatever else happens to be imported.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import site
import sys
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

NATIVE_SUFFIXES = (".c", ".cpp", ".cu", ".h")


@dataclass(frozen=True)
class TaskCode:
    """The task's source files by module name (native sources by package/relative path), and their
    combined sha256."""

    files: dict[str, Path]
    sha256: str


def _owned_package(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "harness":
        return ".".join(parts[:3]) if parts[1:2] == ["tasks"] else module
    return parts[0]


def _is_owned(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@lru_cache(maxsize=1)
def _library_folders() -> tuple[Path, ...]:
    """Where the standard library and installed distributions live (this environment's and the interpreter's)."""
    paths = sysconfig.get_paths()
    folders = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    folders.update(site.getsitepackages())
    folders.add(site.getusersitepackages())
    return tuple(Path(folder).resolve() for folder in folders)


@lru_cache(maxsize=None)
def _versioned_elsewhere(top: str) -> bool:
    """Whether the top-level module ``top`` is the harness (its spine), the standard library or an installed
    distribution, found without importing it; a module that cannot be found counts as one (nothing to hash)."""
    if top == "harness" or top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return True
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return True
    if spec is None:
        return True
    places = [spec.origin] if spec.origin and spec.has_location else list(spec.submodule_search_locations or [])
    if not places:
        return True  # built-in or frozen
    return all(any(Path(place).resolve().is_relative_to(folder) for folder in _library_folders()) for place in places)


def _followed(module: str, package: str) -> bool:
    """The task's own package, and every module not versioned elsewhere."""
    return _is_owned(module, package) or not _versioned_elsewhere(module.partition(".")[0])


def _source_file(module: str) -> Path | None:
    """The .py file of a module; None for what is not a module here (a class named in ``from x import C``)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError, AttributeError):
        return None
    origin = getattr(spec, "origin", None) if spec else None
    return Path(origin) if origin and origin.endswith(".py") else None


def _imports(module: str, path: Path) -> list[str]:
    """Modules named by the file's import statements (``from a import b`` names ``a`` and ``a.b``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    named: list[str] = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            named.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            try:
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
                    else node.module or ""
            except ImportError:
                continue
            named.append(base)
            named.extend(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return named


@lru_cache(maxsize=None)
def task_code(module: str) -> TaskCode:
    """The source files of the task defined in ``module`` (see the module docstring) and their hash."""
    package = _owned_package(module)
    files: dict[str, Path] = {}
    pending = [module]
    while pending:
        name = pending.pop()
        if name in files or not name or not _followed(name, package):
            continue
        path = _source_file(name)
        if path is None:
            continue
        files[name] = path
        parents = name.split(".")[:-1]
        pending.extend(".".join(parents[:i]) for i in range(1, len(parents) + 1))  # their __init__ runs first
        pending.extend(_imports(name, path))
    seen: set[Path] = set()
    for name, path in sorted(files.items(), key=lambda item: -len(item[0])):  # each native file under its nearest package
        if path.name == "__init__.py":
            for native in sorted(path.parent.rglob("*")):
                if native.suffix in NATIVE_SUFFIXES and native not in seen:
                    seen.add(native)
                    files[f"{name}/{native.relative_to(path.parent).as_posix()}"] = native
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{hashlib.sha256(files[name].read_bytes()).hexdigest()}\n".encode())
    return TaskCode(files=dict(sorted(files.items())), sha256=digest.hexdigest())
