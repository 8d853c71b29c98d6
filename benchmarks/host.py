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
"""The host CPU as an LLVM ``-mcpu`` name, on both TVM lines.

A target without ``-mcpu`` gets SSE-only code, so benchmarks and demos name
the host CPU.  ``llvm_get_system_cpu()`` names it when TVM's LLVM knows it; an
LLVM older than the CPU (the legacy line's LLVM 17 on a Zen 5 host) answers
``generic``.  Then the CPU chosen is the one this LLVM knows with the most
features, among those whose every feature the host has (``/proc/cpuinfo``).
"""
import functools
import platform
from typing import Optional, Set

import tvm
from tvm.target import codegen

# The instruction-set features that decide code generation, checked against the
# host's /proc/cpuinfo flags; LLVM names them otherwise in a few cases.
_CHECKED_PREFIXES = ("sse", "ssse", "avx", "fma", "f16c", "amx", "bmi", "adx", "gfni", "vaes",
                     "vpclmulqdq", "pclmul", "sha", "popcnt", "lzcnt", "movbe")
_CPUINFO_NAMES = {
    "sse3": "pni", "pclmul": "pclmulqdq", "sha": "sha_ni", "bmi": "bmi1", "lzcnt": "abm",
    "avx512bitalg": "avx512_bitalg", "avx512vbmi2": "avx512_vbmi2", "avx512vnni": "avx512_vnni",
    "avx512vpopcntdq": "avx512_vpopcntdq", "avx512bf16": "avx512_bf16",
    "avx512fp16": "avx512_fp16", "avxvnni": "avx_vnni", "avx512vp2intersect": "avx512_vp2intersect",
}


def _cpuinfo_flags() -> Optional[Set[str]]:
    try:
        with open("/proc/cpuinfo") as stream:
            for line in stream:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def _flag(feature: str) -> str:
    name = feature.replace(".", "_").replace("-", "_")
    return _CPUINFO_NAMES.get(name, name)


@functools.lru_cache(maxsize=None)
def host_cpu(triple: Optional[str] = None) -> str:
    """The ``-mcpu`` name for this machine that this TVM's LLVM accepts.

    Parameters
    ----------
    triple : Optional[str]
        The target triple (the legacy line must name it); the host's by default.

    Returns
    -------
    cpu : str
        ``llvm_get_system_cpu()`` when LLVM knows the host CPU; otherwise the
        richest CPU it knows whose features are all host features; ``generic``
        when nothing fits.
    """
    cpu = codegen.llvm_get_system_cpu()
    flags = _cpuinfo_flags()
    if cpu != "generic" or flags is None:
        return cpu
    triple = triple or f"{platform.machine()}-linux-gnu"
    base = tvm.target.Target(f"llvm -mtriple={triple}")
    best, best_count = cpu, 0
    for name in codegen.llvm_get_cpu_archlist(base):
        candidate = tvm.target.Target(f"llvm -mtriple={triple} -mcpu={name}")
        features = [str(feature) for feature in codegen.llvm_get_cpu_features(candidate)]
        checkable = {_flag(feature) for feature in features if feature.startswith(_CHECKED_PREFIXES)}
        if not checkable <= flags:
            continue
        if len(checkable) > best_count:
            best, best_count = name, len(checkable)
    return best


def host_llvm_target(triple: Optional[str] = None) -> str:
    """``llvm -mtriple=<triple> -mcpu=<host_cpu()>`` for this machine."""
    triple = triple or f"{platform.machine()}-linux-gnu"
    return f"llvm -mtriple={triple} -mcpu={host_cpu(triple)}"
