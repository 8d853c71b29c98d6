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
"""Collecting a PopenPoolExecutor must never wait for its threads (it may deadlock)."""
import subprocess
import sys
import textwrap

# The garbage collector may finalize an executor on a thread that holds
# threading's _shutdown_locks_lock (inside Thread.start() of another thread);
# the child process below collects one in exactly that situation.
COLLECT_WHILE_THREADING_IS_LOCKED = textwrap.dedent(
    """
    import gc
    import threading

    try:
        from tvm.support.popen_pool import PopenPoolExecutor
    except ImportError:
        from tvm.contrib.popen_pool import PopenPoolExecutor

    pool = PopenPoolExecutor(max_workers=1, timeout=60)
    assert pool.submit(abs, -3).result() == 3  # starts a worker thread and a worker process
    with threading._shutdown_locks_lock:
        del pool
        gc.collect()
    print("collected")
    """
)


def test_collection_inside_threading_locks():
    """Collecting an executor inside threading bookkeeping returns."""
    child = subprocess.run(
        [sys.executable, "-c", COLLECT_WHILE_THREADING_IS_LOCKED],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip().endswith("collected")
