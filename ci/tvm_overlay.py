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
"""The one mechanism that lays this project's files onto a TVM tree.

The project's changes to TVM are described by the patch series in
``ci/series/*.toml`` (one file per upstream-PR-sized change, applied in name
order).  Each entry names:

- ``subject`` / ``body``: the commit message of the patch;
- ``flavors``: the API flavors it applies to (``legacy``: TVM v0.19.0 and the
  hhb-tvm 0.16 build; ``modern``: TVM v0.27.0 and apache-tvm 0.27);
- ``files``: project files, by their path in this repository, copied into the
  tree (added, or replacing TVM's file of the same path); an entry is a path, or
  a table ``{ path = "...", flavors = [...], rewrite = [[PATTERN, TEXT], ...] }``:
  ``flavors`` for a file only some of the patch's flavors get, ``rewrite`` for a
  file that a later patch of the series lists again whole (each regular
  expression must match exactly once and is replaced by its text: how one
  file grows over several patches);
- ``remove``: TVM files (paths in the target tree) the patch deletes;
- ``[[edits]]``: small anchored insertions into TVM's own files: ``file``,
  one of ``after`` / ``before`` / ``replace`` (a regular expression that must
  match exactly once) or ``append = true``, the ``text`` to insert, optional
  ``unless`` (a regular expression: skip the edit when the file already
  matches it) and optional ``flavors``.  An edit may also change a file the
  same patch adds: it then applies to the file as the flavor renders it (how a
  flavor's own lines get into one of the project's files).

A *flavor* (``ci/lines.toml``, ``[flavors.NAME]``) maps repository paths to
tree paths by prefix, and rewrites the text of the files it moved.

The tree is either a TVM *source* checkout (``python/tvm/...``,
``tests/python/...``) or an installed *package* root (a ``site-packages``
directory or an unpacked wheel holding ``tvm/``), where only ``python/tvm/``
files apply.
"""
import fcntl
import hashlib
import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    raise SystemExit("ci/ needs Python 3.11 or newer (tomllib)")

REPO = Path(__file__).resolve().parent.parent
LAYOUTS = ("source", "package")


class OverlayError(Exception):
    """A series that does not fit the tree it is applied to."""


@dataclass
class Edit:
    """An anchored change to one of TVM's files."""

    file: str
    text: str
    mode: str
    pattern: Optional[str]
    unless: Optional[str]
    flavors: Optional[List[str]]


@dataclass
class Patch:
    """One upstream-PR-sized change of the series."""

    name: str
    subject: str
    body: str
    flavors: List[str]
    files: List[str]
    remove: List[str] = field(default_factory=list)
    edits: List[Edit] = field(default_factory=list)
    # The flavors of the files listed for some flavors only (by default: all of the patch's).
    file_flavors: Dict[str, List[str]] = field(default_factory=dict)
    # How this patch's version of a file differs from the repository's: (pattern, text) pairs.
    file_rewrites: Dict[str, List[Tuple[str, str]]] = field(default_factory=dict)

    def files_for(self, flavor: str) -> List[str]:
        """The files of this patch a tree of ``flavor`` gets."""
        return [name for name in self.files if flavor in self.file_flavors.get(name, [flavor])]


def load_lines(repo: Path = REPO) -> dict:
    """The parsed ``ci/lines.toml``."""
    with open(repo / "ci" / "lines.toml", "rb") as stream:
        return tomllib.load(stream)


