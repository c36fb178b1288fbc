"""`facecrop`: detect, crop, anonymize and batch-process photos with a facecrop service.

The service address comes from --url, else FACECROP_URL, else http://127.0.0.1:8080;
an API key from --api-key, else FACECROP_API_KEY. --url, --api-key and --timeout may
come before or after the command.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path

from facecrop_client.batch import (
    DetectSink,
    OutputError,
    PictureSink,
    Summary,
    file_problem,
    manifest_path,
    progress_bar,
    reason,
    run_batch,
    stop_on_sigterm,
    stops_the_run,
    sweep_partials,
    video_failure,
    videos_ledger,
    videos_to_do,
)
from facecrop_client.client import POOL_SIZE, AnyClient, FacecropError, connect
from facecrop_client.presets import DEFAULTS, FAST
from facecrop_client.sources import Folder, Source, SourceError, source_of

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT_S = 60.0
FINDING_OPTIONS = ("min_confidence", "min_face_size", "detail")
DETECT_OPTIONS = (*FINDING_OPTIONS, "max_faces", "landmarks")
CROP_OPTIONS = ("width", "height", "zoom", "gravity", "faces", "fit", "quality")
ANONYMIZE_OPTIONS = (*FINDING_OPTIONS, "method", "strength", "margin", "shape", "quality")
STDIO = Path("-")  # `-`: standard input as a photo, standard output as --out (a file named so is ./-)


def at_least(minimum: int):
    """An argparse type: a whole number no smaller than `minimum` (else argparse's usage error)."""

    def whole_number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return whole_number


def seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < math.inf:  # NaN too
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text}")
    return value


class CommandError(Exception):
    """A failure told in one line on stderr (no traceback), with exit status 1."""


def path_or_stdio(text: str) -> Path:
    return STDIO if text == "-" else Path(text)


def connection_options() -> argparse.ArgumentParser:
    """--url, --api-key and --timeout, for the top level and every command (absent unless given)."""
    options = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    group = options.add_argument_group("service")
    group.add_argument(
        "--url",
        help=f"the service's address, or several comma-separated (calls spread over them, one that cannot be "
        f"reached skipped) (default: $FACECROP_URL, else {DEFAULT_URL})",
    )
    group.add_argument("--api-key", help="sent as Authorization: Bearer KEY (default: $FACECROP_API_KEY)")
    group.add_argument("--timeout", type=seconds, help=f"seconds per request (default {DEFAULT_TIMEOUT_S:g})")
    return options


def add_finding_options(parser: argparse.ArgumentParser) -> None:
    """Which faces are found (every endpoint)."""
    parser.add_argument(
        "--min-confidence",
        type=float,
        help=f"percent, 0-100 (default 50; anonymize 8; video {DEFAULTS.min_confidence:g})",
    )
    parser.add_argument("--min-face-size", type=float, help="shortest face side in pixels")
    parser.add_argument(
        "--detail",
        choices=("standard", "auto", "high", "fast"),
        help="high: also a tiled pass for small faces (slower); auto: only where the standard pass sees small faces; "
        "fast: the standard pass at 640 pixels (default standard; anonymize auto; video auto on every second frame)",
    )


def add_listing_options(parser: argparse.ArgumentParser) -> None:
    """How found faces are listed (detect, crop)."""
    parser.add_argument("--max-faces", type=int, help="1-1000 (service default 100)")
    parser.add_argument("--no-landmarks", dest="landmarks", action="store_false", default=None)


def add_picture_options(parser: argparse.ArgumentParser) -> None:
    """How a returned picture is encoded (crop, anonymize)."""
    parser.add_argument(
        "--format",
        choices=("jpeg", "png", "webp", "avif", "gif"),
        help="default: the input's (jpeg for others); an animation stays one as gif, webp or its own format",
    )
    parser.add_argument("--quality", type=int)


def add_crop_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--width", type=int)
    parser.add_argument("--height", type=int)
    parser.add_argument("--zoom", type=float, help="0-1 (service default 0.5)")
    parser.add_argument("--gravity", help="face, center or XxY")
    parser.add_argument("--faces", choices=("all", "largest"))
    parser.add_argument("--fit", choices=("cover", "crop"))


