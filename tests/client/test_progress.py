"""The batch's progress display: a live bar on a terminal, plain lines in a log, nothing when quiet."""

import io

from facecrop_client import batch


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def advance(bar, count: int, failed: int) -> None:
    """`count` images done, the first `failed` of them failed, as run_batch reports them."""
    for index in range(count):
        if index < failed:
            bar.set_postfix(failed=index + 1, refresh=False)
        bar.update()
    bar.close()


def test_a_terminal_gets_a_live_bar():
    stream = Terminal()
    bar = batch.progress_bar(4, stream)
    assert callable(bar.dynamic_ncols)  # it follows the terminal's width as the window is resized
    advance(bar, 4, failed=1)
    assert "\r" in stream.getvalue()
    assert "4/4" in stream.getvalue() and "img/s" in stream.getvalue() and "failed=1" in stream.getvalue()


def test_a_log_or_a_pipe_gets_a_line_every_log_interval():
    bar = batch.progress_bar(4, io.StringIO())
    assert (bar.mininterval, bar.maxinterval) == (batch.LOG_INTERVAL_S, batch.LOG_INTERVAL_S) == (10.0, 10.0)


def test_a_log_or_a_pipe_gets_plain_lines(monkeypatch):
    monkeypatch.setattr(batch, "LOG_INTERVAL_S", 0)  # a line at every update instead of every 10 s
    stream = io.StringIO()
    advance(batch.progress_bar(4, stream), 4, failed=1)
    text = stream.getvalue()
    assert "\r" not in text and text.endswith("\n")
    lines = text.splitlines()
    assert [line.split(" ")[0] for line in lines] == ["0/4", "1/4", "2/4", "3/4", "4/4"]
    assert lines[-1].startswith("4/4 images (100%) in 00:00") and lines[-1].endswith("failed=1")


def test_quiet_shows_nothing(monkeypatch):
    for stream in (Terminal(), io.StringIO()):
        monkeypatch.setattr("sys.stderr", stream)  # the stream a bar goes to when none is named
        advance(batch.progress_bar(4, stream, quiet=True), 4, failed=1)
        advance(batch.progress_bar(4, quiet=True), 4, failed=1)
        assert stream.getvalue() == ""


def test_images_show_no_failure_yet_from_the_start_and_frames_show_none(monkeypatch):
    """Images: `failed=0` from the first line or frame of the bar; a video's frames: no failures shown."""
    monkeypatch.setattr(batch, "LOG_INTERVAL_S", 0)
    for stream in (Terminal(), io.StringIO()):
        advance(batch.progress_bar(2, stream), 2, failed=0)
        first = stream.getvalue().replace("\r", "\n").strip().splitlines()[0]
        assert "0/2" in first and "failed=0" in first, first
        frames = type(stream)()
        advance(batch.progress_bar(2, frames, unit="frame", things="frames"), 2, failed=0)
        assert "2/2" in frames.getvalue() and "failed" not in frames.getvalue()


def test_a_quiet_bar_still_counts_what_there_is_to_do():
    bar = batch.progress_bar(4, Terminal(), quiet=True)
    assert (bar.total, bar.disable) == (4, True)
