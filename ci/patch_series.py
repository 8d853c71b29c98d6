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
"""Patch series against pinned TVM releases, and patched TVM wheels.

    python3 ci/patch_series.py versions
    python3 ci/patch_series.py generate --version TAG [--tree PATH | --tvm-git GITDIR [--ref REV]]
    python3 ci/patch_series.py check --version TAG [--tree PATH | --tvm-git GITDIR [--ref REV]]
                                     [--apply-only]
    python3 ci/patch_series.py wheel [--wheel WHEEL] [--out DIR]

TAG is an ``upstream_tag`` of ci/lines.toml (``v0.19.0``: the legacy flavor,
``v0.27.0``: the modern flavor).  ``generate`` writes ``patches/TAG/NNNN-*.patch``,
one ``git format-patch`` patch per entry of ``ci/series`` of the tag's flavor:
the pristine tree is committed to a scratch git repository, each series entry
is applied with ci/tvm_overlay.py and committed with its subject and body, and
the commits are exported with a fixed author, date and no version trailer, so
that regenerating gives byte-identical files.  ``check`` regenerates into a
scratch directory, fails when ``patches/TAG`` differs, and applies the committed
patches with ``git apply --check`` and ``git am`` onto the pristine tree, in
order, requiring an exact fit (no offset, no fuzz).

The pristine tree (``--tree``) is a TVM source checkout (``python/tvm``,
``tests/python``), a directory holding an installed or unpacked ``tvm/``
package, or a TVM wheel file; a package is laid out as ``python/tvm`` of a
checkout (the official wheel's Python files equal the tag's ``python/tvm``).
``--tvm-git`` exports ``TAG`` (or ``--ref``) from a TVM git repository instead.  Without
either, the line's pinned wheel is used when it is a build of TAG (downloaded
once with pip into ``build/patch-series/wheels``).

``wheel`` writes ``DIR/<name>-<version>+droplet.g<digest>-<tags>.whl`` (default
DIR: ``dist``): the given TVM wheel (default: the pinned official wheel) with the
series of its version applied to its ``tvm/`` package, a PEP 440 local version
label, the ``.dist-info`` renamed and ``RECORD`` rebuilt.  ``ci/tvm_env.py``
installs the patched copy of the modern line's pinned wheel into that line's
environment, where the line's tests run against it.

Exit status: 0 success, 1 stale or non-applying series / failing tests,
2 bad input.
"""

import argparse
import difflib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tvm_overlay  # pylint: disable=wrong-import-position
import tvm_wheel  # pylint: disable=wrong-import-position

REPO = tvm_overlay.REPO
BUILD_DIR = REPO / "build" / "patch-series"
# Every generated patch carries this author and date: the output must not depend
# on who runs the tool or when.
AUTHOR_NAME = "TVM Droplet Search contributors"
AUTHOR_EMAIL = "droplet@users.noreply.github.com"
AUTHOR_DATE = "2026-01-01T00:00:00+00:00"
# The local version label of patched wheels: +droplet.g<first hex digits of the
# digest of the patched files>.  The "g" keeps the segment alphanumeric (PEP 440
# compares all-digit segments as numbers and drops their leading zeros).
LOCAL_LABEL_PREFIX = "droplet.g"
LOCAL_LABEL_DIGITS = 10


class PatchSeriesError(Exception):
    """Bad input or a series that does not fit, with a message that says which."""


@dataclass
class SeriesVersion:
    """An upstream tag the series targets, and the release line that pins it."""

    tag: str
    line: str
    flavor: str
    release: Tuple[int, int]
    tvm_wheel: dict
    requirements: List[str]
    tests: List[str]

    @property
    def pinned_wheel_is_build_of_tag(self) -> bool:
        """Whether the line's pinned TVM wheel is a build of exactly this tag (a post release
        at most), so that its files can serve as the pristine tree."""
        try:
            parts = tvm_wheel.parse_version(self.tvm_wheel["version"])
        except (tvm_wheel.WheelError, KeyError):
            return False
        release = (tuple(int(part) for part in parts["release"].split(".")) + (0, 0))[:3]
        exact = not (parts["pre"] or parts["dev"] or parts["local"])
        return exact and "v%d.%d.%d" % release == self.tag


