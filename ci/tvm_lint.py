#!/usr/bin/env python3
# Licensed to the Apache Software Foundation (ASF) under one
# or more contributor license agreements.  See the NOTICE file
# distributed with this work for additional information
# regarding copyright ownership.  The ASF licenses this file
# to you under the Apache License, Version 2.0 (the
# "License"); you may not use this file except in compliance
# with the License.  You may obtain a copy of the License at
#
#   http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing,
# software distributed under the License is distributed on an
# "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
# KIND, either express or implied.  See the License for the
# specific language governing permissions and limitations
# under the License.
"""TVM's own Python lint over every file the patch series add or change.

    python3 ci/tvm_lint.py setup                      create .venv-lint (idempotent)
    python3 ci/tvm_lint.py check [--v0.19.0-tree PATH | --tvm-git GITDIR]
    python3 ci/tvm_lint.py format                     black, in place, on the series' files

``check`` runs the linters TVM's CI pins (``docker/Dockerfile.ci_lint`` of
v0.19.0: black 22.12.0, pylint 2.17.2, flake8 3.9.2; versions in
``ci/lines.toml`` ``[lint]``), installed from the package registries into
``.venv-lint``, with TVM's configurations (``ci/lint/``: copies of v0.19.0's
``pyproject.toml`` black settings and ``tests/lint/pylintrc``) and TVM's flake8
invocation (``tests/lint/flake8.sh``).  Each series is applied to a pristine
tree of its tag in a scratch folder, and the linters run there, so that pylint
sees the TVM package around the files as TVM's CI does:

- v0.27.0 (modern flavor): the pinned official wheel (its Python files equal
  the tag's ``python/tvm``), downloaded once with pip;
- v0.19.0 (legacy flavor): a v0.19.0 checkout (``--v0.19.0-tree``) or git
  repository (``--tvm-git``) when given; otherwise the TVM package installed in
  ``.venv-legacy`` (hhb-tvm, TVM 0.16), created by ``ci/tvm_env.py`` if needed.

black and flake8 check every Python file the series add or change; pylint the
changed files under ``python/`` and the test files the series add (TVM's CI
runs pylint on ``python/tvm`` and on a list of its own test files, which the
series' edits to TVM's tests do not touch).  Files of the modern series equal
to a file already linted in the legacy series are not linted twice.  A package
tree has no ``tests/``: there the series' own test files are laid beside it
and edits to TVM's test files are skipped.

Exit status: 0 no finding, 1 findings, 2 bad input.
"""
import argparse
import difflib
import hashlib
import re
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set

sys.path.insert(0, str(Path(__file__).resolve().parent))
import patch_series  # pylint: disable=wrong-import-position
import tvm_env  # pylint: disable=wrong-import-position
import tvm_overlay  # pylint: disable=wrong-import-position

REPO = tvm_overlay.REPO
CONFIG = REPO / "ci" / "lint"
# tests/lint/flake8.sh of TVM v0.19.0: syntax errors and undefined names only.
FLAKE8_ARGS = ["--count", "--select=E9,F63,F7", "--show-source", "--statistics"]


class LintError(Exception):
    """Bad input or a tool that cannot run, with a message that says which."""


def venv_dir() -> Path:
    """The tool venv (beside the line venvs of ci/tvm_env.py)."""
    return tvm_env.venv_root() / ".venv-lint"


def requirements() -> List[str]:
    """The pinned linters and their dependencies, from ci/lines.toml ``[lint]``."""
    spec = tvm_overlay.load_lines().get("lint", {})
    if not spec.get("requirements"):
        raise LintError("ci/lines.toml has no [lint] requirements")
    return list(spec["requirements"])


def setup() -> Path:
    """Create ``.venv-lint`` with the pinned linters unless it exists; returns its bin folder."""
    wanted = requirements()
    stamp = hashlib.sha256(json.dumps([wanted, sys.version[:4]]).encode()).hexdigest()
    stamp_file = venv_dir() / "tvm-droplet-stamp"
    binary = venv_dir() / "bin"
    if stamp_file.is_file() and stamp_file.read_text() == stamp and (binary / "python").exists():
        return binary
    print(f"[tvm_lint] creating {venv_dir()}", flush=True)
    if venv_dir().exists():
        shutil.rmtree(venv_dir())
    subprocess.run([sys.executable, "-m", "venv", str(venv_dir())], check=True)
    command = [str(binary / "python"), "-m", "pip", "--disable-pip-version-check", "install"]
    if subprocess.run(command + ["--quiet", *wanted], check=False).returncode != 0:
        raise LintError("pip could not install the linters of ci/lines.toml [lint]")
    stamp_file.write_text(stamp)
    return binary


