"""tools/ncu_driver.py's command line: ``--variant`` names one of cuda-v4's variants, ``--build`` one of the
ablation probe's builds (CPU only)."""

import pytest

from tools import ncu_driver


class FakeAdapter:
    """Stands for tools.tune.cuda_v4.CudaV4: no build, two variant names."""

    def load(self):
        pass

    def configs(self, state_dtype):
        return {"r4/nc": object(), "r16/noalloc/l16/w1/p2s": object()}


def test_variant_is_cuda_v4s_alone(capsys):
    with pytest.raises(SystemExit) as stop:
        ncu_driver.main(["fla-recurrent", "1", "--variant", "r4/nc"])
    assert stop.value.code == 2 and "--variant and --build name a variant or a build of cuda-v4" in capsys.readouterr().err


def test_an_unknown_build_is_a_clear_error_before_anything_is_built(capsys):
    with pytest.raises(SystemExit) as stop:
        ncu_driver.main(["cuda-v4", "128", "--build", "copy-pad"])
    assert stop.value.code == 2 and "--build: no build named 'copy-pad'" in capsys.readouterr().err


def test_unknown_variant_is_a_clear_error_before_any_input_is_made(monkeypatch, capsys):
    import tools.tune.cuda_v4

    monkeypatch.setattr(tools.tune.cuda_v4, "CudaV4", FakeAdapter)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)  # the stand-in adapter asks nothing of a GPU
    with pytest.raises(SystemExit) as stop:
        ncu_driver.main(["cuda-v4", "128", "--state-dtype", "bfloat16", "--variant", "r32/noalloc/w1/p4s"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "cuda-v4 has no variant 'r32/noalloc/w1/p4s' for a bfloat16 state" in err


def test_without_a_gpu_or_with_a_batch_size_the_sweep_lacks_it_says_so(monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(SystemExit) as stop:
        ncu_driver.main(["cuda-v4", "1"])
    assert stop.value.code == 2 and "no CUDA GPU here" in capsys.readouterr().err
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)  # the sweep's workloads are read before the GPU
    with pytest.raises(SystemExit) as stop:
        ncu_driver.main(["stream-copy", "3"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "batch size 3: the sweep set has none (it has 1, 2, 4, 8, 16, 32, 64" in err
