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
"""The patch series and the patched TVM wheel (ci/patch_series.py).

The committed ``patches/<modern tag>`` series is checked against the pristine
``tvm/`` package of the pinned official wheel (downloaded once with pip into
``build/patch-series/wheels``); the patched wheel built from that wheel is the
one ci/tvm_env.py installed into the modern line's environment, which runs these
tests.  The tool's refusals are checked on small synthetic repositories, trees
and wheels.
"""

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "ci"))
import patch_series  # pylint: disable=wrong-import-position
import tvm_overlay  # pylint: disable=wrong-import-position
import tvm_wheel  # pylint: disable=wrong-import-position

MODERN = patch_series.series_version(tvm_overlay.load_lines()["modern"]["upstream_tag"])
COMMITTED = REPO / "patches" / MODERN.tag


@pytest.fixture(name="pinned_wheel", scope="session")
def pinned_wheel_fixture():
    return patch_series.pinned_wheel(MODERN)


@pytest.fixture(name="patched_wheel", scope="session")
def patched_wheel_fixture(pinned_wheel, tmp_path_factory):
    return patch_series.build_wheel(pinned_wheel, tmp_path_factory.mktemp("dist"))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def synthetic_repo(root: Path, series: dict, files: dict) -> Path:
    """A repository with the real ci/lines.toml, the given series tomls and files."""
    write(root / "ci" / "lines.toml", (REPO / "ci" / "lines.toml").read_text())
    (root / "ci" / "series").mkdir(parents=True)
    for name, text in series.items():
        write(root / "ci" / "series" / name, text)
    for name, text in files.items():
        write(root / name, text)
    return root


def small_wheel(path: Path, version: str, members: dict) -> Path:
    """A minimal wheel of apache-tvm ``version`` holding ``members``."""
    dist_info = f"apache_tvm-{version}.dist-info"
    members = dict(members)
    members[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: apache-tvm\nVersion: {version}\n\n"
    )
    members[f"{dist_info}/WHEEL"] = "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    rows = [
        f"{name},{tvm_wheel.record_digest(text.encode())},{len(text.encode())}"
        for name, text in members.items()
    ]
    members[f"{dist_info}/RECORD"] = "\n".join(rows + [f"{dist_info}/RECORD,,"]) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return path


def series_modules() -> set:
    """The tvm modules the modern series adds or changes."""
    flavor = tvm_overlay.Flavor(MODERN.flavor)
    modules = set()
    for patch in tvm_overlay.load_series(REPO, MODERN.flavor):
        paths = [flavor.map_path(name) for name in patch.files_for(MODERN.flavor)]
        paths += [
            flavor.map_path(edit.file)
            for edit in patch.edits
            if edit.flavors is None or MODERN.flavor in edit.flavors
        ]
        for path in paths:
            if path.startswith("python/tvm/") and path.endswith(".py"):
                module = path[len("python/") : -len(".py")].replace("/", ".")
                modules.add(module[: -len(".__init__")] if module.endswith(".__init__") else module)
    return modules


def files_under(root: Path) -> set:
    return {
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() or path.is_symlink()
    }


# ----------------------------------------------------------------------------
# The committed series against the pristine tree of the pinned wheel
# ----------------------------------------------------------------------------
def test_committed_series_is_current_and_applies_to_the_pinned_wheel(pinned_wheel):
    result = patch_series.check(MODERN, patch_series.PristineTree(pinned_wheel), COMMITTED)
    assert result.ok, "\n".join(result.stale + result.apply_errors)
    patches = tvm_overlay.load_series(REPO, MODERN.flavor)
    assert [name for name, _ in result.applied] == sorted(
        path.name for path in COMMITTED.glob("*.patch")
    )
    # git am --keep-non-patch records the TVM-style subjects of the series.
    assert [subject for _, subject in result.applied] == [patch.subject for patch in patches]


def test_regenerating_from_an_unpacked_package_is_byte_identical(pinned_wheel, tmp_path):
    # The same pristine files, as an installed package (site-packages/tvm).
    with tvm_wheel.WheelReader(pinned_wheel) as reader:
        reader.extract_text("tvm/", tmp_path / "site-packages")
    out = tmp_path / "patches"
    tree = patch_series.PristineTree(tmp_path / "site-packages")
    assert tree.kind == "package"
    written = patch_series.generate(MODERN, tree, out)
    committed = {path.name: path.read_bytes() for path in COMMITTED.glob("*.patch")}
    assert committed, f"{COMMITTED} holds no patch"
    assert {path.name: path.read_bytes() for path in written} == committed
    for text in committed.values():
        assert text.startswith(b"From 0000000000000000000000000000000000000000 ")
        assert f"From: {patch_series.AUTHOR_NAME} <{patch_series.AUTHOR_EMAIL}>".encode() in text