def add_anonymize_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", choices=("blur", "pixelate", "fill"), help="service default blur")
    parser.add_argument("--strength", type=float, help="0.05-1, relative to each face (default 1)")
    parser.add_argument(
        "--margin",
        type=float,
        help=f"1-3: each face box grown so many times (the service's default; video {DEFAULTS.margin:g})",
    )
    parser.add_argument("--shape", choices=("ellipse", "rect"))


def parser() -> argparse.ArgumentParser:
    service = connection_options()
    root = argparse.ArgumentParser(
        prog="facecrop",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[service],
    )
    commands = root.add_subparsers(dest="command", required=True)
    detect = commands.add_parser("detect", help="print one JSON line per photo", parents=[service])
    crop = commands.add_parser("crop", help="write face-centred crops into --out", parents=[service])
    anonymize = commands.add_parser(
        "anonymize", help="write the photos, every face hidden, into --out", parents=[service]
    )
    batch = commands.add_parser(
        "batch",
        help="a whole tree, resumable (anonymize: videos too); failures go to OUTPUT.failures.jsonl",
        parents=[service],
    )
    for command in (detect, crop, anonymize):
        command.add_argument("photos", nargs="+", type=path_or_stdio, help="photo files; - reads one from stdin")
    for command in (crop, anonymize):
        command.add_argument(
            "--out", type=path_or_stdio, required=True, help="a folder; - writes the photo's picture to standard output"
        )
    video = commands.add_parser(
        "video",
        help="hide every face of a video file (or list them); needs the video extra",
        parents=[service],
        description="Hide every face of IN's video frames into OUT (its extension picks the container), "
        "keeping timestamps, rotation and audio; or, with --mode detect, list them as JSON Lines. "
        "Defaults as measured in docs/video.md. Needs: pip install ./hiding './client[video]'.",
    )
    video.add_argument("source", type=Path, metavar="IN")
    video.add_argument("target", type=Path, metavar="OUT")
    video.add_argument("--mode", choices=("anonymize", "detect"), default="anonymize")
    video.add_argument(
        "--fast",
        action="store_true",
        help=f"the standard pass alone on every frame, {FAST.min_confidence:g}%% and margin {FAST.margin:g}: faster, "
        "and fewer faces hidden (docs/video.md)",
    )
    video.add_argument(
        "--hold",
        type=at_least(0),
        default=None,
        help=f"frames a face missed between two sightings stays hidden (default {DEFAULTS.hold})",
    )
    video.add_argument(
        "--crf", type=int, default=None, help="quality of the re-encoded video, lower is better (default 20)"
    )
    video.add_argument("--in-flight", type=at_least(1), default=4, help="frames at the service at once (default 4)")
    video.add_argument("-q", "--quiet", action="store_true", help="no progress display (the summary still prints)")
    batch.add_argument(
        "input_dir", metavar="INPUT", help="a folder, a text file of paths or URLs (one a line), or s3://bucket/prefix"
    )
    batch.add_argument("output", type=Path, help="detect: a JSON Lines file; crop, anonymize: a directory")
    batch.add_argument("--mode", choices=("detect", "crop", "anonymize"), required=True)
    batch.add_argument("--concurrency", type=at_least(1), default=8, help="requests in flight per service (default 8)")
    batch.add_argument("-q", "--quiet", action="store_true", help="no progress display (the summary still prints)")
    for command in (batch, video):
        command.add_argument(
            "--ray",
            nargs="?",
            const="",
            metavar="ADDRESS",
            help="run the job as a Ray Data pipeline (the ray extra): alone, a Ray inside this process (or the "
            "cluster $RAY_ADDRESS names); with the head's host:port, or auto, on that cluster "
            "(docs: Beyond one machine)",
        )
        command.add_argument("--json", action="store_true", help="the summary as one JSON object on stdout")
    for command, adders in {
        detect: (add_finding_options, add_listing_options),
        crop: (add_finding_options, add_listing_options, add_picture_options, add_crop_options),
        anonymize: (add_finding_options, add_picture_options, add_anonymize_options),
        video: (add_finding_options, add_anonymize_options),
        batch: (add_finding_options, add_listing_options, add_picture_options, add_crop_options, add_anonymize_options),
    }.items():
        for add in adders:
            add(command)
    return root


