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
"""Post-optimization of tuning records with Droplet Search.

:class:`TraceSpace` is the search space of a tuning record: the decisions of
its trace (tile sizes, categorical choices, code generation annotations) as a
box of integer points.

:func:`post_optimize` exploits the best record of each workload of a database
by Droplet Search over that space, committing every measurement to the
database and resuming from it when run again.  ``tune_tir``, ``tune_tasks``
and ``tune_relax`` take a ``post_optimization`` budget.
"""
from .defaults import (
    DEFAULT_TRIALS,
    PostOptimizationBudget,
    default_builder,
    default_runner,
    post_optimization_trials,
)
from .post_optimizer import PostOptimizationResult, post_optimize
from .trace_space import TraceSpace