# ----------------------------------------------------------------------------
# The patched wheel
# ----------------------------------------------------------------------------
def test_patched_wheel_has_local_version_right_record_and_series_files(
    pinned_wheel, patched_wheel, tmp_path
):
    original = zipfile.ZipFile(pinned_wheel)
    patched = zipfile.ZipFile(patched_wheel)
    with tvm_wheel.WheelReader(pinned_wheel) as reader:
        base_version, tags = reader.version, reader.file_tags()
    with tvm_wheel.WheelReader(patched_wheel) as reader:
        version = reader.version
        assert reader.dist_info == f"apache_tvm-{version}.dist-info"
    assert version.startswith(base_version + "+" + patch_series.LOCAL_LABEL_PREFIX)
    assert tvm_wheel.parse_version(version)["local"]
    assert patched_wheel.name == f"apache_tvm-{version}-{tags}.whl"

    # RECORD lists every file once, with its right digest and size.
    record_name = f"apache_tvm-{version}.dist-info/RECORD"
    rows = list(csv.reader(io.StringIO(patched.read(record_name).decode())))
    listed = [row[0] for row in rows]
    assert sorted(listed) == sorted(
        info.filename for info in patched.infolist() if not info.is_dir()
    )
    for name, digest, size in rows:
        if name == record_name:
            assert digest == size == ""
            continue
        data = patched.read(name)
        assert digest == tvm_wheel.record_digest(data), name
        assert int(size) == len(data), name
    assert not [name for name in original.namelist() if name.startswith(f"apache_tvm-{version}.")]

    # Files of the series are in the wheel as the flavor renders them; members
    # the series neither writes nor edits are unchanged.
    flavor = tvm_overlay.Flavor(MODERN.flavor)
    patches = tvm_overlay.load_series(REPO, MODERN.flavor)
    in_package = lambda path: path[len("python/") :] if path.startswith("python/tvm/") else None
    series_files = {
        in_package(flavor.map_path(name)): flavor.render(name)
        for patch in patches
        for name in patch.files_for(MODERN.flavor)
        if in_package(flavor.map_path(name))
    }
    edited = {
        in_package(flavor.map_path(edit.file)) for patch in patches for edit in patch.edits
    } - {None}
    removed = {in_package(name) for patch in patches for name in patch.remove} - {None}
    assert series_files, "the modern series adds no file to the tvm package"
    for name, data in series_files.items():
        if name not in edited:  # a file edited after it is laid (flavor-specific lines)
            assert patched.read(name) == data, name
    old_dist_info = f"apache_tvm-{base_version}.dist-info/"
    new_dist_info = f"apache_tvm-{version}.dist-info/"
    before = {info.filename: (info.CRC, info.file_size) for info in original.infolist()}
    after = {info.filename: (info.CRC, info.file_size) for info in patched.infolist()}
    assert not [name for name in after if name.startswith(old_dist_info)]
    changed = {
        name for name in after if name.startswith("tvm/") and before.get(name) != after[name]
    }
    assert changed <= set(series_files) | edited
    assert {name for name in before if name.startswith("tvm/") and name not in after} <= removed
    for name in before:
        if name.startswith(old_dist_info) and not name.endswith(("/METADATA", "/RECORD")):
            assert after[new_dist_info + name[len(old_dist_info) :]] == before[name]

    # Building again gives the same bytes.
    again = patch_series.build_wheel(pinned_wheel, tmp_path / "again")
    assert again.name == patched_wheel.name
    assert again.read_bytes() == patched_wheel.read_bytes()