@dataclass
class LintTree:
    """A pristine tree with one flavor's series applied, and the files to lint in it."""

    tag: str
    root: Path
    description: str
    changed: List[str] = field(default_factory=list)
    added_tests: Set[str] = field(default_factory=set)
    # TVM's own files the series edit: their pristine text.
    originals: Dict[str, str] = field(default_factory=dict)

    def edited_lines(self, name: str) -> Optional[Set[int]]:
        """The lines of ``name`` the series wrote; None for a file the series adds."""
        if name not in self.originals:
            return None
        before = self.originals[name].splitlines()
        after = (self.root / name).read_text(encoding="utf-8").splitlines()
        lines: Set[int] = set()
        matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
        for tag, _, _, start, end in matcher.get_opcodes():
            if tag in ("replace", "insert"):
                lines.update(range(start + 1, end + 1))
        return lines

    def pylint_files(self) -> List[str]:
        """The files pylint checks: library files and the series' own tests."""
        return [
            name for name in self.changed if name.startswith("python/") or name in self.added_tests
        ]


def pristine_tree(
    version: patch_series.SeriesVersion,
    tree: Optional[Path],
    git_dir: Optional[Path],
    scratch: Path,
) -> patch_series.PristineTree:
    """The pristine tree of ``version`` (see the module documentation)."""
    if version.pinned_wheel_is_build_of_tag:
        return patch_series.default_tree(version)
    if tree is not None:
        return patch_series.PristineTree(tree)
    if git_dir is not None:
        return patch_series.PristineTree(git_dir=git_dir, ref=f"refs/tags/{version.tag}")
    print(
        f"[tvm_lint] no {version.tag} tree given: linting in the TVM of .venv-{version.line}",
        flush=True,
    )
    tvm_env.setup(version.line, quiet=True)
    return installed_pristine(version.line, scratch / f"installed-{version.line}")


def installed_pristine(line: str, destination: Path) -> patch_series.PristineTree:
    """The TVM package of a line's venv as it was installed, without the series on it.

    ci/tvm_env.py lays the series onto the installed package and keeps the
    originals of the files it changed (ci/tvm_overlay.py): they are put back
    in a copy.
    """
    site = tvm_env.site_packages(line)
    shutil.copytree(site / "tvm", destination / "tvm", ignore=patch_series._ignore_compiled)
    state = tvm_env.overlay_state(line)
    manifest = state / "manifest.json"
    changed = json.loads(manifest.read_text()) if manifest.is_file() else {}
    for relative, existed in changed.items():
        target = destination / relative
        if existed:
            shutil.copy2(state / "pristine" / relative, target)
        elif target.exists():
            target.unlink()
    return patch_series.PristineTree(destination)


def build_tree(
    version: patch_series.SeriesVersion, pristine: patch_series.PristineTree, scratch: Path
) -> LintTree:
    """Lay the series of ``version`` onto ``pristine`` in ``scratch``."""
    flavor = tvm_overlay.Flavor(version.flavor)
    patches = tvm_overlay.load_series(REPO, version.flavor)
    root = scratch / version.tag
    pristine.materialize(root, patch_series.series_tops(patches, flavor))
    source = (root / "tests").is_dir()
    lint = LintTree(version.tag, root, pristine.description)
    changed: Dict[str, None] = {}
    ours = {flavor.map_path(name) for patch in patches for name in patch.files_for(version.flavor)}

    def touch(path: Path) -> None:
        name = path.relative_to(root).as_posix()
        if name not in ours and name not in lint.originals and path.is_file():
            lint.originals[name] = path.read_text(encoding="utf-8")

    for patch in patches:
        if source:
            paths = tvm_overlay.apply_patch(root, patch, flavor, "source", touch)
        else:
            paths = tvm_overlay.apply_patch(root / "python", patch, flavor, "package", touch)
            for name in patch.files_for(version.flavor):
                if name.startswith("tests/"):
                    target = root / flavor.map_path(name)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(flavor.render(name))
                    paths.append(target)
        for path in paths:
            changed[path.relative_to(root).as_posix()] = None
        lint.added_tests.update(
            flavor.map_path(name) for name in patch.files_for(version.flavor) if name.startswith("tests/")
        )
    lint.changed = [name for name in changed if name.endswith(".py") and (root / name).is_file()]
    return lint


