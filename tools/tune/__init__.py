"""The one launch-table tuner: ``python -m tools.tune --algo NAME[,NAME|all]``.

One driver (:mod:`tools.tune.driver`, the command line in :mod:`tools.tune.cli`)
over a small adapter per tunable solution (:mod:`tools.tune.protocol`):
:data:`ADAPTERS`. Nothing here is imported by a solution.
"""

from __future__ import annotations

from tools.tune.cuda_v4 import CudaV4
from tools.tune.cutedsl_bf16 import CuteDslBf16
from tools.tune.fla_recurrent import FlaRecurrent

#: ``--algo`` name -> adapter class, in the order ``--algo all`` tunes them.
ADAPTERS = {adapter.name: adapter for adapter in (FlaRecurrent, CudaV4, CuteDslBf16)}