def load_series(repo: Path = REPO, flavor: Optional[str] = None) -> List[Patch]:
    """The patches of ``ci/series``, in order, optionally only those of one flavor."""
    patches = []
    for path in sorted((repo / "ci" / "series").glob("*.toml")):
        with open(path, "rb") as stream:
            spec = tomllib.load(stream)
        try:
            edits = []
            for raw in spec.get("edits", []):
                modes = [mode for mode in ("after", "before", "replace") if mode in raw]
                if raw.get("append"):
                    modes.append("append")
                if len(modes) != 1:
                    raise OverlayError(
                        f"{path.name}: edit of {raw.get('file')} needs exactly one of "
                        "after/before/replace/append"
                    )
                mode = modes[0]
                edits.append(
                    Edit(
                        file=raw["file"],
                        text=raw["text"],
                        mode=mode,
                        pattern=None if mode == "append" else raw[mode],
                        unless=raw.get("unless"),
                        flavors=raw.get("flavors"),
                    )
                )
            files, file_flavors, file_rewrites = [], {}, {}
            for entry in spec.get("files", []):
                if isinstance(entry, dict):
                    files.append(entry["path"])
                    if "flavors" in entry:
                        file_flavors[entry["path"]] = list(entry["flavors"])
                    if "rewrite" in entry:
                        file_rewrites[entry["path"]] = [tuple(pair) for pair in entry["rewrite"]]
                else:
                    files.append(entry)
            patch = Patch(
                name=path.stem,
                subject=spec["subject"],
                body=spec["body"].strip() + "\n",
                flavors=list(spec["flavors"]),
                files=files,
                remove=list(spec.get("remove", [])),
                edits=edits,
                file_flavors=file_flavors,
                file_rewrites=file_rewrites,
            )
        except KeyError as err:
            raise OverlayError(f"{path}: missing key {err}") from err
        for name in patch.files:
            if not (repo / name).is_file():
                raise OverlayError(f"{path.name}: lists {name}, which is not in the repository")
        if flavor is None or flavor in patch.flavors:
            patches.append(patch)
    return patches


class Flavor:
    """Path and text mapping of one API flavor."""

    def __init__(self, name: str, repo: Path = REPO):
        flavors = load_lines(repo).get("flavors", {})
        if name not in flavors:
            raise OverlayError(f"unknown flavor {name!r}; known: {', '.join(sorted(flavors))}")
        self.name = name
        self.repo = repo
        self.path_map = [tuple(pair) for pair in flavors[name].get("path_map", [])]
        self.text_map = [tuple(pair) for pair in flavors[name].get("text_map", [])]

    def map_path(self, path: str) -> str:
        """The tree path of a repository path (or of a TVM path written the legacy way)."""
        for old, new in self.path_map:
            if path.startswith(old):
                return new + path[len(old) :]
        return path

    def render(self, path: str) -> bytes:
        """The content the tree gets for repository file ``path``."""
        data = (self.repo / path).read_bytes()
        if self.map_path(path) == path:
            return data
        text = data.decode("utf-8")
        for old, new in self.text_map:
            text = text.replace(old, new)
        return text.encode("utf-8")


def tree_location(root: Path, path: str, layout: str) -> Optional[Path]:
    """Where a source-tree path lives in ``root``; None when the layout has no such file."""
    if layout == "source":
        return root / path
    if layout == "package":
        if path.startswith("python/tvm/"):
            return root / path[len("python/") :]
        return None
    raise OverlayError(f"unknown layout {layout!r}; use one of {LAYOUTS}")


def apply_edit(text: str, edit: Edit, where: str) -> str:
    """``text`` with ``edit`` applied; raises OverlayError when its anchor does not fit."""
    if edit.unless and re.search(edit.unless, text, re.MULTILINE):
        return text
    if edit.mode == "append":
        return text + ("" if text.endswith("\n") else "\n") + edit.text
    matches = list(re.finditer(edit.pattern, text, re.MULTILINE))
    if len(matches) != 1:
        raise OverlayError(
            f"{where}: the anchor {edit.pattern!r} matches {len(matches)} times (needs exactly 1); "
            "the series does not fit this TVM tree"
        )
    match = matches[0]
    if edit.mode == "after":
        return text[: match.end()] + edit.text + text[match.end() :]
    if edit.mode == "before":
        return text[: match.start()] + edit.text + text[match.start() :]
    return text[: match.start()] + edit.text + text[match.end() :]


