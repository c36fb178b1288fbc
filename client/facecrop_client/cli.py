"""`facecrop`: detect, crop and batch-process photos with a facecrop service.

The service address comes from --url, else FACECROP_URL, else http://127.0.0.1:8080;
an API key from --api-key, else FACECROP_API_KEY.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from facecrop_client.batch import CropSink, DetectSink, run_batch
from facecrop_client.client import Client, FacecropError

CROP_OPTIONS = ("width", "height", "zoom", "gravity", "faces", "fit", "quality")


def add_detect_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--min-confidence", type=float, help="percent, 0-100 (service default 50)")
    parser.add_argument("--max-faces", type=int, help="1-1000 (service default 100)")
    parser.add_argument("--min-face-size", type=float, help="shortest face side in pixels")
    parser.add_argument("--no-landmarks", dest="landmarks", action="store_false", default=None)
    parser.add_argument(
        "--detail", choices=("standard", "high"), help="high: also a tiled pass for small faces (slower)"
    )


def add_crop_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--width", type=int)
    parser.add_argument("--height", type=int)
    parser.add_argument("--zoom", type=float, help="0-1 (service default 0.5)")
    parser.add_argument("--gravity", help="face, center or XxY")
    parser.add_argument("--faces", choices=("all", "largest"))
    parser.add_argument("--fit", choices=("cover", "crop"))
    parser.add_argument("--format", choices=("jpeg", "png", "webp"), help="default: the input's (jpeg for others)")
    parser.add_argument("--quality", type=int)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="facecrop", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    root.add_argument("--url", default=os.environ.get("FACECROP_URL", "http://127.0.0.1:8080"))
    root.add_argument("--api-key", default=os.environ.get("FACECROP_API_KEY"))
    root.add_argument("--timeout", type=float, default=60.0)
    commands = root.add_subparsers(dest="command", required=True)
    detect = commands.add_parser("detect", help="print one JSON line per photo")
    detect.add_argument("photos", nargs="+", type=Path)
    add_detect_options(detect)
    crop = commands.add_parser("crop", help="write face-centred crops into --out")
    crop.add_argument("photos", nargs="+", type=Path)
    crop.add_argument("--out", type=Path, required=True)
    add_detect_options(crop)
    add_crop_options(crop)
    batch = commands.add_parser("batch", help="a whole tree, resumable; failures go to OUTPUT.failures.jsonl")
    batch.add_argument("input_dir", type=Path)
    batch.add_argument("output", type=Path, help="detect: a JSON Lines file; crop: a directory")
    batch.add_argument("--mode", choices=("detect", "crop"), required=True)
    batch.add_argument("--concurrency", type=int, default=8)
    add_detect_options(batch)
    add_crop_options(batch)
    return root


def service_params(args: argparse.Namespace, names: tuple[str, ...]) -> dict:
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


DETECT_OPTIONS = ("min_confidence", "max_faces", "min_face_size", "landmarks", "detail")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    client = Client(args.url, timeout=args.timeout, api_key=args.api_key)
    detect_params = service_params(args, DETECT_OPTIONS)
    try:
        if args.command == "detect":
            for photo in args.photos:
                print(json.dumps({"path": str(photo), **client.detect(photo, **detect_params).raw}), flush=True)
            return 0
        crop_params = {**detect_params, **service_params(args, CROP_OPTIONS)}
        if args.command == "crop":
            crops = CropSink(args.out, args.format)
            crops.open()
            for photo in args.photos:
                crops.write(photo.name, crops.call(client, photo, crop_params))
                print(crops.target(photo.name), flush=True)
            return 0
    except FacecropError as error:
        print(f"facecrop: {error}", file=sys.stderr)
        return 1
    sink: DetectSink | CropSink
    if args.mode == "detect":
        sink, params = DetectSink(args.output), detect_params
    else:
        sink, params = CropSink(args.output, args.format), crop_params
    failures = args.output.with_name(args.output.name + ".failures.jsonl")
    summary = run_batch(client, args.input_dir, sink, params, args.concurrency, failures)
    print(summary.line(), file=sys.stderr)
    if summary.failed:
        print(f"failures and their reasons: {failures}", file=sys.stderr)
    return 130 if summary.interrupted else (1 if summary.failed else 0)


if __name__ == "__main__":
    sys.exit(main())
