"""The GPU clock log (tools/gpu_clock_log.py) on the CPU: how it reads nvidia-smi's CSV and sums it up by
phase, and that a machine without nvidia-smi gets no logger; the logging itself needs a GPU machine."""

from datetime import datetime

from tools import gpu_clock_log

HEADER = ("timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], temperature.gpu, power.draw [W], "
          "clocks_event_reasons.active\n")


def line(when: float, sm: int, reasons: int, temp: int = 40, power: float = 150.0) -> str:
    stamp = datetime.fromtimestamp(when).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    return f"{stamp}, {sm}, 3201, {temp}, {power:.2f}, 0x{reasons:016x}\n"


def test_it_reads_the_samples_and_leaves_out_what_is_not_one(tmp_path):
    log = tmp_path / "gpu_clocks.csv"
    log.write_text(HEADER + line(1000.0, 1980, 0) + "Unable to determine the device handle\n" + line(1001.0, 345, 1))
    samples = gpu_clock_log.read(log)
    assert [(s["sm_mhz"], s["reasons"], s["mem_mhz"]) for s in samples] == [(1980, 0, 3201), (345, 1, 3201)]
    assert abs(samples[0]["time"] - 1000.0) < 0.01 and samples[1]["power_w"] == 150.0


def test_each_phase_reads_its_busy_sm_clock_and_a_phase_without_samples_says_so():
    samples = [{"time": t, "sm_mhz": sm, "mem_mhz": 3201, "temp_c": temp, "power_w": w, "reasons": r}
               for t, sm, temp, w, r in [(1, 345, 38, 78, 1), (2, 1980, 40, 150, 0), (3, 1950, 44, 160, 0),
                                         (11, 1980, 36, 120, 0), (12, 345, 35, 80, 1)]]
    phases = [{"side": "harness", "start": 0, "end": 5}, {"side": "plain", "start": 10, "end": 13},
              {"side": "plain", "start": 20, "end": 30}]
    harness, plain, empty = gpu_clock_log.by_phase(samples, phases)
    assert harness["sm_mhz_busy_median"] == 1965 and (harness["sm_mhz_min"], harness["sm_mhz_max"]) == (345, 1980)
    assert harness["busy"] == 2 and harness["reasons"] == {"0x0": 2, "0x1": 1} and harness["temp_c"] == [38, 44]
    assert plain["sm_mhz_busy_median"] == 1980 and plain["power_w_median"] == 100
    assert empty == {"side": "plain", "samples": 0}


def test_without_nvidia_smi_there_is_no_logger(monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_clock_log.shutil, "which", lambda name: None)
    assert gpu_clock_log.start(tmp_path / "gpu_clocks.csv") is None
    gpu_clock_log.stop(None)
