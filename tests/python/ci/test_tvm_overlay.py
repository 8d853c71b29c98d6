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
"""The overlay mechanism (ci/tvm_overlay.py) on small synthetic repositories and trees."""
import os
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "ci"))
import tvm_overlay  # pylint: disable=wrong-import-position

LINES = """
[flavors.legacy]
path_map = []
text_map = []

[flavors.modern]
path_map = [["python/tvm/meta_schedule/", "python/tvm/s_tir/meta_schedule/"]]
text_map = [["tvm.meta_schedule", "tvm.s_tir.meta_schedule"]]
"""

SERIES = '''
subject = "[MetaSchedule] Add a thing"
body = """
Adds a thing.
"""
flavors = ["legacy", "modern"]
files = ["python/tvm/meta_schedule/thing.py", "python/tvm/contrib/engine.py", "tests/python/test_thing.py"]
remove = ["python/tvm/old.py"]

[[edits]]
file = "python/tvm/meta_schedule/__init__.py"
after = "^from .tune import tune$"
text = "\\nfrom .thing import Thing"

[[edits]]
file = "python/tvm/meta_schedule/__init__.py"
append = true
text = "already = True\\n"
unless = "^already = True$"
'''


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture(name="project")
def project_fixture(tmp_path):
    repo = tmp_path / "repo"
    write(repo / "ci" / "lines.toml", LINES)
    write(repo / "ci" / "series" / "01-thing.toml", SERIES)
    write(repo / "python/tvm/meta_schedule/thing.py", "import tvm.meta_schedule\nclass Thing: pass\n")
    write(repo / "python/tvm/contrib/engine.py", "ENGINE = 'tvm.meta_schedule stays'\n")
    write(repo / "tests/python/test_thing.py", "def test_thing(): pass\n")
    return repo


def make_tree(root: Path, modern: bool) -> Path:
    package = "python/tvm/s_tir/meta_schedule" if modern else "python/tvm/meta_schedule"
    write(root / package / "__init__.py", "from .tune import tune\n")
    write(root / "python/tvm/old.py", "old = 1\n")
    return root


def test_modern_flavor_maps_paths_and_text(project, tmp_path):
    tree = make_tree(tmp_path / "tvm", modern=True)
    tvm_overlay.apply_series(tree, "modern", "source", repo=project)
    thing = tree / "python/tvm/s_tir/meta_schedule/thing.py"
    assert thing.read_text() == "import tvm.s_tir.meta_schedule\nclass Thing: pass\n"
    # Files outside the mapped prefix are copied verbatim.
    assert "tvm.meta_schedule stays" in (tree / "python/tvm/contrib/engine.py").read_text()
    init = (tree / "python/tvm/s_tir/meta_schedule/__init__.py").read_text()
    assert init == "from .tune import tune\nfrom .thing import Thing\nalready = True\n"
    assert not (tree / "python/tvm/old.py").exists()
    assert (tree / "tests/python/test_thing.py").exists()


def test_package_layout_takes_only_python_files(project, tmp_path):
    tree = tmp_path / "site-packages"
    write(tree / "tvm/meta_schedule/__init__.py", "from .tune import tune\nalready = True\n")
    tvm_overlay.apply_series(tree, "legacy", "package", repo=project)
    assert (tree / "tvm/meta_schedule/thing.py").exists()
    assert not (tree / "tests").exists()
    # `unless` skipped the append: the file already had the line.
    assert (tree / "tvm/meta_schedule/__init__.py").read_text().count("already = True") == 1


def test_anchor_that_does_not_fit_changes_nothing(project, tmp_path):
    tree = make_tree(tmp_path / "tvm", modern=False)
    init = tree / "python/tvm/meta_schedule/__init__.py"
    init.write_text("from .tune import tune\nfrom .tune import tune\n")
    with pytest.raises(tvm_overlay.OverlayError, match="matches 2 times"):
        tvm_overlay.apply_series(tree, "legacy", "source", repo=project)
    assert not (tree / "python/tvm/meta_schedule/thing.py").exists()
    assert (tree / "python/tvm/old.py").exists()


def test_edit_of_missing_file_is_reported(project, tmp_path):
    tree = tmp_path / "tvm"
    write(tree / "python/tvm/old.py", "")
    with pytest.raises(tvm_overlay.OverlayError, match="does not have"):
        tvm_overlay.apply_series(tree, "legacy", "source", repo=project)


def test_series_listing_a_missing_file_is_reported(project):
    (project / "tests/python/test_thing.py").unlink()
    with pytest.raises(tvm_overlay.OverlayError, match="not in the repository"):
        tvm_overlay.load_series(project)


def test_unknown_flavor(project):
    with pytest.raises(tvm_overlay.OverlayError, match="unknown flavor 'ancient'"):
        tvm_overlay.Flavor("ancient", project)


GROWING = r'''
subject = "[Contrib] Engine, first part"
body = "The engine without its later part."
flavors = ["legacy", "modern"]
files = [
    { path = "python/tvm/contrib/engine.py", rewrite = [["^LATER = .*\\n", ""]] },
    { path = "python/tvm/contrib/legacy_only.py", flavors = ["legacy"] },
]

[[edits]]
file = "python/tvm/contrib/engine.py"
flavors = ["modern"]
after = "^ENGINE = .*\\n"
text = "MODERN = True\n"
'''

GROWN = r'''
subject = "[Contrib] Engine, second part"
body = "The engine whole."
flavors = ["legacy", "modern"]
files = ["python/tvm/contrib/engine.py"]
'''


