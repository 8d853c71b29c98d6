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
"""The environment tool (ci/tvm_env.py): idempotence and bad invocations."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "ci"))
import tvm_env as environments  # pylint: disable=wrong-import-position
import tvm_overlay  # pylint: disable=wrong-import-position

LINE = os.environ.get("TVM_DROPLET_LINE", "modern")


def tvm_env(
    *args: str, repo: Path = REPO, venvs: Path = None, offline: bool = False
) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if offline:
        # pip reads no registry (no network, and no 100 MB wheel fetched before it fails).
        env["PIP_NO_INDEX"] = "1"
    if venvs is not None:
        env["TVM_DROPLET_VENVS"] = str(venvs)
    return subprocess.run(
        [sys.executable, str(repo / "ci" / "tvm_env.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )


def test_second_setup_installs_nothing():
    result = tvm_env("setup", LINE)
    assert result.returncode == 0, result.stderr
    assert "is up to date" in result.stdout
    assert "pip" not in result.stdout


def test_unknown_line_names_the_known_ones():
    result = tvm_env("setup", "ancient")
    assert result.returncode == 2
    assert "unknown line 'ancient'" in result.stderr
    assert "legacy, modern" in result.stderr


def test_missing_venv_says_how_to_create_it(tmp_path):
    result = tvm_env("apply", "legacy", venvs=tmp_path)
    assert result.returncode == 2
    assert "no legacy environment" in result.stderr
    assert "python3 ci/tvm_env.py setup legacy" in result.stderr


def test_pip_failure_points_at_lines_toml(tmp_path):
    """A requirement pip cannot install (here: every one, pip offline, as for a pin the
    registries do not have) stops the setup with a message naming ci/lines.toml."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "ci", repo / "ci", ignore=shutil.ignore_patterns("__pycache__"))
    result = tvm_env("setup", "modern", repo=repo, venvs=tmp_path / "venvs", offline=True)
    assert result.returncode == 2
    assert "pip failed for line 'modern'" in result.stderr
    assert "ci/lines.toml" in result.stderr


def test_run_without_a_command():
    result = tvm_env("run", LINE)
    assert result.returncode == 2
    assert "run needs a command" in result.stderr


def test_command_killed_by_a_signal_is_named():
    """A command that dies by a signal (it prints nothing itself) is reported, with 128 + N."""
    result = tvm_env(
        "run", LINE, "python", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    )
    assert result.returncode == 128 + 9
    assert "was killed by SIGKILL" in result.stderr


def test_tests_a_flavor_moves_run_as_it_renders_them(tmp_path):
    """The MetaSchedule tests exist once; the modern line runs their modern rendering."""
    sources = sorted((REPO / "tests/python/meta_schedule").glob("test_*.py"))
    assert sources
    # The legacy line runs them (those it lists) where they are: its flavor renders nothing.
    legacy = [path for path in environments.pytest_paths("legacy") if "meta_schedule" in path.parts]
    assert legacy and all(path.parent == REPO / "tests/python/meta_schedule" for path in legacy)
    assert all(path.is_file() for path in legacy)

    paths = environments.pytest_paths("modern", rendered=tmp_path / "rendered")
    folder = tmp_path / "rendered/tests/python/s_tir/meta_schedule"
    assert folder in paths and REPO / "tests/python/meta_schedule" not in paths
    assert sorted(path.name for path in folder.iterdir()) == [path.name for path in sources]
    modern = tvm_overlay.Flavor("modern")
    for source in sources:
        rendered = (folder / source.name).read_bytes()
        assert rendered == modern.render(source.relative_to(REPO).as_posix())
        assert b"import tvm.s_tir.meta_schedule as ms" in rendered
        assert b"tvm.meta_schedule" not in rendered.replace(b"tvm.s_tir.meta_schedule", b"")
    # Rendered afresh: a file left from an earlier rendering does not survive.
    (folder / "test_left_over.py").write_text("def test_left_over(): pass\n")
    environments.pytest_paths("modern", rendered=tmp_path / "rendered")
    assert not (folder / "test_left_over.py").exists()
