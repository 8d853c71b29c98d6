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
"""Test MetaSchedule's logging configuration next to handlers of other libraries."""
import logging

import tvm
import tvm.testing
import tvm.meta_schedule as ms


def test_loggers_of_a_work_dir_beside_an_unnamed_handler(tmp_path):
    """An application (or pytest) may attach handlers without a name to tvm.meta_schedule."""
    global_logger = logging.getLogger("tvm.meta_schedule")
    unnamed = logging.StreamHandler()
    assert unnamed.get_name() is None
    global_logger.addHandler(unnamed)
    try:
        (task_logger,) = ms.logging.get_loggers_from_work_dir(str(tmp_path), ["main"])
        task_logger.info("a message")
        assert (tmp_path / "logs").is_dir()
    finally:
        global_logger.removeHandler(unnamed)


if __name__ == "__main__":
    tvm.testing.main()
