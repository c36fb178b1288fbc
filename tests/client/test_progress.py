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
    advance(batch.progress_bar(4, stream), 4, failed=1)
    assert "\r" in stream.getvalue()
    assert "4/4" in stream.getvalue() and "img/s" in stream.getvalue() and "failed=1" in stream.getvalue()


def test_a_log_or_a_pipe_gets_plain_lines(monkeypatch):
    monkeypatch.setattr(batch, "LOG_INTERVAL_S", 0)  # a line at every update instead of every 10 s
    stream = io.StringIO()
    advance(batch.progress_bar(4, stream), 4, failed=1)
    text = stream.getvalue()
    assert "\r" not in text and text.endswith("\n")
    lines = text.splitlines()
    assert [line.split(" ")[0] for line in lines] == ["0/4", "1/4", "2/4", "3/4", "4/4"]
    assert lines[-1].startswith("4/4 images (100%) in 00:00") and lines[-1].endswith("failed=1")


def test_quiet_shows_nothing():
    for stream in (Terminal(), io.StringIO()):
        advance(batch.progress_bar(4, stream, quiet=True), 4, failed=1)
        assert stream.getvalue() == ""