def run(binary: Path, tool: str, args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run one linter of the tool venv.

    Its home is the tool venv, so that the linters' caches (black's, pylint's)
    stay there and never land in the tree being linted or formatted.
    """
    return subprocess.run(
        [str(binary / "python"), "-m", tool, *args],
        cwd=cwd,
        check=False,
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "LC_ALL": "C.UTF-8",
            "LANG": "C.UTF-8",
            "HOME": str(binary.parent),
        },
    )


def lint(binary: Path, tree: LintTree, files: List[str]) -> List[str]:
    """The findings of black, flake8 and pylint on ``files`` of ``tree``."""
    findings = []
    if not files:
        return findings
    black = run(
        binary, "black", ["--config", str(CONFIG / "pyproject.toml"), "--check", "--diff", *files],
        tree.root,
    )
    if black.returncode != 0:
        findings.append(f"black would reformat:\n{black.stdout}{black.stderr}")
    flake8 = run(binary, "flake8", [*FLAKE8_ARGS, *files], tree.root)
    if flake8.returncode != 0:
        findings.append(f"flake8:\n{flake8.stdout}{flake8.stderr}")
    pylint_files = [name for name in files if name in tree.pylint_files()]
    if pylint_files:
        # TVM's pylintrc asks for 8 jobs: on a 2-core machine, 2 take 0.6 of the
        # time of 8 (and pylint's own count, --jobs=0, reads the cgroup's CPU shares as 1).
        jobs = min(len(os.sched_getaffinity(0)), 8)
        pylint = run(
            binary,
            "pylint",
            ["--rcfile", str(CONFIG / "pylintrc"), "--score=n", f"--jobs={jobs}", *pylint_files],
            tree.root,
        )
        messages = [line for line in pylint.stdout.splitlines() if ours(tree, line)]
        if messages or pylint.returncode not in (0, *PYLINT_MESSAGE_STATUS):
            findings.append("pylint:\n" + "\n".join(messages) + pylint.stderr)
    return findings


# pylint's exit status is a bit mask of the message categories issued (fatal: 1, usage: 32).
PYLINT_MESSAGE_STATUS = range(2, 32)


def ours(tree: LintTree, message: str) -> bool:
    """Whether a pylint message is about the series' code, not about a TVM file's own lines.

    TVM's files the series edit are linted whole, but only messages on the lines
    the series wrote count (a release may carry findings of its own, e.g.
    v0.27.0, whose CI lints with ruff).
    """
    match = re.match(r"^(\S+?):(\d+): ", message)
    if not match:
        return bool(message.strip()) and not message.startswith("*" * 13)
    lines = tree.edited_lines(match.group(1))
    return lines is None or int(match.group(2)) in lines


def check(tree_v0_19: Optional[Path], git_dir: Optional[Path]) -> int:
    """Lint both series; returns the exit status."""
    binary = setup()
    started = time.monotonic()
    versions = sorted(patch_series.series_versions().values(), key=lambda v: v.release)
    failed = False
    seen: Dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="tvm-lint-") as scratch:
        for version in versions:
            pristine = pristine_tree(version, tree_v0_19, git_dir, Path(scratch))
            tree = build_tree(version, pristine, Path(scratch))
            files = []
            for name in tree.changed:
                data = (tree.root / name).read_bytes()
                if seen.get(name) != data:
                    files.append(name)
                seen[name] = data
            findings = lint(binary, tree, files)
            status = "findings" if findings else "clean"
            print(
                f"[tvm_lint] {version.tag} ({tree.description}): {len(files)} files "
                f"({len([f for f in files if f in tree.pylint_files()])} with pylint): {status}",
                flush=True,
            )
            for finding in findings:
                print(finding, flush=True)
            failed = failed or bool(findings)
    print(f"[tvm_lint] {time.monotonic() - started:.0f} s", flush=True)
    return 1 if failed else 0


def format_files() -> int:
    """Run black in place on the repository's files listed by the series."""
    binary = setup()
    names = sorted(
        {
            name
            for patch in tvm_overlay.load_series(REPO)
            for name in patch.files
            if name.endswith(".py")
        }
    )
    result = run(binary, "black", ["--config", str(CONFIG / "pyproject.toml"), *names], REPO)
    print(result.stdout + result.stderr, end="")
    return result.returncode


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("setup")
    commands.add_parser("format")
    check_parser = commands.add_parser("check")
    check_parser.add_argument("--v0.19.0-tree", dest="tree", help="a pristine v0.19.0 checkout")
    check_parser.add_argument("--tvm-git", help="a TVM git repository holding the v0.19.0 tag")
    args = parser.parse_args(argv)
    try:
        if args.command == "setup":
            print(f"[tvm_lint] {setup().parent} is ready")
            return 0
        if args.command == "format":
            return format_files()
        if args.tree and args.tvm_git:
            raise LintError("give --v0.19.0-tree or --tvm-git, not both")
        return check(
            Path(args.tree) if args.tree else None, Path(args.tvm_git) if args.tvm_git else None
        )
    except (LintError, patch_series.PatchSeriesError, tvm_overlay.OverlayError) as err:
        print(f"[tvm_lint] error: {err}", file=sys.stderr)
        return 2
    except tvm_env.EnvError as err:
        print(f"[tvm_lint] error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