def series_versions(repo: Path = REPO) -> Dict[str, SeriesVersion]:
    """The tags of ``ci/lines.toml`` the patch series are made for, by tag."""
    versions = {}
    for line, spec in tvm_overlay.load_lines(repo).items():
        if line == "flavors" or "upstream_tag" not in spec:
            continue
        tag = spec["upstream_tag"]
        match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)", tag)
        if not match:
            raise PatchSeriesError(f"ci/lines.toml [{line}]: upstream_tag {tag!r} is not vX.Y.Z")
        versions[tag] = SeriesVersion(
            tag=tag,
            line=line,
            flavor=spec["flavor"],
            release=(int(match.group(1)), int(match.group(2))),
            tvm_wheel=dict(spec.get("tvm_wheel", {})),
            requirements=list(spec.get("requirements", [])),
            tests=list(spec.get("tests", [])),
        )
    return versions


def series_version(tag: str, repo: Path = REPO) -> SeriesVersion:
    """The SeriesVersion of ``tag``; raises PatchSeriesError for an unknown tag."""
    versions = series_versions(repo)
    if tag not in versions:
        known = ", ".join(sorted(versions)) or "none"
        raise PatchSeriesError(
            f"no patch series for TVM {tag}; ci/lines.toml has series for: {known}"
        )
    return versions[tag]


def series_for_wheel_version(version: str, repo: Path = REPO) -> SeriesVersion:
    """The series for a TVM wheel of ``version`` (0.19.x -> v0.19.0, 0.27.x -> v0.27.0)."""
    parts = tvm_wheel.parse_version(version)
    versions = series_versions(repo)
    known = ", ".join(
        f"{tag} (TVM {v.release[0]}.{v.release[1]}.x wheels)" for tag, v in sorted(versions.items())
    )
    if parts["pre"] or parts["dev"]:
        raise PatchSeriesError(
            f"TVM {version} is a pre-release; the series target releases: {known}"
        )
    release = tuple(int(part) for part in parts["release"].split("."))
    for candidate in versions.values():
        if release[:2] == candidate.release:
            return candidate
    raise PatchSeriesError(f"no patch series for TVM {version}; series exist for: {known}")


def series_tops(patches: Sequence[tvm_overlay.Patch], flavor: tvm_overlay.Flavor) -> Set[str]:
    """The top-level folders of a source tree the patches touch (always ``python``)."""
    tops = {"python"}
    for patch in patches:
        paths = [flavor.map_path(name) for name in patch.files]
        paths += [flavor.map_path(edit.file) for edit in patch.edits]
        paths += list(patch.remove)
        tops.update(path.split("/", 1)[0] for path in paths)
    return tops


# ----------------------------------------------------------------------------
# Pristine trees
# ----------------------------------------------------------------------------
def _ignore_compiled(_directory: str, names: List[str]) -> List[str]:
    return [
        name
        for name in names
        if name in ("__pycache__", ".git") or tvm_wheel.is_binary_member(name)
    ]


