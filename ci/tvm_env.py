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
"""Real TVM environments for the two release lines, with this project applied.

    python3 ci/tvm_env.py setup LINE          create or refresh .venv-LINE (idempotent)
    python3 ci/tvm_env.py apply LINE          lay the project's series onto its TVM
    python3 ci/tvm_env.py test LINE [ARGS]    setup + apply + pytest of the line's tests
    python3 ci/tvm_env.py run LINE CMD...     setup + apply + run CMD in the venv
    python3 ci/tvm_env.py prefixes LINE [--first N] [--last M] [PYTEST ARGS]
                                              each prefix of the series on its own (see below)
    python3 ci/tvm_env.py path LINE           print the venv's python

LINE is a section of ci/lines.toml (``legacy`` or ``modern``).  Virtual
environments live in ``$TVM_DROPLET_VENVS`` (default: the repository root).
Only the package registries are used; nothing is installed outside the venvs.

How ``apply`` lays the series onto a line's TVM depends on what the line pins:
an official wheel of the series' tag (modern: apache-tvm 0.27.0.post1, a build
of v0.27.0) is replaced by the patched wheel ``ci/patch_series.py wheel`` makes
of it (``dist/``), installed with pip, so the line's tests test what users
install; any other build (legacy: hhb-tvm) gets the series' files laid onto its
installed package by ci/tvm_overlay.py.  Test files the line's flavor moves
(``tests/python/meta_schedule/`` -> ``tests/python/s_tir/meta_schedule/``) are
rendered into the venv (``tvm-droplet-tests/``) and run from there, as the
patch series renders them.

``prefixes`` checks that every prefix of the line's series leaves a working
tree: for each patch N (from ``--first`` to ``--last``, numbered from 1) the
line's TVM gets patches 1..N only (the pristine official wheel reinstalled
first where the line installs a patched one), the tests patch N ships run as
that prefix has them, and every test file the prefix ships is collected
(imported).  Afterwards the whole series is applied again.
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import patch_series  # pylint: disable=wrong-import-position
import tvm_overlay  # pylint: disable=wrong-import-position
import tvm_wheel  # pylint: disable=wrong-import-position

REPO = tvm_overlay.REPO

# Fixes of the legacy build's known defects (ENVIRONMENT.md), applied to the
# installed files right after the wheel is unpacked.  Each is (file, old, new,
# why).  Bump FIXES_VERSION when changing them: the environment is rebuilt.
FIXES_VERSION = 2
LEGACY_FIXES = [
    (
        "tvm/rpc/server.py",
        "    def load_module(file_name):\n",
        "    def load_module(file_name, *_unused):\n",
        "the build's RPC client sends 3 arguments to the server's load_module, which takes 1: "
        "every AutoTVM measurement failed with RPCError after about 60 s",
    ),
    (
        "tvm/__init__.py",
        "import traceback\n",
        "import traceback\n\n# hhb-tvm env fix: xgboost must load its OpenMP runtime before libtvm, or\n"
        "# XGBTuner segfaults inside xgboost.\n"
        "try:\n"
        "    import xgboost as _xgboost  # pylint: disable=unused-import\n"
        "except ImportError:\n"
        "    pass\n",
        "`import xgboost` after `import tvm` makes XGBTuner segfault",
    ),
    (
        "tvm/target/target.py",
        "@tvm._ffi.register_object\nclass TargetKind(Object):\n",
        "def _with_host_triple(target):\n"
        '    """hhb-tvm env fix: this build\'s LLVM defaults to riscv64. An llvm target that\n'
        '    names no triple gets the host\'s, as with an LLVM built for the host."""\n'
        "    import platform  # pylint: disable=import-outside-toplevel\n"
        "\n"
        '    triple = platform.machine() + "-linux-gnu"\n'
        '    if isinstance(target, str) and target.split(maxsplit=1)[:1] == ["llvm"]:\n'
        '        if "-mtriple" not in target:\n'
        '            return target + " -mtriple=" + triple\n'
        '    elif isinstance(target, dict) and target.get("kind") == "llvm":\n'
        '        if "mtriple" not in target:\n'
        '            return {**target, "mtriple": triple}\n'
        "    return target\n"
        "\n"
        "\n"
        "@tvm._ffi.register_object\nclass TargetKind(Object):\n",
        "its LLVM defaults to riscv64: a plain `llvm` target built code that failed at run time "
        'with "architecture mismatch"',
    ),
    (
        "tvm/target/target.py",
        '                "Please use -libs=dnnl instead.",\n            )\n'
        "        if isinstance(target, (dict, str)):\n",
        '                "Please use -libs=dnnl instead.",\n            )\n'
        "        target = _with_host_triple(target)\n"
        "        host = _with_host_triple(host)\n"
        "        if isinstance(target, (dict, str)):\n",
        "(the same fix: applied to every target and host built from a string or dict)",
    ),
]
# One more defect needs no file change: numpy is pinned below 2 in ci/lines.toml
# (the build uses np.float_).  For speed, name the host CPU:
# ``llvm -mcpu=<tvm.target.codegen.llvm_get_system_cpu()>`` (this build rejects
# ``-mcpu=native``).


