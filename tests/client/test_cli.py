"""The `facecrop` command line without a service: where its options may go, and how failures read."""

import os
import pty
import subprocess
import time

import pytest

from facecrop_client.cli import client_of, parser
from tests.support import FACECROP, facecrop_here

URL = "http://facecrop.example:8080"
DOWN = "http://127.0.0.1:9"  # nothing listens on the discard port


@pytest.mark.parametrize(
    "argv",
    [
        ["--url", URL, "--api-key", "k", "--timeout", "5", "detect", "a.jpg"],
        ["detect", "a.jpg", "--url", URL, "--api-key", "k", "--timeout", "5"],
        ["--timeout", "5", "crop", "--url", URL, "a.jpg", "--out", "crops", "--api-key", "k"],
        [
            "--url",
            "http://earlier",
            "batch",
            "in",
            "out.jsonl",
            "--mode",
            "detect",
            "--url",
            URL,
            "--api-key=k",
            "--timeout=5",
        ],
    ],
)
def test_service_options_go_before_or_after_the_command(argv, monkeypatch):
    monkeypatch.setenv("FACECROP_URL", "http://from-the-environment")
    client = client_of(parser().parse_args(argv))
    assert (client.base_url, client.timeout, client.headers["Authorization"]) == (URL, 5.0, "Bearer k")


def test_service_options_fall_back_to_the_environment_then_the_defaults(monkeypatch):
    monkeypatch.setenv("FACECROP_URL", URL)
    monkeypatch.setenv("FACECROP_API_KEY", "e")
    client = client_of(parser().parse_args(["batch", "in", "out.jsonl", "--mode", "detect"]))
    assert (client.base_url, client.timeout, client.headers["Authorization"]) == (URL, 60.0, "Bearer e")
    monkeypatch.delenv("FACECROP_URL")
    monkeypatch.delenv("FACECROP_API_KEY")
    client = client_of(parser().parse_args(["detect", "a.jpg"]))
    assert client.base_url == "http://127.0.0.1:8080" and "Authorization" not in client.headers


@pytest.mark.parametrize("command", ["detect", "crop"])
def test_a_missing_photo_is_one_line_naming_it(tmp_path, command):
    missing = tmp_path / "missing.jpg"
    output = ["--out", str(tmp_path)] if command == "crop" else []
    result = facecrop_here(command, str(missing), *output, "--url", DOWN)
    assert result.returncode == 1
    assert result.stderr == f"facecrop: {missing}: No such file or directory\n"


def test_a_missing_folder_is_one_line_naming_it(tmp_path):
    result = facecrop_here("batch", str(tmp_path / "nowhere"), str(tmp_path / "out.jsonl"), "--mode", "detect")
    assert result.returncode == 1
    assert (
        result.stderr
        == f"facecrop: {tmp_path / 'nowhere'}: not a folder, a list of paths or URLs, or an s3:// prefix\n"
    )


@pytest.mark.parametrize("command", ["detect", "batch"])
def test_a_service_that_is_down_is_one_line_naming_its_address_at_once(tmp_path, command):
    photo = tmp_path / "a.jpg"
    photo.write_bytes(b"any bytes")
    arguments = (
        [str(photo)] if command == "detect" else [str(tmp_path), str(tmp_path / "out.jsonl"), "--mode", "detect"]
    )
    started = time.monotonic()
    result = facecrop_here(command, *arguments, "--url", DOWN)
    assert result.returncode == 1 and result.stdout == b""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"facecrop: cannot reach {DOWN}: Connection refused"), line
    assert time.monotonic() - started < 3  # no retries: nobody ever answered there
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jpg"]


def test_a_batch_removes_what_a_run_killed_outright_left_half_written(tmp_path):
    """A run killed mid-write (SIGKILL, the machine lost) leaves `x.jpg.<hex>.partial`; the next
    local run removes it first, as a Ray run does (they stayed, clutter in the output)."""
    (tmp_path / "photos").mkdir()
    left = tmp_path / "out" / "a" / f"x.jpg.{'0' * 32}.partial"
    left.parent.mkdir(parents=True)
    left.write_bytes(b"half")
    mine = tmp_path / "out" / "notes.partial.txt"
    mine.write_bytes(b"not ours")
    result = facecrop_here("batch", str(tmp_path / "photos"), str(tmp_path / "out"), "--mode", "crop", "--url", DOWN)
    assert result.returncode == 1 and not left.exists() and mine.exists(), result.stderr