def service_of(args: argparse.Namespace) -> tuple[str, float, str | None]:
    """--url / --timeout / --api-key wherever they were given, else their fallbacks."""
    given = vars(args)
    return (
        given.get("url") or os.environ.get("FACECROP_URL") or DEFAULT_URL,
        given.get("timeout", DEFAULT_TIMEOUT_S),
        given.get("api_key") or os.environ.get("FACECROP_API_KEY"),
    )


def client_of(args: argparse.Namespace) -> AnyClient:
    """The client of the service(s) the arguments name, with a connection for each request in flight."""
    in_flight = max(getattr(args, "concurrency", 0), getattr(args, "in_flight", 0))
    return connect(*service_of(args), pool_size=max(POOL_SIZE, in_flight))


def service_params(args: argparse.Namespace, names: tuple[str, ...]) -> dict:
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


@contextmanager
def about(photo: Path) -> Iterator[None]:
    """The service's refusal of `photo` as one line naming it (or naming the address it could not reach)."""
    try:
        yield
    except FacecropError as error:
        if error.code == "connection_error":
            raise CommandError(f"{error.message} (is the service running? set --url or FACECROP_URL)") from error
        raise CommandError(f"{photo}: {error}") from error


def each_photo(photos: list[Path], one: Callable[[Path], None]) -> int:
    """`one` for every photo, a photo's failure told on stderr and the rest still done; 1 if any
    failed. A failure of the service's or of this client's (out of reach, the key refused:
    `stops_the_run`) stops at once: every photo would fail the same way."""
    failed = 0
    for photo in photos:
        try:
            with about(photo):
                one(photo)
        except (CommandError, OSError) as error:
            if isinstance(error.__cause__, FacecropError) and stops_the_run(reason(error.__cause__)):
                raise
            failed += 1
            print(f"facecrop: {file_problem(error) if isinstance(error, OSError) else error}", file=sys.stderr)
    return 1 if failed else 0


def photo_bytes(photo: Path) -> bytes:
    """The photo's bytes: standard input's for `-`, else the file's."""
    return sys.stdin.buffer.read() if photo is STDIO else photo.read_bytes()


def detect(client: AnyClient, args: argparse.Namespace) -> int:
    params = service_params(args, DETECT_OPTIONS)
    read_once(args.photos)

    def one(photo: Path) -> None:
        print(json.dumps({"path": str(photo), **client.detect(photo_bytes(photo), **params).raw}), flush=True)

    return each_photo(args.photos, one)


def read_once(photos: list[Path]) -> None:
    if sum(photo is STDIO for photo in photos) > 1:
        raise CommandError("-: standard input holds one photo: give - once")


def pictures(client: AnyClient, args: argparse.Namespace) -> int:
    """`crop` or `anonymize`: one picture per photo into --out, its path printed; or, with
    `--out -`, one photo's picture to standard output."""
    sink = PictureSink(args.out, args.format, args.command)
    params = service_params(args, OPTIONS[args.command])
    read_once(args.photos)
    if args.out is STDIO:
        return picture_to_stdout(client, sink, args.photos, params)
    if any(photo is STDIO for photo in args.photos):
        raise CommandError("-: standard input's picture goes to standard output: give --out -")
    sink.open()
    writers: dict[Path, Path] = {}  # each output and the photo it is written from

    def one(photo: Path) -> None:
        image = photo.read_bytes()  # a photo that cannot be read says so first
        if any(output.resolve() == photo.resolve() for output in sink.outputs(photo.name)):
            raise CommandError(f"{photo}: its output would overwrite it (give --out another folder)")
        for output in sink.outputs(photo.name):  # x.avif's may be x.webp, x.webp's own
            writer = writers.setdefault(output, photo)
            if writer != photo:
                raise CommandError(f"{photo}: its output, {output}, is {writer}'s: rename one of the two")
        print(sink.write(photo.name, sink.call(client, image, photo.name, params)), flush=True)

    return each_photo(args.photos, one)


def picture_to_stdout(client: AnyClient, sink: PictureSink, photos: list[Path], params: dict) -> int:
    """The picture of the one photo (its format picked as for a file: --format, else the photo's
    name, else JPEG) to standard output; a failure is one line on stderr and nothing on stdout."""
    if len(photos) != 1:
        raise CommandError(f"--out - writes one picture: give one photo, not {len(photos)}")
    if sys.stdout.isatty():  # as curl does: image bytes would garble the terminal
        raise CommandError("--out -: standard output is a terminal: redirect it to a file (> out.jpg) or a pipe")
    [photo] = photos
    with about(photo):
        result = sink.call(client, photo_bytes(photo), photo.name, params)
    sys.stdout.buffer.write(result.content)
    sys.stdout.buffer.flush()
    return 0