class PristineTree:
    """A pristine TVM tree, laid out as a source checkout on request.

    Parameters
    ----------
    path : Optional[Path]
        A source checkout, a directory holding ``tvm/`` (or a ``tvm`` package
        directory itself), or a ``.whl`` file.
    git_dir : Optional[Path]
        A TVM git repository; ``ref`` is exported from it.
    ref : Optional[str]
        The revision to export from ``git_dir``, e.g. ``refs/tags/v0.19.0``.
    """

    def __init__(
        self, path: Optional[Path] = None, git_dir: Optional[Path] = None, ref: Optional[str] = None
    ):
        self.git_dir = git_dir
        self.ref = ref
        self.path = Path(path).resolve() if path is not None else None
        if git_dir is not None:
            self.kind = "git"
            self.description = f"{ref} of {git_dir}"
            result = _run(
                [
                    "git",
                    "--git-dir",
                    str(git_dir),
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    f"{ref}^{{commit}}",
                ]
            )
            if result.returncode != 0:
                raise PatchSeriesError(f"{git_dir}: no commit {ref}")
            return
        if self.path is None:
            raise PatchSeriesError("no pristine tree given")
        if self.path.is_file() and self.path.suffix == ".whl":
            self.kind = "wheel"
        elif (self.path / "python" / "tvm" / "__init__.py").is_file():
            self.kind = "source"
        elif (self.path / "tvm" / "__init__.py").is_file():
            self.kind = "package"
        elif self.path.name == "tvm" and (self.path / "__init__.py").is_file():
            self.kind = "package"
            self.path = self.path.parent
        else:
            raise PatchSeriesError(
                f"{path}: not a TVM tree: expected a source checkout (python/tvm/__init__.py), "
                "a directory holding tvm/__init__.py, or a .whl file"
            )
        self.description = f"{self.kind} tree {self.path}"

    def materialize(self, destination: Path, tops: Set[str]) -> None:
        """Write the tree's files (no compiled files) into ``destination`` as a source checkout."""
        destination.mkdir(parents=True, exist_ok=True)
        if self.kind == "source":
            for top in sorted(tops):
                if (self.path / top).is_dir():
                    shutil.copytree(self.path / top, destination / top, ignore=_ignore_compiled)
        elif self.kind == "package":
            shutil.copytree(
                self.path / "tvm", destination / "python" / "tvm", ignore=_ignore_compiled
            )
        elif self.kind == "wheel":
            with tvm_wheel.WheelReader(self.path) as reader:
                if not reader.has_package("tvm"):
                    raise PatchSeriesError(f"{self.path.name}: the wheel has no tvm/ package")
                with tempfile.TemporaryDirectory(prefix="tvm-wheel-tree-") as scratch:
                    reader.extract_text("tvm/", Path(scratch))
                    shutil.move(str(Path(scratch) / "tvm"), destination / "python" / "tvm")
        else:
            listed = _run(
                ["git", "--git-dir", str(self.git_dir), "ls-tree", "--name-only", self.ref]
            )
            present = [top for top in sorted(tops) if top in listed.stdout.split()]
            archive = subprocess.run(
                [
                    "git",
                    "--git-dir",
                    str(self.git_dir),
                    "archive",
                    "--format=tar",
                    self.ref,
                    "--",
                    *present,
                ],
                check=False,
                capture_output=True,
            )
            if archive.returncode != 0:
                raise PatchSeriesError(
                    f"git archive of {self.description} failed: {archive.stderr.decode()}"
                )
            with tempfile.TemporaryFile() as stream:
                stream.write(archive.stdout)
                stream.seek(0)
                with tarfile.open(fileobj=stream) as tar:
                    tar.extractall(destination, filter="data")
            for compiled in [
                p
                for p in destination.rglob("*")
                if p.is_file() and tvm_wheel.is_binary_member(p.name)
            ]:
                compiled.unlink()


def pinned_wheel(version: SeriesVersion, cache: Path = BUILD_DIR / "wheels") -> Path:
    """The line's pinned official TVM wheel, downloaded with pip once into ``cache``."""
    wheel = version.tvm_wheel
    if not version.pinned_wheel_is_build_of_tag:
        raise PatchSeriesError(
            f"the {version.line} line pins {wheel.get('name')} {wheel.get('version')}, which is not a "
            f"build of {version.tag}: give a pristine {version.tag} tree with --tree or --tvm-git"
        )
    stem = f"{re.sub(r'[-_.]+', '_', wheel['name']).lower()}-{wheel['version']}-"
    found = sorted(cache.glob(stem + "*.whl"))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="download-", dir=cache) as scratch:
        command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "download"]
        command += ["--quiet", "--no-deps", "--only-binary=:all:", "--dest", scratch]
        if "platform" in wheel:  # a wheel for another Python (ci/lines.toml says which)
            command += ["--platform", wheel["platform"]]
            command += ["--python-version", wheel["python_version"]]
        command.append(f"{wheel['name']}=={wheel['version']}")
        result = subprocess.run(command, check=False, capture_output=True, text=True)
        if result.returncode != 0:
            raise PatchSeriesError(
                f"pip could not download {wheel['name']}=={wheel['version']}:\n{result.stderr.strip()}"
            )
        downloaded = sorted(Path(scratch).glob("*.whl"))
        if len(downloaded) != 1:
            raise PatchSeriesError(f"pip download gave {downloaded}, expected one wheel")
        target = cache / downloaded[0].name
        os.replace(downloaded[0], target)
    return target


