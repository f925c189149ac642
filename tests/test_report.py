"""harness.records.report: the console table must render any mix of rows."""

import io

import pandas as pd
from rich.console import Console

from harness.records.report import print_table


def test_table_renders_a_skipped_row_beside_timed_ones():
    """A SKIPPED row has no headline tier (NaN in the frame); printing must not fail on it."""
    frame = pd.DataFrame([
        {"solution": "pt-reference", "batch_size": 1, "status": "PASSED", "headline_tier": "wall",
         "latency_us": 150.0, "output_max_abs_err": 0.0, "new_state_max_abs_err": 0.0},
        {"solution": "fla-recurrent", "batch_size": 1, "status": "SKIPPED"},
    ])
    out = io.StringIO()
    print_table(frame, Console(file=out, width=200))
    text = out.getvalue()
    assert "SKIPPED" in text and "150.00" in text