def test_modern_environment_runs_the_patched_wheel(pinned_wheel, patched_wheel, tmp_path):
    """The modern line's tests run against the patched wheel, installed by pip.

    ci/tvm_env.py installs the patched copy of the pinned wheel into the modern
    line's virtual environment, the one running this test: pip reports its
    version, the modules the series adds or changes import from it, and they
    are the series' files as the wheel ships them.
    """
    assert os.environ.get("TVM_DROPLET_LINE") == MODERN.line, "run by the modern line's suite"
    with tvm_wheel.WheelReader(patched_wheel) as reader:
        version = reader.version
    assert version == patch_series.patched_wheel_version(pinned_wheel)
    shown = subprocess.run(
        [sys.executable, "-m", "pip", "show", "apache-tvm"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"\nVersion: {version}\n" in shown

    # Import every module the series adds or changes, in a fresh interpreter.
    modules = series_modules()
    assert any(module.startswith("tvm.s_tir.meta_schedule") for module in modules), modules
    script = (
        "import importlib, json, sys\n"
        "print(json.dumps({name: importlib.import_module(name).__file__ for name in sys.argv[1:]}))\n"
    )
    imported = subprocess.run(
        [sys.executable, "-c", script, *sorted(modules)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert imported.returncode == 0, imported.stderr
    site = Path(sysconfig.get_paths()["platlib"]).resolve()
    patched = zipfile.ZipFile(patched_wheel)
    for module, location in json.loads(imported.stdout).items():
        path = Path(location).resolve()
        assert path.is_relative_to(site), (module, location)
        assert path.read_bytes() == patched.read(path.relative_to(site).as_posix()), module


# ----------------------------------------------------------------------------
# Bad input: a clear error and nothing in the output folder
# ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "version, message",
    [
        ("0.18.0", "no patch series for TVM 0.18.0"),
        ("0.27.0rc0", "TVM 0.27.0rc0 is a pre-release"),
        ("0.27.dev0", "is a pre-release"),
    ],
)
def test_wheel_of_a_version_without_series_is_refused(tmp_path, capsys, version, message):
    wheel = small_wheel(
        tmp_path / f"apache_tvm-{version}-py3-none-any.whl", version, {"tvm/__init__.py": ""}
    )
    dist = tmp_path / "dist"
    assert patch_series.main(["wheel", "--wheel", str(wheel), "--out", str(dist)]) == 2
    error = capsys.readouterr().err
    assert message in error
    assert MODERN.tag in error, "the error lists the versions that have a series"
    assert not dist.exists()


def test_wheel_without_tvm_package_is_refused(tmp_path, capsys):
    version = MODERN.tvm_wheel["version"]
    wheel = small_wheel(
        tmp_path / f"apache_tvm-{version}-py3-none-any.whl", version, {"other/__init__.py": ""}
    )
    dist = tmp_path / "dist"
    assert patch_series.main(["wheel", "--wheel", str(wheel), "--out", str(dist)]) == 2
    assert "the wheel has no tvm/ package" in capsys.readouterr().err
    assert not dist.exists()


def test_file_that_is_not_a_wheel_is_refused(tmp_path):
    bogus = write(tmp_path / "apache_tvm-0.27.0-py3-none-any.whl", "not a zip\n")
    with pytest.raises(patch_series.PatchSeriesError, match="not a zip archive"):
        patch_series.build_wheel(bogus, tmp_path / "dist")
    assert not (tmp_path / "dist").exists()


def test_series_that_does_not_apply_writes_nothing(pinned_wheel, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "ci", repo / "ci", ignore=shutil.ignore_patterns("__pycache__"))
    for patch in tvm_overlay.load_series(REPO):
        for name in patch.files:
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / name, repo / name)
    write(
        repo / "ci" / "series" / "99-does-not-fit.toml",
        f"""
        subject = "[Runtime] An edit whose anchor TVM does not have"
        body = "Anchored on a line that is not in tvm/__init__.py."
        flavors = ["{MODERN.flavor}"]

        [[edits]]
        file = "python/tvm/__init__.py"
        after = '^import this_module_does_not_exist\\n'
        text = "pass\\n"
        """,
    )
    dist = tmp_path / "dist"
    write(dist / "earlier.txt", "an earlier file stays\n")
    with pytest.raises(patch_series.PatchSeriesError, match=r"does not apply to .*matches 0 times"):
        patch_series.build_wheel(pinned_wheel, dist, repo=repo)
    assert files_under(dist) == {"earlier.txt"}


# ----------------------------------------------------------------------------
# Generation and checking on small synthetic trees
# ----------------------------------------------------------------------------
ENGINE_SERIES = f'''
subject = "[MetaSchedule] Add a widget"
body = """
Adds a widget, and exports it.
"""
flavors = ["{MODERN.flavor}"]
files = ["python/tvm/meta_schedule/widget.py", "tests/python/meta_schedule/test_widget.py"]

[[edits]]
file = "python/tvm/meta_schedule/__init__.py"
after = '^from \\.tune import tune\\n'
text = "from .widget import Widget\\n"
'''


SMALL_INIT = "import os\nimport sys\n\nfrom .tune import tune\n\nTUNERS = []\nDEFAULT = None\n"


def small_tree(root: Path) -> Path:
    """An installed-package-like pristine tree: root/tvm/..."""
    write(root / "tvm/__init__.py", "")
    write(root / "tvm/s_tir/meta_schedule/__init__.py", SMALL_INIT)
    return root


def test_generate_and_check_on_a_small_tree(tmp_path):
    repo = synthetic_repo(
        tmp_path / "repo",
        {"01-widget.toml": ENGINE_SERIES},
        {
            "python/tvm/meta_schedule/widget.py": "import tvm.meta_schedule\nclass Widget: pass\n",
            "tests/python/meta_schedule/test_widget.py": "def test_widget(): pass\n",
        },
    )
    tree = patch_series.PristineTree(small_tree(tmp_path / "site"))
    out = tmp_path / "patches"
    (written,) = patch_series.generate(MODERN, tree, out, repo=repo)
    assert written.name == "0001-widget.patch"
    text = written.read_text()
    assert (
        "Subject: [PATCH] [MetaSchedule] Add a widget\n\nAdds a widget, and exports it.\n---\n"
        in text
    )
    assert "+++ b/python/tvm/s_tir/meta_schedule/widget.py" in text
    assert "+import tvm.s_tir.meta_schedule" in text
    assert "+++ b/tests/python/s_tir/meta_schedule/test_widget.py" in text
    assert "+from .widget import Widget" in text
    assert not text.rstrip().endswith(".git") and "\n-- \n" not in text, "no git version trailer"
    result = patch_series.check(MODERN, tree, out, repo=repo)
    assert result.ok, result.stale + result.apply_errors
    assert result.applied == [("0001-widget.patch", "[MetaSchedule] Add a widget")]

    # A changed body makes the committed series stale.
    series_file = repo / "ci/series/01-widget.toml"
    series_file.write_text(ENGINE_SERIES.replace("and exports it", "and exports it twice"))
    result = patch_series.check(MODERN, tree, out, repo=repo)
    assert not result.ok and not result.apply_errors
    (stale,) = result.stale
    assert (
        "0001-widget.patch: differs" in stale and "+Adds a widget, and exports it twice." in stale
    )
    series_file.write_text(ENGINE_SERIES)

    # A committed patch the series no longer makes is reported (and cannot be applied twice).
    shutil.copy(written, out / "0002-left-over.patch")
    result = patch_series.check(MODERN, tree, out, repo=repo)
    assert result.stale == [f"{out / '0002-left-over.patch'}: not produced by the series any more"]
    assert (
        len(result.apply_errors) == 1
        and "0002-left-over.patch does not apply" in result.apply_errors[0]
    )
    (out / "0002-left-over.patch").unlink()

    # A tree where the patch fits only at an offset: not an exact fit.
    init = tmp_path / "site/tvm/s_tir/meta_schedule/__init__.py"
    init.write_text("import abc\n" + SMALL_INIT)
    result = patch_series.check(MODERN, tree, out, apply_only=True, repo=repo)
    assert len(result.apply_errors) == 1 and "(offset 1 line)" in result.apply_errors[0]

    # A tree the committed patch does not fit: reported by both modes.
    init.write_text(SMALL_INIT.replace("import tune\n", "import tune as tune\n"))
    result = patch_series.check(MODERN, tree, out, apply_only=True, repo=repo)
    assert not result.stale
    assert len(result.apply_errors) == 1
    assert "0001-widget.patch does not apply" in result.apply_errors[0]
    result = patch_series.check(MODERN, tree, out, repo=repo)
    assert "series does not apply" in result.apply_errors[0]
    assert "0001-widget.patch does not apply" in result.apply_errors[1]


def test_patch_that_changes_nothing_is_an_error(tmp_path):
    repo = synthetic_repo(
        tmp_path / "repo",
        {"01-noop.toml": f"""
            subject = "[Runtime] Copy a file TVM already has"
            body = "Nothing changes."
            flavors = ["{MODERN.flavor}"]
            files = ["python/tvm/__init__.py"]
            """},
        {"python/tvm/__init__.py": ""},
    )
    tree = patch_series.PristineTree(small_tree(tmp_path / "site"))
    with pytest.raises(patch_series.PatchSeriesError, match="01-noop.toml changes nothing"):
        patch_series.generate(MODERN, tree, tmp_path / "patches", repo=repo)
    assert not (tmp_path / "patches").exists()


def test_unknown_version_and_tree_are_refused(tmp_path, capsys):
    assert patch_series.main(["generate", "--version", "v0.18.0", "--tree", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "no patch series for TVM v0.18.0" in error and MODERN.tag in error
    assert patch_series.main(["check", "--version", MODERN.tag, "--tree", str(tmp_path)]) == 2
    assert "not a TVM tree" in capsys.readouterr().err
