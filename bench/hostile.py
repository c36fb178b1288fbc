"""The URL form under hostile origins (issue #34), against real servers on loopback (evaluation/origins.py),
as part of `make bench`:

  deadline      each misbehaving origin (headers dripped, a body trickled with Connection: close or
                over HTTP/1.0, chunk-size lines without end, 100 Continue floods, endless trailers),
                answered within the deadline (3 s here) plus 1 s, with a JSON error
  slow origin   FLOOD clients each keeping a request in flight to an origin that takes 8 s (sent
                again once answered, after Retry-After where refused), for FLOOD_S seconds, while
                one client calls /v1/detect and /healthz one after the other: every answer 200,
                /v1/detect's p50 against its p50 with no flood
  dead origin   once its breaker is open, the wall time of a request for it (c=1)
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import requests

from bench.verdicts import record, shown
from evaluation.origins import HOSTILE, hostile_origin
from local_triton.processes import SHARED_FACES, Stack, running_gateway

DEADLINE_S = 3
FLOOD, FLOOD_S = 40, 20.0
DETECT_SLOWDOWN = 1.5
DEAD_MS = 50


def deadline_rows(stack: Stack, gateway_env: dict[str, str], photo: bytes) -> list[str]:
    lines = ["| origin | answer | seconds |", "|---|---|---:|"]
    slowest, answered = 0.0, True
    with hostile_origin(photo) as (base, _):
        env = {**gateway_env, "FACECROP_ALLOWED_SOURCES": base, "FACECROP_ALLOW_PRIVATE_SOURCES": "true"}
        env |= {"FACECROP_SOURCE_TIMEOUT_S": str(DEADLINE_S), "FACECROP_SOURCE_BREAKER_FAILURES": "1000"}
        with running_gateway(stack.triton_grpc, env, "bench-hostile") as gateway:
            for path in HOSTILE:
                started = time.monotonic()
                answer = requests.get(f"{gateway.url}/cdn-cgi/image/width=64/{base}{path.lstrip('/')}", timeout=120)
                seconds = time.monotonic() - started
                code = answer.json().get("error", {}).get("code", "") if answer.status_code >= 400 else "no error"
                answered &= answer.status_code >= 400 and bool(code)
                slowest = max(slowest, seconds)
                lines.append(f"| {path.lstrip('/')} | {answer.status_code} {code} | {seconds:.2f} |")
    record(
        "#34",
        f"every misbehaving origin answered within the deadline + 1 s ({DEADLINE_S + 1} s), a JSON error",
        f"slowest {shown(slowest, DEADLINE_S + 1)} s",
        slowest <= DEADLINE_S + 1 and answered,
    )
    return lines


def answered_as(answer: requests.Response) -> str:
    """An answer's status and error code ("503 origin_unavailable"), or its status alone."""
    try:
        code = answer.json().get("error", {}).get("code", "") if answer.status_code >= 400 else ""
    except ValueError:
        code = ""
    return f"{answer.status_code} {code}".strip()


def dead_origin_verdict(dead_ms: float, answers: list[str], reached: int) -> tuple[str, bool]:
    """The dead origin's figure and verdict: quick (< DEAD_MS, unrounded) because its breaker answered,
    every request 503 origin_unavailable and none of them reaching the origin; a quick 502 from an
    origin that closes at once (a breaker that never opened) is not met."""
    refused = answers.count("503 origin_unavailable")
    others = sorted({a for a in answers if a != "503 origin_unavailable"})
    figure = f"{shown(dead_ms, DEAD_MS, 1)} ms, {refused} of {len(answers)} answered 503 origin_unavailable"
    figure += f" ({', '.join(others)} otherwise)" if others else ""
    figure += f", {reached} reached the origin"
    return figure, bool(answers) and refused == len(answers) and reached == 0 and dead_ms < DEAD_MS


