"""``python -m harness COMMAND``: the commands beside a benchmark run (run_local.py).

    python -m harness pack NAME --out DIR             # a solution as a contest submission (DIR/NAME.json)
        [--starter-kit KIT]                           # ... and as the starter kit's folder KIT/NAME/
    python -m harness export-dataset SET --out DIR    # a workload set as a flashinfer-bench dataset
    python -m harness score [--set contest-v2]        # the final contest's score, predicted from stored runs
                            [--rule final|reference] [--baseline fi-baseline]

Exit 2, with the file or field at fault, for bad input; no traceback.
"""

import sys

from harness.interop.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
