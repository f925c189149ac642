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


_CONFIG = r"\{(\d+), (true|false), (true|false)\}"  # {rows, streaming, persistent}


def _config(rows: str, streaming: str, persistent: str) -> tuple[int, bool, bool]:
    return int(rows), streaming == "true", persistent == "true"


def _kernel_table() -> tuple[list[tuple[int, tuple[int, bool, bool]]], tuple[int, bool, bool]]:
    """(entries [(max batch, config)], fallback config) parsed from kernel.cu,
    a config being (rows, streaming, persistent)."""
    source = (V4 / "kernel.cu").read_text()
    body = source[source.index("LaunchConfig default_config("):]
    body = body[:body.index("\n}\n")]
    entries = [(int(limit), _config(*cfg)) for limit, *cfg in re.findall(r"\{(\d+), " + _CONFIG + r"\}", body)]
    fallback = _config(*re.search(r"return " + _CONFIG + ";", body).groups())
    return entries, fallback


def test_kernel_default_config_mirrors_main_launch_table():
    main = _main_module()
    entries, fallback = _kernel_table()
    assert entries, "no table entries found in kernel.cu's default_config"
    for batch in range(1, 1025):
        config = main.launch_config(batch)
        expected = next((cfg for limit, cfg in entries if batch <= limit), fallback)
        assert (config.rows_per_warp, config.streaming, config.persistent) == expected, f"B={batch}"


def test_every_table_entry_is_a_compiled_shape():
    main = _main_module()
    assert all(cfg.rows_per_warp in main.ROWS_PER_WARP_CHOICES for _, cfg in main.LAUNCH_TABLE)
    assert main.LAUNCH_TABLE[-1][0] is None  # the last entry serves every larger batch


def test_tune_names_round_trip_every_variant():
    main = _main_module()
    spec = importlib.util.spec_from_file_location("cuda_v4_tune_for_table_test", V4 / "tune.py")
    tune = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tune)
    names = [name for name in tune.configurations(None, main, inputs={}) if name.startswith("cuda-v4/")]
    assert len(names) == len(main.ROWS_PER_WARP_CHOICES) * 4  # x policy x grid
    for name in names:
        rows, streaming, persistent = tune.parse_config(name)
        assert f"cuda-v4/{tune.config_name(main.LaunchConfig(rows, streaming, persistent))}" == name
