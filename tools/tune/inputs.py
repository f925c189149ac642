"""The tuner's inputs: the harness's own workloads, as the judge builds them.

For each batch size the tuner takes one workload of our generated sets
(:mod:`harness.data.generator`), in the order of :data:`SOURCE_SETS`: the
first one of that batch size with a state built from a real context. So
the state is a bank state (the recurrence run over a log-uniform context of
8 to 4096 tokens, L2-normalized keys), ``A_log`` and ``dt_bias`` those of a
simulated layer, and q, k, v, a, b the flashinfer-bench ``random`` draws
(standard normal, seeded by the workload's uuid and the trial) — the same
tensors the judge times on that workload. A workload whose only state is
the empty-prefix edge case (B = 1, a zero state) is passed over: it is a
correctness case, not a typical one to tune on. A batch
size none of the sets has gets a workload assembled by the same generator
(:func:`extra_recipe`).
"""

from __future__ import annotations

from functools import lru_cache

import torch

from harness.data import generator
from harness.data.dataset import OUR_DEFINITION
from harness.data.definition import TORCH_DTYPES, Definition, load_definition
from harness.data.workloads import build_inputs, parse_workload
from harness.judge.worker import destinations
from harness.paths import cache_dir

#: Sets searched for a workload of the wanted batch size: sweep holds every
#: default tune batch (1, 2, 4, ... 512), contest-v2 adds 48.
SOURCE_SETS = ("sweep", "contest-v2", "contest-v1")
#: What a tuning report says about its inputs.
DESCRIPTION = ("per batch size one workload of the generated sets (first found in " + ", ".join(SOURCE_SETS)
               + ", passing over one whose only state is empty): bank states, the layer's A_log and dt_bias, "
               "flashinfer-bench random q, k, v, a, b of trial 0; see tools/tune/inputs.py")


@lru_cache(maxsize=1)
def definition() -> Definition:
    """Our definition (``workloads/<name>.json``)."""
    return load_definition(OUR_DEFINITION)


def has_context(recipe: generator.WorkloadRecipe) -> bool:
    """Whether some state of the workload was built from a non-empty context."""
    return any(generator.context_length(recipe.layer, seq) > 0 for seq in recipe.bank_sequences)


def extra_recipe(batch: int) -> generator.WorkloadRecipe:
    """A workload of ``batch`` sequences of layer 1 (whose bank has no empty
    context), for a batch size none of :data:`SOURCE_SETS` has."""
    return generator.WorkloadRecipe("tune", batch, batch, layer=1, offset=0, scale=generator.DEFAULT_SCALE)


def recipe_for(batch: int) -> generator.WorkloadRecipe:
    """The workload the tuner uses at ``batch`` (see the module doc)."""
    for set_name in SOURCE_SETS:
        for recipe in generator.set_recipes(set_name):
            if recipe.batch_size == batch and has_context(recipe):
                return recipe
    return extra_recipe(batch)


def tune_inputs(batch: int, state_dtype: str, device) -> tuple[dict, dict]:
    """The contract's inputs for one tuned batch size, on ``device``.

    Args:
        batch: batch size B.
        state_dtype: ``"float32"`` or ``"bfloat16"``: the state and
            ``new_state`` dtype (the state is rounded to it, as the judge's
            worker does for a state-dtype variant).
        device: where the tensors go.

    Returns:
        ``(inputs, workload)``: the definition's inputs (trial 0) plus NaN-filled
        ``output`` and ``new_state``; ``{"set", "index", "uuid"}`` of the workload.
    """
    recipe = recipe_for(batch)
    stored = {name: torch.from_numpy(array)
              for name, array in generator.workload_tensors(recipe, generator.Bank(cache_dir())).items()}
    workload = parse_workload(generator.workload_json(recipe), definition(), f"{recipe.set_name}#{recipe.index}")
    inputs = build_inputs(workload, definition(), stored, device, trial=0)
    inputs["state"] = inputs["state"].to(TORCH_DTYPES[state_dtype])
    inputs.update(destinations(definition(), workload.axes, state_dtype, device))
    return inputs, {"set": recipe.set_name, "index": recipe.index, "uuid": recipe.uuid}
