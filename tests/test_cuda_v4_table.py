"""cuda-v4's launch table lives twice: main.py (the harness's entry) and
kernel.cu's default_config (the contest entry point). They must agree."""

import importlib.util
import re

from harness.paths import SOLUTIONS_DIR

V4 = SOLUTIONS_DIR / "cuda-v4"


def _main_module():
    spec = importlib.util.spec_from_file_location("cuda_v4_main_for_table_test", V4 / "main.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # no GPU here: importing compiles nothing
    return module


def _kernel_table() -> tuple[list[tuple[int, int, bool]], tuple[int, bool]]:
    """(entries [(max batch, rows, streaming)], fallback (rows, streaming)) parsed from kernel.cu."""
    source = (V4 / "kernel.cu").read_text()
    body = source[source.index("LaunchConfig default_config("):]
    body = body[:body.index("\n}\n")]
    entries = [(int(b), int(r), s == "true") for b, r, s in re.findall(r"\{(\d+), \{(\d+), (true|false)\}\}", body)]
    rows, streaming = re.search(r"return \{(\d+), (true|false)\};", body).groups()
    return entries, (int(rows), streaming == "true")


def test_kernel_default_config_mirrors_main_launch_table():
    main = _main_module()
    entries, fallback = _kernel_table()
    assert entries, "no table entries found in kernel.cu's default_config"
    for batch in range(1, 1025):
        config = main.launch_config(batch)
        expected = next(((r, s) for limit, r, s in entries if batch <= limit), fallback)
        assert (config.rows_per_warp, config.streaming) == expected, f"B={batch}"


def test_every_table_entry_is_a_compiled_shape():
    main = _main_module()
    assert all(cfg.rows_per_warp in main.ROWS_PER_WARP_CHOICES for _, cfg in main.LAUNCH_TABLE)
    assert main.LAUNCH_TABLE[-1][0] is None  # the last entry serves every larger batch
