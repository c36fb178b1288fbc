"""`python -m bench.trace`: the modules one request visits, in the order it enters them.

A local stack's real Triton, the gateway in process; `sys.setprofile` records every call into a
module of the gateway (and facecrop_hiding) while one request of each kind is answered: a 256x256
face crop of a crowd photo uploaded to /v1/crop, the same by URL, and /v1/anonymize. Consecutive
calls within a module are one visit; a module entered again after others is a return. Calls into
the utilities every stage uses, and into methods of the value types any stage reads, are not
visits (UTILITIES, VALUE_TYPES). Printed three times: every module; with the detection (its own
orchestrator, preprocessing, Triton, the decoders, fusion) as one stage; that without the
modules that call the stages in turn (ORCHESTRATORS); and the detect step's own walk.

`--tree DIR` traces the gateway of another checkout (an earlier commit's worktree) on this tree's Triton.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

from local_triton import PROJECT_ROOT
from local_triton.processes import SHARED_FACES, running_stack

PHOTO = SHARED_FACES / "demo" / "widertest_20_Family_Group_Family_Group_20_435.jpg"
CROP = {"width": "256", "height": "256"}
JPEG = "image/jpeg"
URL = "/cdn-cgi/image/width=256,height=256,fit=cover,gravity=face,format=jpeg/" + PHOTO.name
# Utilities every stage calls, and the value types whose methods and properties any stage reads:
# calls into them are not visits.
UTILITIES = ("gateway.timing", "gateway.web.observe", "gateway.observe", "gateway.errors", "gateway.config")
VALUE_TYPES = frozenset(
    [
        "DecodedImage",
        "ImageHeader",
        "Detections",
        "Found",
        "DetectOptions",
        "CropOptions",
        "Gravity",
        "CropPlan",
        "Rect",
        "Filters",
        "Geometry",
        "Trim",
        "Settings",
        "UrlOptions",
        "ImageRequest",
        "Output",
        "Animation",
        "Hiding",
        "Work",
        "Focus",
        "Frame",
        "Source",
        "Planned",
        "InputPlan",
        "Tiling",
        "WireFormat",
        "StageTimer",
    ]
)
STEPS_MODULE = "gateway.processing.steps"  # where the request's steps are (their names: STEPS)
# The detection, one stage: its entry point (detection/passes.py) calls preprocess, Triton, decoders in turn.
DETECTION = ("gateway.detection", "gateway.triton")
# What calls the stages in turn, of this tree and the one before #45 (answers.py, url/render.py).
ORCHESTRATORS = (
    "gateway.web.app",
    "gateway.web.access",
    "gateway.web.api",
    "gateway.web.uploads",
    "gateway.web.url.views",
    "gateway.app",  # the trees before the web wing (issue 78): their names
    "gateway.access",
    "gateway.api",
    "gateway.uploads",
    "gateway.url.views",
    "gateway.processing",
    "gateway.answers",
    "gateway.url.render",
)


def module_of(filename: str, roots: dict[str, Path]) -> str | None:
    """The dotted module of a file of one of the packages in `roots` (name -> folder); None for any other."""
    path = Path(filename)
    for package, root in roots.items():
        if path.is_relative_to(root):
            return ".".join((package, *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
    return None


def visits(call: Callable[[], object], roots: dict[str, Path], step: str | None = None) -> list[str]:
    """The modules of `roots`' packages entered during `call()`, consecutive calls within one collapsed;
    with `step`, only those entered while the processing step of that name runs."""
    entered: list[str] = []
    inside = step is None

    def profile(frame, event, _arg):
        nonlocal inside
        code = frame.f_code
        module = module_of(code.co_filename, roots)
        if step is not None and module == STEPS_MODULE and code.co_name == step:
            inside = event == "call"
            return
        if not inside or event != "call" or code.co_qualname.partition(".")[0] in VALUE_TYPES:
            return
        if module and module not in UTILITIES and (not entered or entered[-1] != module):
            entered.append(module)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return entered


def returns(path: list[str]) -> dict[str, int]:
    """How many times each module is entered again after others."""
    seen: set[str] = set()
    again: dict[str, int] = {}
    for module in path:
        if module in seen:
            again[module] = again.get(module, 0) + 1
        seen.add(module)
    return again


def collapsed(path: list[str]) -> list[str]:
    return [module for index, module in enumerate(path) if index == 0 or path[index - 1] != module]


def stages(path: list[str]) -> list[str]:
    """`path` with the detection's modules as one stage, `detection`."""
    return collapsed(["detection" if module.startswith(DETECTION) else module for module in path])


def by_room(path: list[str]) -> list[str]:
    """`path` with each folder of the gateway (its rooms: detection, triton, imaging, ...) as one stage."""
    return collapsed([".".join(module.split(".")[:2]) for module in path])


def without_orchestrators(path: list[str]) -> list[str]:
    """The stages alone: `path` without the modules that call them in turn."""
    return collapsed([module for module in stages(path) if not module.startswith(ORCHESTRATORS)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=PROJECT_ROOT, help="the checkout whose gateway runs")
    tree = parser.parse_args().tree.resolve()
    sys.path.insert(0, str(tree))
    wing = (tree / "gateway" / "web").is_dir()  # a tree before the web wing (issue 78) has gateway/app.py
    create_app = importlib.import_module("gateway.web.app" if wing else "gateway.app").create_app
    settings = importlib.import_module("gateway.config").Settings
    hiding = importlib.import_module("facecrop_hiding")
    roots = {"gateway": tree / "gateway", "facecrop_hiding": Path(hiding.__file__).parent}
    data = PHOTO.read_bytes()
    with running_stack("trace") as stack:
        app = create_app(settings(triton_url=stack.triton_grpc, origin=str(PHOTO.parent)))
        client = app.test_client()
        requests = {
            "/v1/crop upload": lambda: client.post("/v1/crop", query_string=CROP, data=data, content_type=JPEG),
            "URL form": lambda: client.get(URL),
            "/v1/anonymize upload": lambda: client.post("/v1/anonymize", data=data, content_type=JPEG),
        }
        for name, request in requests.items():
            request()  # warm: connections, shared-memory regions, caches
            path = visits(request, roots)
            views = {
                "every module": path,
                "the detection as one stage": stages(path),
                "the stages, without what calls them in turn": without_orchestrators(path),
            }
            views["its detect step alone"] = visits(request, roots, "detect")
            views["its detect step, room by room"] = by_room(views["its detect step alone"])
            for label, shown in views.items():
                again = returns(shown)
                counts = f"{len(shown)} visits in {len(set(shown))} modules, {sum(again.values())} returns"
                print(f"## {name}: {label}, {counts} {again or ''}")
                print(" -> ".join(module.removeprefix("gateway.").removesuffix(".facecrop_hiding") for module in shown))
                print()


if __name__ == "__main__":
    main()