def official_wheel_version(repo: Path = REPO) -> SeriesVersion:
    """The newest tag whose line pins an official wheel of it (the default wheel to patch)."""
    candidates = [v for v in series_versions(repo).values() if v.pinned_wheel_is_build_of_tag]
    if not candidates:
        raise PatchSeriesError(
            "no line of ci/lines.toml pins an official wheel of its tag; give --wheel"
        )
    return max(candidates, key=lambda v: v.release)


def default_tree(version: SeriesVersion) -> PristineTree:
    """The pristine tree used when none is given: the pinned wheel, if it is a build of the tag."""
    return PristineTree(pinned_wheel(version))


# ----------------------------------------------------------------------------
# Generating and checking the series
# ----------------------------------------------------------------------------
def _run(
    command: Sequence[str],
    cwd: Optional[Path] = None,
    env: Optional[dict] = None,
    stdin: Optional[str] = None,
) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(command), cwd=cwd, env=env, check=False, capture_output=True, text=True, input=stdin
    )


class ScratchGit:
    """A git repository in a scratch directory, isolated from the user's git configuration."""

    def __init__(self, root: Path):
        self.root = root
        home = root.parent / "home"
        home.mkdir(exist_ok=True)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "LC_ALL": "C",
            "TZ": "UTC",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_AUTHOR_NAME": AUTHOR_NAME,
            "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
            "GIT_AUTHOR_DATE": AUTHOR_DATE,
            "GIT_COMMITTER_NAME": AUTHOR_NAME,
            "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
            "GIT_COMMITTER_DATE": AUTHOR_DATE,
        }

    def __call__(
        self, *args: str, stdin: Optional[str] = None, check: bool = True
    ) -> subprocess.CompletedProcess:
        result = _run(["git", *args], cwd=self.root, env=self.env, stdin=stdin)
        if check and result.returncode != 0:
            raise PatchSeriesError(
                f"git {' '.join(args)} failed in {self.root}:\n{result.stderr.strip()}"
            )
        return result

    def init(self) -> None:
        """Create the repository."""
        self("init", "--quiet")
        for key, value in (
            ("core.autocrlf", "false"),
            ("core.fileMode", "true"),
            ("commit.gpgSign", "false"),
            ("diff.renames", "false"),
            ("am.keepcr", "false"),
        ):
            self("config", key, value)

    def commit_all(self, message: str) -> bool:
        """Commit every change of the work tree; False when there is none."""
        self("add", "--all", "--force", ".")
        if self("diff", "--cached", "--quiet", check=False).returncode == 0:
            return False
        self("commit", "--quiet", "--no-verify", "--cleanup=whitespace", "--file=-", stdin=message)
        return True


@dataclass
class GeneratedSeries:
    """The outcome of applying the series to a pristine tree in a scratch repository."""

    git: ScratchGit
    pristine: str
    patches: List[tvm_overlay.Patch]
    files: Dict[str, bytes] = field(default_factory=dict)


def patch_file_name(index: int, patch: tvm_overlay.Patch) -> str:
    """``NNNN-<slug>.patch`` for the ``index``-th patch (from 1) of a series."""
    slug = re.sub(r"^\d+-", "", patch.name)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", slug).strip("-").lower()
    return f"{index:04d}-{slug}.patch"


def prepare_pristine(
    version: SeriesVersion, tree: PristineTree, scratch: Path, repo: Path = REPO
) -> GeneratedSeries:
    """Commit the pristine tree to a scratch git repository (no patch applied yet)."""
    flavor = tvm_overlay.Flavor(version.flavor, repo)
    patches = tvm_overlay.load_series(repo, version.flavor)
    if not patches:
        raise PatchSeriesError(
            f"ci/series has no patch for the {version.flavor} flavor ({version.tag})"
        )
    work = scratch / "tvm"
    tree.materialize(work, series_tops(patches, flavor))
    git = ScratchGit(work)
    git.init()
    if not git.commit_all(f"Pristine TVM {version.tag} ({tree.description})"):
        raise PatchSeriesError(f"{tree.description}: the pristine tree is empty")
    return GeneratedSeries(
        git=git, pristine=git("rev-parse", "HEAD").stdout.strip(), patches=patches
    )


