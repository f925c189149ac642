"""Write ``fi-baseline-wrapper.json`` from ``src/fi_baseline_wrapper.py`` through flashinfer-bench's
own models (it validates by construction); ``tests/interop/test_baselines.py`` checks the committed
file is what this writes. After editing the source::

    python baselines/write_json.py
"""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
JSON_FILE = FOLDER / "fi-baseline-wrapper.json"
SOURCE = FOLDER / "src" / "fi_baseline_wrapper.py"
DEFINITION = "gdn_decode_qk4_v8_d128_k_last"


def solution():
    """The flashinfer-bench ``Solution`` of the wrapper-form baseline."""
    from flashinfer_bench.data import BuildSpec, Solution, SourceFile

    spec = BuildSpec(language="python", target_hardware=["NVIDIA H100", "NVIDIA H200", "NVIDIA B200"],
                     entry_point="main.py::run", dependencies=["torch", "flashinfer"],
                     destination_passing_style=False)
    return Solution(name="fi-baseline-wrapper", definition=DEFINITION, author="gdn-decode-bench",
                    description="FlashInfer's gated_delta_rule_decode_pretranspose in the form of the contest's "
                                "official baseline (flashinfer_wrapper_9b7f1e): value-returning, state updated "
                                "in place, output allocated by FlashInfer",
                    spec=spec, sources=[SourceFile(path="main.py", content=SOURCE.read_text())])


def json_text() -> str:
    """The JSON file, as committed."""
    return solution().model_dump_json(indent=2) + "\n"


if __name__ == "__main__":
    JSON_FILE.write_text(json_text())
    print(f"wrote {JSON_FILE}")