def test_a_batch_into_the_current_folder_is_run_not_a_traceback(tmp_path, monkeypatch):
    """`facecrop batch photos .`: the output `.` has no name to put the manifest beside (a
    ValueError's traceback, before the service was asked anything)."""
    (tmp_path / "photos").mkdir()
    monkeypatch.chdir(tmp_path)
    result = facecrop_here("batch", "photos", ".", "--mode", "crop", "--url", DOWN)
    assert result.returncode == 1
    assert result.stderr.startswith(f"facecrop: cannot reach {DOWN}"), result.stderr


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--timeout", "0", "detect", "a.jpg"], "argument --timeout: must be a number of seconds above 0, got 0"),
        (["detect", "a.jpg", "--timeout", "-1"], "argument --timeout: must be a number of seconds above 0, got -1"),
        (["detect", "a.jpg", "--timeout", "nan"], "argument --timeout: must be a number of seconds above 0, got nan"),
        (["detect", "a.jpg", "--timeout", "inf"], "argument --timeout: must be a number of seconds above 0, got inf"),
        (["detect", "a.jpg", "--timeout", "soon"], "argument --timeout: not a number: 'soon'"),
        (["video", "a.mp4", "b.mp4", "--in-flight", "0"], "argument --in-flight: must be at least 1, got 0"),
        (["video", "a.mp4", "b.mp4", "--hold", "-1"], "argument --hold: must be at least 0, got -1"),
        (["video", "a.mp4", "b.mp4", "--hold", "2.5"], "argument --hold: not a whole number: '2.5'"),
        (["batch", "in", "out", "--mode", "detect", "--concurrency", "0"], "--concurrency: must be at least 1, got 0"),
        ([], "the following arguments are required: command"),
        (["batch", "in", "out"], "the following arguments are required: --mode"),
        (["batch", "in", "out", "--mode", "video"], "argument --mode: invalid choice: 'video'"),
        (["video", "a.mp4", "b.mp4", "--mode", "crop"], "argument --mode: invalid choice: 'crop'"),
        (["crop", "a.jpg"], "the following arguments are required: --out"),
        (["anonymize", "a.jpg"], "the following arguments are required: --out"),
    ],
)
def test_an_argument_out_of_range_missing_or_not_one_of_its_choices_is_a_usage_error(argv, said, capsys):
    """Counts and seconds out of range were each a traceback from deep inside (a pool of 0 threads, a
    deque of -1, urllib3's timeout)."""
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(argv)
    assert exited.value.code == 2 and said in capsys.readouterr().err


def test_each_commands_defaults():
    video = parser().parse_args(["video", "a.mp4", "b.mp4"])
    assert (video.mode, video.in_flight) == ("anonymize", 4)
    for mode in ("anonymize", "detect"):
        assert parser().parse_args(["video", "a.mp4", "b.jsonl", "--mode", mode]).mode == mode
    assert parser().parse_args(["batch", "in", "out", "--mode", "crop"]).concurrency == 8


def test_the_help_keeps_the_descriptions_lines():
    assert "\nThe service address comes from --url, else FACECROP_URL, else http://127.0.0.1:8080;\n" in (
        parser().format_help()
    )


def test_the_smallest_counts_and_a_fraction_of_a_second_are_taken():
    args = parser().parse_args(["video", "a.mp4", "b.mp4", "--in-flight", "1", "--hold", "0", "--timeout", "0.5"])
    assert (args.in_flight, args.hold, args.timeout) == (1, 0, 0.5)
    assert parser().parse_args(["batch", "in", "out", "--mode", "detect", "--concurrency", "1"]).concurrency == 1