class EnvError(Exception):
    """A failure with a message that says what to do."""


def venv_root() -> Path:
    return Path(os.environ.get("TVM_DROPLET_VENVS", REPO)).resolve()


def line_spec(line: str) -> dict:
    lines = tvm_overlay.load_lines()
    known = [name for name in lines if name not in ("flavors", "benchmarks", "lint")]
    if line not in known:
        raise EnvError(f"unknown line {line!r}; ci/lines.toml defines: {', '.join(known)}")
    return lines[line]


def venv_dir(line: str) -> Path:
    return venv_root() / f".venv-{line}"


def venv_python(line: str) -> Path:
    return venv_dir(line) / "bin" / "python"


def site_packages(line: str) -> Path:
    out = subprocess.run(
        [str(venv_python(line)), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def stamp_of(line: str, spec: dict) -> str:
    installed = {key: spec[key] for key in ("tvm_wheel", "requirements")}
    payload = json.dumps(
        {"spec": installed, "fixes": FIXES_VERSION if line == "legacy" else 0, "py": sys.version[:4]},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def pip(line: str, *args: str) -> None:
    cmd = [str(venv_python(line)), "-m", "pip", "--disable-pip-version-check", *args]
    print("+", " ".join(cmd), flush=True)
    result = subprocess.run(cmd, check=False)
    if result.returncode != 0:
        raise EnvError(
            f"pip failed for line {line!r} (see its error above). Check the pins of [{line}] in "
            "ci/lines.toml: every version must exist in the package registry for this Python."
        )


def install_unpacked_wheel(line: str, wheel: dict) -> None:
    """Install a TVM wheel built for another Python by unpacking it (legacy line)."""
    with tempfile.TemporaryDirectory(prefix="tvm-wheel-") as download:
        pip(
            line,
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            wheel["python_version"],
            "--platform",
            wheel["platform"],
            f"{wheel['name']}=={wheel['version']}",
            "-d",
            download,
        )
        wheels = list(Path(download).glob("*.whl"))
        if len(wheels) != 1:
            raise EnvError(f"expected one wheel of {wheel['name']} in {download}, got {wheels}")
        with zipfile.ZipFile(wheels[0]) as archive:
            archive.extractall(site_packages(line))


def apply_legacy_fixes(line: str) -> None:
    root = site_packages(line)
    for relative, old, new, why in LEGACY_FIXES:
        path = root / relative
        text = path.read_text()
        if text.count(old) != 1:
            raise EnvError(f"legacy fix for {relative} ({why}) does not fit the installed file")
        path.write_text(text.replace(old, new))


def setup(line: str, quiet: bool = False) -> Path:
    """Create the line's venv unless an identical one exists; returns its python."""
    spec = line_spec(line)
    stamp = stamp_of(line, spec)
    stamp_file = venv_dir(line) / "tvm-droplet-stamp"
    if stamp_file.is_file() and stamp_file.read_text() == stamp and venv_python(line).exists():
        install_benchmark_requirements(line)
        if not quiet:
            print(f"[tvm_env] {line}: {venv_dir(line)} is up to date", flush=True)
        return venv_python(line)
    print(f"[tvm_env] {line}: creating {venv_dir(line)} ({spec['description']})", flush=True)
    if venv_dir(line).exists():
        shutil.rmtree(venv_dir(line))
    subprocess.run([sys.executable, "-m", "venv", str(venv_dir(line))], check=True)
    wheel = spec["tvm_wheel"]
    if "platform" in wheel:
        pip(line, "install", "--quiet", *spec["requirements"])
        install_unpacked_wheel(line, wheel)
    else:
        pip(line, "install", "--quiet", f"{wheel['name']}=={wheel['version']}", *spec["requirements"])
    if line == "legacy":
        apply_legacy_fixes(line)
    check = subprocess.run(
        [str(venv_python(line)), "-c", "import tvm; print(tvm.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    if check.returncode != 0:
        raise EnvError(f"the {line} environment was built but `import tvm` fails:\n{check.stderr}")
    print(f"[tvm_env] {line}: TVM {check.stdout.strip()} ready", flush=True)
    stamp_file.write_text(stamp)
    install_benchmark_requirements(line)
    return venv_python(line)


def install_benchmark_requirements(line: str) -> None:
    """Add the benchmarks' plotting packages (their own stamp: no TVM reinstall)."""
    requirements = tvm_overlay.load_lines().get("benchmarks", {}).get("requirements", [])
    stamp = hashlib.sha256(json.dumps(requirements).encode()).hexdigest()
    stamp_file = venv_dir(line) / "tvm-droplet-benchmarks-stamp"
    if stamp_file.is_file() and stamp_file.read_text() == stamp:
        return
    pip(line, "install", "--quiet", *requirements)
    stamp_file.write_text(stamp)


def require_venv(line: str) -> None:
    line_spec(line)
    if not venv_python(line).exists():
        raise EnvError(
            f"no {line} environment at {venv_dir(line)}; create it with "
            f"`python3 ci/tvm_env.py setup {line}`"
        )


def overlay_state(line: str) -> Path:
    """Where ci/tvm_overlay.py keeps the originals of the files it changed."""
    return venv_dir(line) / "tvm-droplet-overlay"


def apply(line: str) -> None:
    """Lay the series of the line's flavor onto its installed TVM."""
    require_venv(line)
    spec = line_spec(line)
    try:
        version = patch_series.series_version(spec["upstream_tag"])
    except patch_series.PatchSeriesError as err:
        raise EnvError(str(err)) from err
    if version.pinned_wheel_is_build_of_tag:
        install_patched_wheel(line, version)
        return
    overlay = tvm_overlay.InstalledOverlay(site_packages(line), overlay_state(line))
    try:
        patches = overlay.apply(spec["flavor"])
    except tvm_overlay.OverlayError as err:
        raise EnvError(f"cannot apply the series to the {line} TVM: {err}") from err
    names = ", ".join(patch.name for patch in patches) or "none"
    print(f"[tvm_env] {line}: applied series ({names})", flush=True)


def installed_version(line: str, distribution: str) -> str:
    """The version of ``distribution`` installed in the line's venv ("" when none)."""
    out = subprocess.run(
        [
            str(venv_python(line)),
            "-c",
            "import importlib.metadata as m, sys\n"
            "try:\n    print(m.version(sys.argv[1]))\nexcept m.PackageNotFoundError:\n    print()",
            distribution,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def install_patched_wheel(line: str, version: "patch_series.SeriesVersion") -> None:
    """Install the line's pinned official TVM wheel with the series applied.

    The wheel is built into ``dist/`` and installed (without dependencies: the
    line's pinned requirements are there) unless the venv already holds that
    exact build, which its local version label identifies.
    """
    state = overlay_state(line)
    if state.exists():  # a venv the overlay patched before: give TVM its files back
        tvm_overlay.InstalledOverlay(site_packages(line), state).restore()
        shutil.rmtree(state)
    name = version.tvm_wheel["name"]
    try:
        official = patch_series.pinned_wheel(version)
        wanted = patch_series.patched_wheel_version(official)
        if installed_version(line, name) != wanted:
            wheel = patch_series.build_wheel(official, REPO / "dist")
            # Patched builds of earlier series (100 MB each) are of no further use.
            prefix = wheel.name.split("+", 1)[0] + "+" + patch_series.LOCAL_LABEL_PREFIX
            for stale in wheel.parent.glob(prefix + "*.whl"):
                if stale != wheel:
                    stale.unlink()
            print(f"[tvm_env] {line}: installing {wheel.name}", flush=True)
            pip(line, "install", "--quiet", "--no-deps", "--force-reinstall", str(wheel))
    except (patch_series.PatchSeriesError, tvm_wheel.WheelError) as err:
        raise EnvError(f"cannot make the patched {name} wheel of the {line} line: {err}") from err
    if installed_version(line, name) != wanted:
        raise EnvError(
            f"the {line} venv holds {name} {installed_version(line, name)}, not {wanted}"
        )
    print(f"[tvm_env] {line}: {name} {wanted} installed (the {version.tag} series)", flush=True)


def rendered_tests_dir(line: str) -> Path:
    """Where the test files the line's flavor moves are rendered."""
    return venv_dir(line) / "tvm-droplet-tests"


def pytest_paths(line: str, rendered: Optional[Path] = None) -> List[Path]:
    """The line's test folders, as pytest arguments.

    Folders the line's flavor maps elsewhere are rendered, file by file, by the
    flavor (its paths and text), as the patch series renders them for that
    line's TVM tree, into ``rendered`` (default: :func:`rendered_tests_dir`),
    made afresh each time.
    """
    spec = line_spec(line)
    flavor = tvm_overlay.Flavor(spec["flavor"])
    rendered = rendered or rendered_tests_dir(line)
    if rendered.exists():
        shutil.rmtree(rendered)
    paths = []
    for name in spec["tests"]:
        source = REPO / name
        if not source.exists():
            continue
        moved = name + "/" if source.is_dir() else name
        if flavor.map_path(moved) == moved:
            paths.append(source)
            continue
        files = [source] if source.is_file() else sorted(source.rglob("*.py"))
        for path in files:
            relative = path.relative_to(REPO).as_posix()
            target = rendered / flavor.map_path(relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(flavor.render(relative))
        paths.append(rendered / flavor.map_path(moved))
    return paths


def prefix_test_files(
    flavor: "tvm_overlay.Flavor", patches: List["tvm_overlay.Patch"], rendered: Path
) -> List[Path]:
    """Render the test files of ``patches`` (a prefix) as its last patch listing each has them.

    Returns the test files of the prefix's last patch.
    """
    if rendered.exists():
        shutil.rmtree(rendered)
    files = {}
    for patch in patches:
        for name in patch.files_for(flavor.name):
            if name.startswith("tests/"):
                data = tvm_overlay.rewritten(
                    flavor.render(name), patch.file_rewrites.get(name, []), patch.name
                )
                target = rendered / flavor.map_path(name)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                files[name] = target
    last = patches[-1]
    return [files[name] for name in last.files_for(flavor.name) if name.startswith("tests/")]


def prefixes(line: str, first: int, last: Optional[int], pytest_args: list) -> int:
    """Run each prefix of the line's series on the line's TVM; returns the exit status."""
    setup(line)
    spec = line_spec(line)
    flavor = tvm_overlay.Flavor(spec["flavor"])
    series = tvm_overlay.load_series(REPO, spec["flavor"])
    last = len(series) if last is None else last
    version = patch_series.series_version(spec["upstream_tag"])
    if version.pinned_wheel_is_build_of_tag:
        state = overlay_state(line)
        if state.exists():
            tvm_overlay.InstalledOverlay(site_packages(line), state).restore()
            shutil.rmtree(state)
        official = patch_series.pinned_wheel(version)
        pip(line, "install", "--quiet", "--no-deps", "--force-reinstall", str(official))
    overlay = tvm_overlay.InstalledOverlay(site_packages(line), overlay_state(line))
    rendered = venv_dir(line) / "tvm-droplet-prefix-tests"
    failed = []
    try:
        for count in range(first, last + 1):
            patches = overlay.apply(spec["flavor"], limit=count)
            own = prefix_test_files(flavor, patches, rendered)
            every = sorted(rendered.rglob("test_*.py"))
            print(f"[tvm_env] {line}: prefix {count} ({patches[-1].name})", flush=True)
            python = str(venv_python(line))
            code = 0
            if every:
                code = run_in(line, [python, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
                              + ["--collect-only", *map(str, every)])
            if code == 0 and own:
                code = run_in(line, [python, "-m", "pytest", "-p", "no:cacheprovider"]
                              + [*map(str, own), *pytest_args])
            if code not in (0, 5) or (code == 5 and own):
                failed.append(f"{count} ({patches[-1].name}): pytest exit {code}")
    finally:
        overlay.restore()
        apply(line)
    for failure in failed:
        print(f"[tvm_env] {line}: prefix {failure}", flush=True)
    print(f"[tvm_env] {line}: prefixes {first}..{last}: {len(failed)} failed", flush=True)
    return 1 if failed else 0


def _default_sigint() -> None:
    """In a command's process before it starts: SIGINT's default disposition.

    A shell without job control starts background commands with SIGINT ignored,
    and an ignored signal stays ignored across exec; the tests press Ctrl-C in
    scripts they start, which must not inherit that.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_in(line: str, command: list) -> int:
    """Run ``command`` in the line's environment; its exit status (128 + N for signal N)."""
    env = dict(os.environ)
    env["PATH"] = f"{venv_dir(line) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv_dir(line))
    env["TVM_DROPLET_LINE"] = line
    env.pop("PYTHONPATH", None)  # tests run against the installed TVM, never a shadow copy
    code = subprocess.run(
        command, cwd=REPO, env=env, check=False, preexec_fn=_default_sigint
    ).returncode
    if code < 0:
        # A process killed by a signal prints nothing itself (SIGKILL: the OOM killer, a
        # timeout, a stray kill): say so, as a shell would.
        print(
            f"[tvm_env] {line}: {' '.join(map(str, command[:3]))} ... was killed by "
            f"{signal.Signals(-code).name}",
            file=sys.stderr,
            flush=True,
        )
        return 128 - code
    return code


def test(line: str, pytest_args: list) -> int:
    setup(line)
    apply(line)
    spec = line_spec(line)
    paths = pytest_paths(line)
    if not paths:
        raise EnvError(f"none of the test folders of line {line!r} exists: {spec['tests']}")
    code = run_in(
        line,
        [str(venv_python(line)), "-m", "pytest", "-p", "no:cacheprovider", *map(str, paths)]
        + pytest_args,
    )
    if code == 5:
        print(f"[tvm_env] {line}: pytest collected no test: that is a failure", flush=True)
        return 1
    return code


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("setup", "apply", "path"):
        commands.add_parser(name).add_argument("line")
    test_parser = commands.add_parser("test")
    test_parser.add_argument("line")
    test_parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    prefix_parser = commands.add_parser("prefixes")
    prefix_parser.add_argument("line")
    prefix_parser.add_argument("--first", type=int, default=1)
    prefix_parser.add_argument("--last", type=int)
    run_parser = commands.add_parser("run")
    run_parser.add_argument("line")
    run_parser.add_argument("cmd", nargs=argparse.REMAINDER)
    # prefixes passes what it does not know to pytest, so --first and --last may follow the line.
    args, unknown = parser.parse_known_args(argv)
    if args.command == "prefixes":
        args.pytest_args = [arg for arg in unknown if arg != "--"]
    elif unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        if args.command == "setup":
            setup(args.line)
        elif args.command == "apply":
            apply(args.line)
        elif args.command == "path":
            require_venv(args.line)
            print(venv_python(args.line))
        elif args.command == "test":
            return test(args.line, args.pytest_args)
        elif args.command == "prefixes":
            return prefixes(args.line, args.first, args.last, args.pytest_args)
        elif args.command == "run":
            if not args.cmd:
                raise EnvError("run needs a command, e.g. `run legacy python ci/demo.py`")
            setup(args.line, quiet=True)
            apply(args.line)
            return run_in(args.line, args.cmd)
    except EnvError as err:
        print(f"[tvm_env] error: {err}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