def batch(client: AnyClient, args: argparse.Namespace) -> int:
    """`batch`: a source's photos (a list's lines read as the run starts) through one engine; a
    source that cannot be read as one is one line."""
    args.output = Path(os.path.abspath(args.output))  # `.` has no name to put the manifest beside
    try:
        return batch_of(client, args, source_of(args.input_dir, args.output))
    except (SourceError, OutputError) as error:
        raise CommandError(str(error)) from error


def batch_of(client: AnyClient, args: argparse.Namespace, source: Source) -> int:
    """`batch` on `source`: the summary on stderr (and as JSON with --json), the exit status."""
    sink = DetectSink(args.output) if args.mode == "detect" else PictureSink(args.output, args.format, args.mode)
    params = service_params(args, OPTIONS[args.mode])
    failures = args.output.with_name(args.output.name + ".failures.jsonl")
    if args.ray is not None:
        summary = batch_on_ray(args, source, sink, params, failures)
    else:
        stop_on_sigterm()  # `kill`, a container stopping: as Ctrl-C, the pictures in flight removed
        sweep_partials(args.output)  # what a run killed outright left half-written
        progress = partial(progress_bar, quiet=args.quiet)
        with about(args.input_dir):
            client.check()  # an address nobody answers: one line at once, not a failure per image
        summary = run_batch(client, source, sink, params, args.concurrency, failures, progress)
        print(summary.line(), file=sys.stderr)
        if not summary.ended_early and args.mode == "anonymize" and isinstance(source, Folder):
            video_batch(client, args, source.root, summary, failures)
    if summary.failed:
        print(f"failures and their reasons: {failures}", file=sys.stderr)
    if args.json:
        print(json.dumps({**vars(summary), "manifest": str(manifest_path(args.output))}))
    return 130 if summary.interrupted else (1 if summary.failed or summary.stopped else 0)


def ray_module():
    """facecrop_client.on_ray with Ray importable, or one line saying how to install it."""
    try:
        import ray  # noqa: F401
    except ImportError as error:
        raise CommandError(f"--ray needs the ray extra: pip install './client[ray]' ({error})") from error
    from facecrop_client import on_ray

    return on_ray


def ray_service(args: argparse.Namespace):
    """What every Ray task needs to reach the service, and the check of it where Ray runs embedded
    (the service is reachable from here; on a cluster, from its nodes)."""
    cluster = ray_module()
    embedded = not args.ray and not os.environ.get("RAY_ADDRESS")
    subject = getattr(args, "input_dir", None) or args.source

    def reachable() -> None:
        if embedded:
            with about(subject):
                client_of(args).check()

    return cluster, cluster.Service(*service_of(args)), reachable


def batch_on_ray(args: argparse.Namespace, source: Source, sink, params: dict, failures: Path) -> Summary:
    """`batch --ray`: facecrop_client.on_ray's run of the photos (and, anonymizing a folder, the videos)."""
    cluster, service, reachable = ray_service(args)
    videos = None
    if args.mode == "anonymize" and isinstance(source, Folder):
        root = source.root

        def videos() -> list:
            return [
                cluster.VideoTask(name, video_job(args, root / name, args.output / name), service)
                for name in videos_to_do(root, args.output)
            ]

    try:
        return cluster.run_batch(
            source, sink, params, service, args.concurrency, failures, videos, args.ray, args.quiet, reachable, told
        )
    except cluster.ClusterError as error:
        raise CommandError(str(error)) from error


def told(line: str) -> None:
    """A line of a job's own (a summary, a video's), on standard error."""
    print(line, file=sys.stderr)


def video_module():
    """facecrop_client.video, or one line saying how to install it."""
    try:
        from facecrop_client import video as videos
    except ImportError as error:
        raise CommandError(f"videos need the video extra: pip install ./hiding './client[video]' ({error})") from error
    return videos