def commit_series(
    generated: GeneratedSeries, version: SeriesVersion, tree: PristineTree, repo: Path = REPO
) -> None:
    """Apply and commit each patch onto the pristine commit, then format the patches."""
    git = generated.git
    flavor = tvm_overlay.Flavor(version.flavor, repo)
    for patch in generated.patches:
        try:
            tvm_overlay.apply_patch(git.root, patch, flavor, "source")
        except tvm_overlay.OverlayError as err:
            raise PatchSeriesError(
                f"the {version.tag} series does not apply to {tree.description}: {err}"
            ) from err
        if not git.commit_all(f"{patch.subject}\n\n{patch.body}"):
            raise PatchSeriesError(
                f"ci/series/{patch.name}.toml changes nothing in {tree.description}: a patch must change something"
            )
    out = git.root.parent / "format-patch"
    git(
        "format-patch",
        "--quiet",
        "--zero-commit",
        "--full-index",
        "--no-signature",
        "--no-renames",
        "--binary",
        "--no-cover-letter",
        "--no-thread",
        "--output-directory",
        str(out),
        f"{generated.pristine}..HEAD",
    )
    produced = sorted(out.glob("*.patch"))
    if len(produced) != len(generated.patches):
        raise PatchSeriesError(
            f"git format-patch wrote {len(produced)} patches for {len(generated.patches)} commits"
        )
    for index, (path, patch) in enumerate(zip(produced, generated.patches), start=1):
        generated.files[patch_file_name(index, patch)] = path.read_bytes()


def build_series(
    version: SeriesVersion, tree: PristineTree, scratch: Path, repo: Path = REPO
) -> GeneratedSeries:
    """Apply the flavor's series to ``tree`` in a scratch git repository and format the patches."""
    generated = prepare_pristine(version, tree, scratch, repo)
    commit_series(generated, version, tree, repo)
    return generated


def generate(
    version: SeriesVersion, tree: PristineTree, out_dir: Path, repo: Path = REPO
) -> List[Path]:
    """Regenerate ``out_dir`` (``patches/TAG``): one ``.patch`` per series entry; stale ones go."""
    with tempfile.TemporaryDirectory(prefix="patch-series-") as scratch:
        generated = build_series(version, tree, Path(scratch), repo)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.patch"):
        if stale.name not in generated.files:
            stale.unlink()
    written = []
    for name, data in generated.files.items():
        target = out_dir / name
        if not target.is_file() or target.read_bytes() != data:
            partial = out_dir / f".{name}.partial"
            partial.write_bytes(data)
            os.replace(partial, target)
        written.append(target)
    return written