def test_a_picture_is_not_written_to_a_terminal():
    """`--out -` with standard output on a terminal: one line, before any request (DOWN answers nothing)."""
    terminal, its_end = pty.openpty()
    try:
        result = subprocess.run(
            [*FACECROP, "anonymize", "-", "--out", "-", "--url", DOWN],
            input=b"photo bytes",
            stdout=its_end,
            stderr=subprocess.PIPE,
            timeout=120,
        )
        os.set_blocking(terminal, False)
        with pytest.raises(BlockingIOError):
            os.read(terminal, 1024)  # nothing written to it
    finally:
        os.close(terminal)
        os.close(its_end)
    assert result.returncode == 1
    assert result.stderr.decode() == (
        "facecrop: --out -: standard output is a terminal: redirect it to a file (> out.jpg) or a pipe\n"
    )


# Each option `facecrop video` (and batch's videos) takes, the value given, and where the job holds it:
# given on the command line, it wins over the defaults and over --fast alike.
VIDEO_OPTIONS = [
    (["--min-confidence", "33"], lambda job: job.params.get("min_confidence"), 33.0),
    (["--min-face-size", "7"], lambda job: job.params.get("min_face_size"), 7.0),
    (["--detail", "high"], lambda job: job.params.get("detail"), "high"),
    (["--method", "pixelate"], lambda job: job.hiding.method, "pixelate"),
    (["--strength", "0.5"], lambda job: job.hiding.strength, 0.5),
    (["--margin", "2.5"], lambda job: job.hiding.margin, 2.5),
    (["--shape", "rect"], lambda job: job.hiding.shape, "rect"),
    (["--hold", "0"], lambda job: job.hold, 0),
    (["--crf", "31"], lambda job: job.crf, 31),
    (["--in-flight", "3"], lambda job: job.in_flight, 3),
]


@pytest.mark.parametrize("fast", [[], ["--fast"]])
@pytest.mark.parametrize(("given", "held", "value"), VIDEO_OPTIONS)
def test_a_video_option_given_wins_over_the_defaults_and_over_fast(fast, given, held, value):
    pytest.importorskip("av")
    from facecrop_client.cli import video_job

    args = parser().parse_args(["video", "in.mp4", "out.mp4", *fast, *given])
    job = video_job(args, args.source, args.target, args.mode)
    assert held(job) == value
    others = video_job(parser().parse_args(["video", "in.mp4", "out.mp4", *fast]), args.source, args.target)
    assert held(others) != value, "the value given is not already the default: the test would see nothing"
    assert job.params_for(0).get("detail") == (
        "high" if given == ["--detail", "high"] else "auto" if not fast else None
    )


@pytest.mark.parametrize(
    ("argv", "connections"),
    [
        (["detect", "a.jpg"], 32),
        (["batch", "in", "out", "--mode", "detect", "--concurrency", "50"], 50),
        (["video", "a.mp4", "b.mp4", "--in-flight", "60"], 60),
        (["--url", "http://a:1,http://b:2", "batch", "in", "out", "--mode", "crop", "--concurrency", "40"], 40),
    ],
)
def test_each_service_gets_a_connection_for_every_request_the_command_has_in_flight(argv, connections):
    """urllib3's pool blocks past its size: a smaller one would hold --concurrency 50 to 32 at the service."""
    client = client_of(parser().parse_args(argv))
    for each in getattr(client, "clients", [client]):
        assert each.pool.connection_pool_kw["maxsize"] == connections


@pytest.mark.parametrize("fast", [False, True])
def test_a_video_job_without_options_is_its_presets(fast):
    pytest.importorskip("av")
    from facecrop_client.cli import video_job
    from facecrop_client.presets import DEFAULTS, FAST

    preset = FAST if fast else DEFAULTS
    args = parser().parse_args(["video", "in.mp4", "out.mp4", *(["--fast"] if fast else [])])
    job = video_job(args, args.source, args.target, args.mode)
    assert (job.params["min_confidence"], job.hiding.margin, job.hold, job.tile_every) == (
        preset.min_confidence,
        preset.margin,
        preset.hold,
        preset.tile_every,
    )
    assert (job.mode, job.crf, job.in_flight, job.params["max_faces"], job.params["landmarks"]) == (
        "anonymize",
        20,
        4,
        1000,
        False,
    )
