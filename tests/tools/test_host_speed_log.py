"""tools/host_speed_log.py: the pinned stand-in's log and how it is read back."""

from tools.host_speed_log import log, main, read_log


def test_the_log_holds_one_block_a_line_with_its_wall_clock_start(tmp_path):
    path = tmp_path / "speed.txt"
    blocks = log(path, seconds=0.2)
    read = read_log(path)
    assert blocks == len(read) >= 3
    assert all(b[0] < a[0] for b, a in zip(read, read[1:]))  # in time order
    assert all(0 < speed_us < 10_000 for _, speed_us in read)


def test_a_line_cut_short_is_left_out(tmp_path):
    path = tmp_path / "speed.txt"
    path.write_text("100.000 6.50\n100.020 12.90\n100.04")
    assert read_log(path) == [(100.0, 6.5), (100.02, 12.9)]


def test_a_cpu_that_cannot_be_had_is_a_clear_error(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "speed.txt"), "--cpu", "100000", "--seconds", "0.1"]) == 2
    assert "--cpu 100000" in capsys.readouterr().err


def test_an_out_file_with_no_folder_to_go_in_is_a_clear_error(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "no" / "speed.txt"), "--seconds", "0.1"]) == 2
    assert f"no folder {tmp_path / 'no'} to write it in" in capsys.readouterr().err