def flood_rows(stack: Stack, gateway_env: dict[str, str], photo: bytes) -> list[str]:
    with hostile_origin(photo) as (base, _), hostile_origin(photo) as (dead_base, dead_state):
        env = {
            **gateway_env,
            "FACECROP_ALLOWED_SOURCES": f"{base},{dead_base}",
            "FACECROP_ALLOW_PRIVATE_SOURCES": "true",
        }
        with running_gateway(stack.triton_grpc, env, "bench-flood") as gateway, requests.Session() as session:

            def detect() -> float:
                started = time.perf_counter()
                answer = session.post(
                    f"{gateway.url}/v1/detect", data=photo, headers={"Content-Type": "image/jpeg"}, timeout=60
                )
                health = session.get(f"{gateway.url}/healthz", timeout=60)
                statuses.update({answer.status_code, health.status_code})
                return time.perf_counter() - started

            statuses: set[int] = set()
            for _ in range(3):
                detect()
            quiet = [detect() for _ in range(30)]
            stop = threading.Event()
            flooded: list[int] = []

            def keep_waiting() -> None:
                while not stop.is_set():
                    flooded.append(
                        requests.get(f"{gateway.url}/cdn-cgi/image/width=64/{base}late", timeout=60).status_code
                    )

            with ThreadPoolExecutor(FLOOD) as pool:
                workers = [pool.submit(keep_waiting) for _ in range(FLOOD)]
                time.sleep(1)  # the flood under way
                loud, until = [], time.monotonic() + FLOOD_S
                while time.monotonic() < until:
                    loud.append(detect())
                stop.set()
                for worker in workers:
                    worker.result()
            for _ in range(8):  # the dead origin's breaker opens
                session.get(f"{gateway.url}/cdn-cgi/image/width=64/{dead_base}dead", timeout=60)
            dead, dead_answers, reached = [], [], dead_state.seen["/dead"]
            for _ in range(50):
                started = time.perf_counter()
                answer = session.get(f"{gateway.url}/cdn-cgi/image/width=64/{dead_base}dead", timeout=60)
                dead.append(time.perf_counter() - started)
                dead_answers.append(answered_as(answer))
            reached = dead_state.seen["/dead"] - reached
    quiet_p50, loud_p50 = float(np.median(quiet)) * 1000, float(np.median(loud)) * 1000
    dead_ms = float(np.mean(dead)) * 1000
    record(
        "#34",
        "during the slow-origin flood, every /v1/detect and /healthz answers 200",
        f"statuses {sorted(statuses)}",
        statuses == {200},
    )
    record(
        "#34",
        f"/v1/detect p50 during the flood <= {DETECT_SLOWDOWN}x unloaded",
        f"{shown(loud_p50 / quiet_p50, DETECT_SLOWDOWN)}x ({loud_p50:.0f} ms against {quiet_p50:.0f})",
        loud_p50 <= DETECT_SLOWDOWN * quiet_p50,
    )
    dead_figure, dead_met = dead_origin_verdict(dead_ms, dead_answers, reached)
    record("#34", f"a dead origin costs < {DEAD_MS} ms a request once its breaker is open", dead_figure, dead_met)
    counts = {status: flooded.count(status) for status in sorted(set(flooded))}
    return [
        f"- {FLOOD} requests kept in flight for {FLOOD_S:.0f} s to an origin taking 8 s ({len(flooded)} answered: "
        f"{counts}); meanwhile {len(loud)} /v1/detect and /healthz pairs, statuses {sorted(statuses)}",
        f"- /v1/detect (with /healthz) p50: {quiet_p50:.0f} ms unloaded, {loud_p50:.0f} ms during the flood: "
        f"**{loud_p50 / quiet_p50:.2f}x**",
        f"- a dead origin once its breaker is open: **{dead_figure}** a request (mean of {len(dead)})",
    ]


def report(stack: Stack, gateway_env: dict[str, str]) -> str:
    photo = (SHARED_FACES / "demo" / "skimage_astronaut.jpg").read_bytes()
    return "\n".join([*deadline_rows(stack, gateway_env, photo), "", *flood_rows(stack, gateway_env, photo)])