def video_job(args: argparse.Namespace, source: Path, target: Path, mode: str = "anonymize"):
    """The VideoJob of `video` or `batch`: their finding and hiding options over the video defaults."""
    videos = video_module()
    preset = FAST if getattr(args, "fast", False) else DEFAULTS
    defaults = videos.VideoJob(source, target)
    params = {"min_confidence": preset.min_confidence, "max_faces": 1000, "landmarks": mode == "detect"}
    params |= service_params(args, FINDING_OPTIONS)
    hiding = replace(defaults.hiding, margin=preset.margin)
    hiding = replace(hiding, **service_params(args, ("method", "strength", "margin", "shape")))
    hold, crf = getattr(args, "hold", None), getattr(args, "crf", None)
    return videos.VideoJob(
        source,
        target,
        mode,
        params,
        hiding,
        preset.hold if hold is None else hold,
        preset.tile_every,
        defaults.crf if crf is None else crf,
        getattr(args, "in_flight", defaults.in_flight),
    )


def frame_progress(args: argparse.Namespace):
    """The progress display of `video` and of batch's videos: frames, not images."""
    return partial(progress_bar, quiet=args.quiet, unit="frame", things="frames")


def video(client: AnyClient, args: argparse.Namespace) -> int:
    videos = video_module()
    stop_on_sigterm()
    job = video_job(args, args.source, args.target, args.mode)
    if args.ray is not None:
        return video_on_ray(args, job)
    progress = frame_progress(args)
    try:
        with about(args.source):
            summary = videos.run_video_interruptible(client, job, progress, threading.Event())
    except videos.VideoError as error:
        raise CommandError(str(error)) from error
    return video_done(args, summary)


def video_done(args: argparse.Namespace, summary) -> int:
    """`video`'s summary line (and its JSON with --json), whichever engine ran it."""
    print(summary.line(), file=sys.stderr)
    if args.json:
        print(json.dumps({"source": str(args.source), "output": str(args.target), **vars(summary)}))
    return 0


def video_on_ray(args: argparse.Namespace, job) -> int:
    """`video --ray`: the video as one Ray task (facecrop_client.on_ray), on the node Ray places it."""
    cluster, service, reachable = ray_service(args)
    videos = video_module()
    videos.check_paths(job.source, job.target)
    try:
        done = cluster.run_video(cluster.VideoTask(args.source.name, job, service), args.ray, args.quiet, reachable)
    except cluster.ClusterError as error:
        raise CommandError(str(error)) from error
    if done is None:
        return 130
    if done.error:
        raise CommandError(done.error["message"])
    return video_done(args, videos.VideoSummary(**done.result))


def video_batch(client: AnyClient, args: argparse.Namespace, root: Path, summary: Summary, failures: Path) -> None:
    """batch --mode anonymize: the videos of the tree, one after another (each keeps the service
    busy by itself), written beside the pictures, each listed in the manifest (a failure in
    `failures` too, and counted in `summary`)."""
    names = videos_to_do(root, args.output)
    if not names:
        return
    videos = video_module()
    progress = frame_progress(args)
    with videos_ledger(args.output, summary, failures) as ledger:
        for name in names:
            target = args.output / name
            target.parent.mkdir(parents=True, exist_ok=True)
            started = time.monotonic()
            try:
                job = video_job(args, root / name, target)
                done = videos.run_video_interruptible(client, job, progress, threading.Event())
            except (videos.VideoError, FacecropError, OSError) as error:
                ledger.record(name, "", 0, video_failure(root / name, error), time.monotonic() - started, image=False)
                continue
            ledger.record(name, target, done.faces, None, time.monotonic() - started, image=False)
            print(f"{name}: {done.line()}", file=sys.stderr)


OPTIONS = {"detect": DETECT_OPTIONS, "crop": DETECT_OPTIONS + CROP_OPTIONS, "anonymize": ANONYMIZE_OPTIONS}
COMMANDS = {"detect": detect, "crop": pictures, "anonymize": pictures, "batch": batch, "video": video}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return COMMANDS[args.command](client_of(args), args)
    except OSError as error:  # a photo that cannot be read, an output that cannot be written
        return fail(file_problem(error))
    except CommandError as error:
        return fail(str(error))
    except KeyboardInterrupt:  # Ctrl-C during detect or crop (batch handles its own)
        return 130


def fail(message: str) -> int:
    print(f"facecrop: {message}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
