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
"""Droplet Search: coordinate descent over integer points with statistical acceptance.

The one search engine of the Droplet integrations of AutoTVM
(``tvm.autotvm.tuner.DropletTuner``), the auto-scheduler
(``tvm.auto_scheduler.droplet_exploit``) and MetaSchedule
(``post_optimization``).  It imports nothing from TVM: a *point* is a tuple of
integers, one per dimension, and a scheduler-specific space maps points to
configurations, states or traces.  :class:`DropletSearch` proposes points
(``ask``) and receives their costs (``tell``); :class:`BatchDriver` runs the
measurement loop around a callback that builds, runs, checks and records.
"""
from .driver import BatchDriver
from .neighbourhood import Point
from .report import DropletResult, error_summary
from .search import Costs, DropletSearch
from .statistics import is_faster, mean