def rewritten(data: bytes, rewrites: List[Tuple[str, str]], where: str) -> bytes:
    """``data`` with each ``(pattern, text)`` rewrite applied; each pattern must match once."""
    if not rewrites:
        return data
    text = data.decode("utf-8")
    for pattern, replacement in rewrites:
        matches = list(re.finditer(pattern, text, re.MULTILINE))
        if len(matches) != 1:
            raise OverlayError(
                f"{where}: the rewrite {pattern!r} matches {len(matches)} times (needs exactly 1)"
            )
        text = text[: matches[0].start()] + replacement + text[matches[0].end() :]
    return text.encode("utf-8")


def apply_patch(
    root: Path,
    patch: Patch,
    flavor: Flavor,
    layout: str,
    touch: Optional[Callable[[Path], None]] = None,
) -> List[Path]:
    """Apply one patch to the tree at ``root``.

    Parameters
    ----------
    root : Path
        A TVM source checkout or package root.
    patch : Patch
        The patch to apply.
    flavor : Flavor
        The flavor of the tree.
    layout : str
        ``"source"`` or ``"package"``.
    touch : Optional[Callable[[Path], None]]
        Called with each tree file before it is written or removed (used to
        keep pristine copies of installed packages).

    Returns
    -------
    changed : List[Path]
        The files written or removed.
    """
    changed = []
    touch = touch or (lambda path: None)
    planned: Dict[Path, bytes] = {}
    for name in patch.files_for(flavor.name):
        target = tree_location(root, flavor.map_path(name), layout)
        if target is not None:
            planned[target] = rewritten(
                flavor.render(name), patch.file_rewrites.get(name, []), f"{patch.name}: {name}"
            )
    edited: Dict[Path, str] = {}
    for edit in patch.edits:
        if edit.flavors is not None and flavor.name not in edit.flavors:
            continue
        target = tree_location(root, flavor.map_path(edit.file), layout)
        if target is None:
            continue
        if target in planned:
            if target not in edited:
                edited[target] = planned.pop(target).decode("utf-8")
        elif target not in edited:
            if not target.is_file():
                raise OverlayError(
                    f"{patch.name}: edits {edit.file}, which this TVM tree does not have ({target})"
                )
            edited[target] = target.read_text(encoding="utf-8")
        edited[target] = apply_edit(edited[target], edit, f"{patch.name}: {edit.file}")
    removals = []
    for name in patch.remove:
        target = tree_location(root, name, layout)
        if target is not None and target.exists():
            removals.append(target)
    # Everything is computed before anything is written: a series that does not
    # fit raises above and leaves the tree as it was.
    for target, data in planned.items():
        touch(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        changed.append(target)
    for target, text in edited.items():
        touch(target)
        target.write_text(text, encoding="utf-8")
        changed.append(target)
    for target in removals:
        touch(target)
        target.unlink()
        changed.append(target)
    return changed


def apply_series(
    root: Path,
    flavor_name: str,
    layout: str,
    on_patch: Optional[Callable[[Patch, List[Path]], None]] = None,
    touch: Optional[Callable[[Path], None]] = None,
    repo: Path = REPO,
    limit: Optional[int] = None,
) -> List[Patch]:
    """Apply every patch of the flavor's series to ``root``, in order.

    ``limit`` applies only the first ``limit`` patches (a prefix of the series).

    Returns
    -------
    patches : List[Patch]
        The patches applied.
    """
    patches = load_series(repo, flavor_name)[:limit]
    apply_patches(root, Flavor(flavor_name, repo), patches, layout, on_patch, touch)
    return patches


def apply_patches(
    root: Path,
    flavor: Flavor,
    patches: List[Patch],
    layout: str,
    on_patch: Optional[Callable[[Patch, List[Path]], None]] = None,
    touch: Optional[Callable[[Path], None]] = None,
) -> None:
    """Apply ``patches`` (loaded from the series) to ``root``, in order."""
    for patch in patches:
        changed = apply_patch(root, patch, flavor, layout, touch)
        if on_patch is not None:
            on_patch(patch, changed)


def series_fingerprint(flavor_name: str, patches: List[Patch], repo: Path = REPO) -> str:
    """A digest of everything applying ``patches`` of the flavor's series reads: the
    flavors, the series and every project file the patches list."""
    names = ",".join(patch.name for patch in patches)
    digest = hashlib.sha256(f"{flavor_name}\0{names}\0".encode())
    paths = [repo / "ci" / "lines.toml", *sorted((repo / "ci" / "series").glob("*.toml"))]
    for patch in patches:
        paths.extend(repo / name for name in patch.files)
    for path in paths:
        digest.update(path.relative_to(repo).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


class InstalledOverlay:
    """Apply the series onto an installed TVM package, re-applicably.

    The first time a file is touched its original is saved under
    ``state_dir``; every later application first restores all originals, so
    applying twice equals applying once and a file dropped from the series
    goes back to TVM's version.  An application of the series the tree already
    has (the same flavor, prefix, series and files) changes nothing, and
    applications are serialized by a lock: two commands started together
    (``tvm_env.py run`` twice) neither corrupt the saved originals nor change
    files under each other's running Python.
    """

    def __init__(self, package_root: Path, state_dir: Path):
        self.package_root = Path(package_root)
        self.state_dir = Path(state_dir)
        self.manifest_path = self.state_dir / "manifest.json"
        self.applied_path = self.state_dir / "applied"

    def _manifest(self) -> Dict[str, bool]:
        if self.manifest_path.is_file():
            return json.loads(self.manifest_path.read_text())
        return {}

    def restore(self) -> None:
        """Put every touched file back as TVM shipped it."""
        manifest = self._manifest()
        for relative, existed in manifest.items():
            target = self.package_root / relative
            saved = self.state_dir / "pristine" / relative
            if existed:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(saved, target)
            elif target.exists():
                target.unlink()
            cache = target.parent / "__pycache__"
            if cache.is_dir():
                for compiled in cache.glob(target.stem + ".*.pyc"):
                    compiled.unlink()
        self.manifest_path.unlink(missing_ok=True)
        self.applied_path.unlink(missing_ok=True)

    def apply(
        self, flavor_name: str, repo: Path = REPO, limit: Optional[int] = None
    ) -> List[Patch]:
        """Restore, then apply the flavor's series (its first ``limit`` patches); returns them.

        Nothing is restored or written when the tree already has exactly this series:
        the same series as last applied, and every file it touched as it left them.
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / "lock", "w", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            patches = load_series(repo, flavor_name)[:limit]
            fingerprint = series_fingerprint(flavor_name, patches, repo)
            if (
                self.applied_path.is_file()
                and self.applied_path.read_text() == self._applied_record(fingerprint)
            ):
                return patches
            self._apply(Flavor(flavor_name, repo), patches)
            self.applied_path.write_text(self._applied_record(fingerprint))
            return patches

    def _applied_record(self, fingerprint: str) -> str:
        """What ``applied_path`` holds for the series ``fingerprint`` and the tree as it is."""
        return json.dumps([fingerprint, self._tree_digest()])

    def _tree_digest(self) -> str:
        """A digest of the current content of every file the overlay touched."""
        digest = hashlib.sha256()
        for relative in sorted(self._manifest()):
            target = self.package_root / relative
            digest.update(relative.encode() + b"\0")
            digest.update(hashlib.sha256(target.read_bytes()).digest() if target.exists() else b"-")
        return digest.hexdigest()

    def _apply(self, flavor: Flavor, patches: List[Patch]) -> None:
        self.restore()
        manifest: Dict[str, bool] = {}

        def touch(target: Path) -> None:
            relative = target.relative_to(self.package_root).as_posix()
            if relative in manifest:
                return
            manifest[relative] = target.exists()
            if target.exists():
                saved = self.state_dir / "pristine" / relative
                saved.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(target, saved)
            # Written before the file changes: an interrupted apply still restores.
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self.manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))

        apply_patches(self.package_root, flavor, patches, "package", touch=touch)