@dataclass
class CheckResult:
    """What ``check`` found: staleness, application problems, and what applied."""

    stale: List[str] = field(default_factory=list)
    apply_errors: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    applied: List[Tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the committed series is current and applies exactly."""
        return not self.stale and not self.apply_errors


def _stale_report(
    committed: Dict[str, bytes], regenerated: Dict[str, bytes], out_dir: Path
) -> List[str]:
    problems = []
    for name in sorted(set(regenerated) - set(committed)):
        problems.append(f"{out_dir / name}: missing (the series has it)")
    for name in sorted(set(committed) - set(regenerated)):
        problems.append(f"{out_dir / name}: not produced by the series any more")
    for name in sorted(set(committed) & set(regenerated)):
        if committed[name] != regenerated[name]:
            diff = list(
                difflib.unified_diff(
                    committed[name].decode("utf-8", "replace").splitlines(),
                    regenerated[name].decode("utf-8", "replace").splitlines(),
                    f"committed/{name}",
                    f"regenerated/{name}",
                    lineterm="",
                    n=1,
                )
            )
            shown = "\n".join(diff[:40]) + ("\n..." if len(diff) > 40 else "")
            problems.append(f"{out_dir / name}: differs ({len(diff)} diff lines)\n{shown}")
    return problems


def apply_committed(
    git: ScratchGit, pristine: str, files: List[Path], result: CheckResult
) -> Optional[str]:
    """``git apply --check`` then ``git am`` each file onto ``pristine``; returns the final tree id."""
    git("checkout", "--quiet", "--force", "--detach", pristine)
    git("clean", "--quiet", "-fdx")
    for path in files:
        subject = _patch_subject(path.read_text(encoding="utf-8"))
        check = git("apply", "--check", "--verbose", "--whitespace=nowarn", str(path), check=False)
        # git apply never fuzzes; it does apply a hunk at an offset: an exact fit has none.
        inexact = re.findall(r"^Hunk #\d+ succeeded at \d+ \(offset.*$", check.stderr, re.MULTILINE)
        if check.returncode != 0 or inexact:
            result.apply_errors.append(
                f"{path.name} does not apply exactly onto the pristine tree:\n{check.stderr.strip()}"
            )
            return None
        applied = git("am", "--quiet", "--keep-non-patch", str(path), check=False)
        if applied.returncode != 0:
            git("am", "--abort", check=False)
            result.apply_errors.append(f"git am {path.name} failed:\n{applied.stderr.strip()}")
            return None
        for line in applied.stderr.splitlines():
            result.notes.append(f"git am {path.name}: {line}")
        committed_subject = git("log", "-1", "--format=%s").stdout.strip()
        if committed_subject != subject:
            result.apply_errors.append(
                f"{path.name}: git am --keep-non-patch recorded the subject {committed_subject!r}, "
                f"expected {subject!r}"
            )
        result.applied.append((path.name, committed_subject))
    return git("rev-parse", "HEAD^{tree}").stdout.strip()


def _patch_subject(text: str) -> str:
    """The subject of a format-patch file without its ``[PATCH n/m]`` prefix."""
    match = re.search(r"^Subject: (.*(?:\n .*)*)$", text, re.MULTILINE)
    if not match:
        raise PatchSeriesError("a patch file without a Subject header")
    subject = re.sub(r"\n ", " ", match.group(1))
    return re.sub(r"^\[PATCH[^\]]*\]\s*", "", subject)


def check(
    version: SeriesVersion,
    tree: PristineTree,
    patches_dir: Path,
    apply_only: bool = False,
    repo: Path = REPO,
) -> CheckResult:
    """Check that ``patches_dir`` equals a regeneration from ``tree`` and applies onto it exactly.

    Parameters
    ----------
    version : SeriesVersion
        The tag whose series is checked.
    tree : PristineTree
        A pristine tree of that tag.
    patches_dir : Path
        The committed series (``patches/TAG``).
    apply_only : bool
        Only check that the committed patches apply (for a tree that is not
        exactly the tag, e.g. a nearby commit).
    """
    result = CheckResult()
    files = sorted(patches_dir.glob("*.patch")) if patches_dir.is_dir() else []
    committed = {path.name: path.read_bytes() for path in files}
    with tempfile.TemporaryDirectory(prefix="patch-series-check-") as scratch:
        generated = prepare_pristine(version, tree, Path(scratch), repo)
        series_tree = None
        if not apply_only:
            try:
                commit_series(generated, version, tree, repo)
            except PatchSeriesError as err:
                result.apply_errors.append(str(err))
            else:
                series_tree = generated.git("rev-parse", "HEAD^{tree}").stdout.strip()
                if not files:
                    result.stale.append(
                        f"{patches_dir}: no committed patches; run "
                        f"`python3 ci/patch_series.py generate --version {version.tag}`"
                    )
                else:
                    result.stale.extend(_stale_report(committed, generated.files, patches_dir))
        if not files:
            if apply_only:
                result.apply_errors.append(f"{patches_dir}: no committed patches to apply")
            return result
        final_tree = apply_committed(generated.git, generated.pristine, files, result)
        if (
            final_tree is not None
            and series_tree is not None
            and final_tree != series_tree
            and not result.stale
        ):
            result.apply_errors.append(
                "applying the committed patches gives a different tree than applying ci/series"
            )
    return result


# ----------------------------------------------------------------------------
# Patched wheels
# ----------------------------------------------------------------------------
def patched_members(
    reader: tvm_wheel.WheelReader, version: SeriesVersion, repo: Path = REPO
) -> Dict[str, Optional[tvm_wheel.NewMember]]:
    """The wheel members the series of ``version`` changes: name -> new content (None: removed)."""
    patches = tvm_overlay.load_series(repo, version.flavor)
    if not patches:
        raise PatchSeriesError(
            f"ci/series has no patch for {version.tag} ({version.flavor} flavor)"
        )
    with tempfile.TemporaryDirectory(prefix="tvm-wheel-patch-") as scratch:
        root = Path(scratch)
        reader.extract_text("tvm/", root)
        touched: Set[Path] = set()
        try:
            tvm_overlay.apply_series(
                root,
                version.flavor,
                "package",
                on_patch=lambda _patch, changed: touched.update(changed),
                repo=repo,
            )
        except tvm_overlay.OverlayError as err:
            raise PatchSeriesError(
                f"the {version.tag} series does not apply to {reader.path.name}: {err}"
            ) from err
        members: Dict[str, Optional[tvm_wheel.NewMember]] = {}
        for path in sorted(touched):
            name = path.relative_to(root).as_posix()
            if path.is_file():
                data = path.read_bytes()
                if name in reader.names and reader.read(name) == data:
                    continue
                members[name] = tvm_wheel.NewMember(data)
            elif name in reader.names:
                members[name] = None
    if not members:
        raise PatchSeriesError(f"the {version.tag} series changes nothing in {reader.path.name}")
    return members


def local_label(members: Dict[str, Optional[tvm_wheel.NewMember]]) -> str:
    """The local version label identifying the patched content."""
    digest = hashlib.sha256()
    for name in sorted(members):
        member = members[name]
        content = hashlib.sha256(member.data).hexdigest() if member is not None else "removed"
        digest.update(f"{name}\0{content}\n".encode("utf-8"))
    return LOCAL_LABEL_PREFIX + digest.hexdigest()[:LOCAL_LABEL_DIGITS]


def patch_plan(
    reader: tvm_wheel.WheelReader, repo: Path = REPO
) -> Tuple[str, Dict[str, Optional[tvm_wheel.NewMember]]]:
    """The version of the patched copy of ``reader``'s wheel, and its changed members.

    Raises PatchSeriesError for a TVM version without a series, a wheel without
    a ``tvm/`` package or a series that does not apply.
    """
    version = series_for_wheel_version(reader.version, repo)
    if not reader.has_package("tvm"):
        raise PatchSeriesError(
            f"{reader.path.name}: the wheel has no tvm/ package (tvm/__init__.py)"
        )
    members = patched_members(reader, version, repo)
    separator = "." if "+" in reader.version else "+"
    return reader.version + separator + local_label(members), members


def patched_wheel_version(wheel: Path, repo: Path = REPO) -> str:
    """The version ``build_wheel`` gives the patched copy of ``wheel``, without writing it."""
    try:
        with tvm_wheel.WheelReader(wheel) as reader:
            return patch_plan(reader, repo)[0]
    except tvm_wheel.WheelError as err:
        raise PatchSeriesError(str(err)) from err


def build_wheel(wheel: Path, out_dir: Path, repo: Path = REPO) -> Path:
    """Write the patched copy of ``wheel`` into ``out_dir``; returns its path.

    The wheel is checked (a TVM version with a series, a ``tvm/`` package, a
    series that applies) before anything is written; the new wheel is written
    to a hidden temporary file in ``out_dir`` and renamed at the end, so a
    failure leaves nothing behind.
    """
    try:
        with tvm_wheel.WheelReader(wheel) as reader:
            new_version, members = patch_plan(reader, repo)
            final = Path(out_dir) / f"{reader.dist_name}-{new_version}-{reader.file_tags()}.whl"
            final.parent.mkdir(parents=True, exist_ok=True)
            descriptor, partial = tempfile.mkstemp(
                prefix=f".{final.name}.", suffix=".partial", dir=final.parent
            )
            try:
                with os.fdopen(descriptor, "wb") as stream:
                    tvm_wheel.write_wheel(reader, stream, new_version, members)
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(partial, 0o666 & ~umask)  # mkstemp creates 0600
                os.replace(partial, final)
            except BaseException:
                Path(partial).unlink(missing_ok=True)
                raise
    except tvm_wheel.WheelError as err:
        raise PatchSeriesError(str(err)) from err
    return final


# ----------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------
def _tree_from_args(args: argparse.Namespace, version: SeriesVersion) -> PristineTree:
    if args.tree and args.tvm_git:
        raise PatchSeriesError("give --tree or --tvm-git, not both")
    if args.ref and not args.tvm_git:
        raise PatchSeriesError("--ref needs --tvm-git")
    if args.tvm_git:
        return PristineTree(git_dir=Path(args.tvm_git), ref=args.ref or f"refs/tags/{version.tag}")
    if args.tree:
        return PristineTree(Path(args.tree))
    return default_tree(version)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line; returns the exit status."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "versions", help="list the tags with a series, their flavor and pinned wheel"
    )
    for name in ("generate", "check"):
        sub = commands.add_parser(name)
        sub.add_argument("--version", required=True, help="upstream tag, e.g. v0.27.0")
        sub.add_argument(
            "--tree", help="pristine TVM tree: source checkout, package directory or .whl"
        )
        sub.add_argument("--tvm-git", help="TVM git repository to export the tag from")
        sub.add_argument("--ref", help="with --tvm-git: export this revision instead of the tag")
        sub.add_argument(
            "--patches",
            default=str(REPO / "patches"),
            help="folder of the series (default: patches)",
        )
        if name == "check":
            sub.add_argument(
                "--apply-only",
                action="store_true",
                help="only check that the committed patches apply",
            )
    wheel_parser = commands.add_parser("wheel")
    wheel_parser.add_argument(
        "--wheel", help="TVM wheel to patch (default: the pinned official wheel)"
    )
    wheel_parser.add_argument("--out", default=str(REPO / "dist"))
    args = parser.parse_args(argv)
    try:
        if args.command == "versions":
            for tag, version in sorted(series_versions().items()):
                count = len(tvm_overlay.load_series(REPO, version.flavor))
                pinned = f"{version.tvm_wheel.get('name')} {version.tvm_wheel.get('version')}"
                usable = (
                    "usable as pristine tree"
                    if version.pinned_wheel_is_build_of_tag
                    else "not a build of the tag"
                )
                print(
                    f"{tag}: line {version.line}, flavor {version.flavor}, {count} patches; pinned {pinned} ({usable})"
                )
            return 0
        if args.command in ("generate", "check"):
            version = series_version(args.version)
            tree = _tree_from_args(args, version)
            patches_dir = Path(args.patches) / version.tag
            if args.command == "generate":
                for path in generate(version, tree, patches_dir):
                    print(f"[patch_series] wrote {path}")
                return 0
            result = check(version, tree, patches_dir, apply_only=args.apply_only)
            for note in result.notes:
                print(f"[patch_series] note: {note}")
            for name, subject in result.applied:
                print(f"[patch_series] applied {name}: {subject}")
            for problem in result.stale + result.apply_errors:
                print(f"[patch_series] error: {problem}", file=sys.stderr)
            if result.stale:
                print(
                    f"[patch_series] {patches_dir} is stale: run `python3 ci/patch_series.py generate --version {version.tag}` "
                    "with the same tree",
                    file=sys.stderr,
                )
            if result.ok:
                what = "applies" if args.apply_only else "is current and applies"
                print(f"[patch_series] {patches_dir} {what} exactly onto {tree.description}")
            return 0 if result.ok else 1
        wheel = Path(args.wheel) if args.wheel else pinned_wheel(official_wheel_version())
        print(f"[patch_series] wrote {build_wheel(wheel, Path(args.out))}")
        return 0
    except (PatchSeriesError, tvm_overlay.OverlayError, tvm_wheel.WheelError) as err:
        print(f"[patch_series] error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