def test_file_grows_over_patches_and_flavors_get_their_own_lines(project, tmp_path):
    """A file listed again by a later patch, a file for one flavor, an edit of a laid file."""
    write(project / "python/tvm/contrib/engine.py", "ENGINE = 1\nLATER = 2\n")
    write(project / "python/tvm/contrib/legacy_only.py", "OLD = 1\n")
    write(project / "ci/series/02-growing.toml", GROWING)
    write(project / "ci/series/03-grown.toml", GROWN)
    patches = tvm_overlay.load_series(project)
    assert patches[1].files_for("modern") == ["python/tvm/contrib/engine.py"]
    for flavor in ("legacy", "modern"):
        tree = make_tree(tmp_path / flavor, modern=flavor == "modern")
        engine = tree / "python/tvm/contrib/engine.py"
        seen = []
        tvm_overlay.apply_series(
            tree,
            flavor,
            "source",
            on_patch=lambda patch, _changed: seen.append(engine.read_text()),
            repo=project,
        )
        first = "ENGINE = 1\nMODERN = True\n" if flavor == "modern" else "ENGINE = 1\n"
        assert seen[1] == first
        assert seen[2] == "ENGINE = 1\nLATER = 2\n"
        assert (tree / "python/tvm/contrib/legacy_only.py").exists() == (flavor == "legacy")


def test_rewrite_that_does_not_match_is_reported(project, tmp_path):
    write(project / "python/tvm/contrib/engine.py", "ENGINE = 1\n")
    write(project / "python/tvm/contrib/legacy_only.py", "OLD = 1\n")
    write(project / "ci/series/02-growing.toml", GROWING)
    tree = make_tree(tmp_path / "tvm", modern=False)
    with pytest.raises(tvm_overlay.OverlayError, match="rewrite .* matches 0 times"):
        tvm_overlay.apply_series(tree, "legacy", "source", repo=project)


def test_installed_overlay_reapplies_and_restores(project, tmp_path):
    site = tmp_path / "site-packages"
    original_init = "from .tune import tune\n"
    write(site / "tvm/meta_schedule/__init__.py", original_init)
    write(site / "tvm/old.py", "old = 1\n")
    overlay = tvm_overlay.InstalledOverlay(site, tmp_path / "state")
    overlay.apply("legacy", repo=project)
    once = {path: path.read_bytes() for path in site.rglob("*.py")}
    overlay.apply("legacy", repo=project)
    twice = {path: path.read_bytes() for path in site.rglob("*.py")}
    assert once == twice, "applying twice must equal applying once"
    overlay.restore()
    assert (site / "tvm/meta_schedule/__init__.py").read_text() == original_init
    assert (site / "tvm/old.py").read_text() == "old = 1\n"
    assert not (site / "tvm/meta_schedule/thing.py").exists()
    assert not (site / "tvm/contrib/engine.py").exists()


def test_installed_overlay_skips_a_series_it_already_has(project, tmp_path):
    site = tmp_path / "site-packages"
    write(site / "tvm/meta_schedule/__init__.py", "from .tune import tune\n")
    write(site / "tvm/old.py", "old = 1\n")
    overlay = tvm_overlay.InstalledOverlay(site, tmp_path / "state")
    overlay.apply("legacy", repo=project)
    added = site / "tvm/meta_schedule/thing.py"
    # A modification time from the past shows whether the next application writes the file.
    os.utime(added, ns=(0, 0))
    overlay.apply("legacy", repo=project)
    assert added.stat().st_mtime_ns == 0
    # A file changed under the overlay (TVM reinstalled, an edit by hand) applies it again.
    added.write_text("class Thing: pass  # touched by hand\n")
    overlay.apply("legacy", repo=project)
    assert added.read_text() == "import tvm.meta_schedule\nclass Thing: pass\n"
    # Any change to a file of the series applies it again.
    write(project / "python/tvm/meta_schedule/thing.py", "class Thing:\n    version = 2\n")
    overlay.apply("legacy", repo=project)
    assert added.read_text() == "class Thing:\n    version = 2\n"
    # So does another prefix of the series, and a restore forgets what was applied.
    overlay.apply("legacy", repo=project, limit=0)
    assert not added.exists()
    overlay.apply("legacy", repo=project)
    overlay.restore()
    overlay.apply("legacy", repo=project)
    assert added.read_text() == "class Thing:\n    version = 2\n"


# Tests of this repository's own tooling and environments, never sent upstream.
PROJECT_ONLY_TESTS = ("tests/python/ci/", "tests/python/environment/")


def test_series_ships_every_tvm_file_of_the_repository():
    """A module or TVM test missing from ci/series would never reach TVM or the patches.

    Test files exist once, written for the legacy flavor: a line whose flavor
    moves them runs them as the flavor renders them (ci/tvm_env.py), as the
    patch series ships them.
    """
    patches = tvm_overlay.load_series(REPO)
    listed = {name for patch in patches for name in patch.files}
    modules = {path.relative_to(REPO).as_posix() for path in (REPO / "python").rglob("*.py")}
    tests = {
        path.relative_to(REPO).as_posix()
        for path in (REPO / "tests" / "python").rglob("*.py")
        if not path.relative_to(REPO).as_posix().startswith(PROJECT_ONLY_TESTS)
    }
    assert sorted((modules | tests) - listed) == []
    # No file of the repository is a flavor's rendering of another.
    for flavor_name in ("legacy", "modern"):
        flavor = tvm_overlay.Flavor(flavor_name, REPO)
        for name in listed:
            moved = flavor.map_path(name)
            assert moved == name or not (REPO / moved).exists(), f"{moved} copies {name}"
