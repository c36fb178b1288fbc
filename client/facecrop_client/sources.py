"""Where a batch's photos come from: a folder tree, a text file of paths or URLs, or an object-store
prefix (`s3://bucket/prefix`, through pyarrow's filesystems, which Ray reads natively too).

Each photo is an Item: its `name`, the path its outputs mirror (relative to the folder or the
prefix; for a URL, host/path), and its `origin`, what `read` opens. Sources are small and picklable:
a Ray task gets the source and its items' origins, and opens them on its own node.
"""

from __future__ import annotations

import functools
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple, Union
from urllib.parse import urlsplit

import urllib3

OBJECT_STORE_SCHEMES = ("s3://", "gs://")
READ_TIMEOUT_S = 60.0  # a listed URL's whole read (and each of its socket's waits)
MAX_READ_BYTES = 100 << 20  # a listed URL's or stored object's body: five times the service's default limit
READ_CHUNK_BYTES = 1 << 20
QUERY_UNSAFE = re.compile(r"[^A-Za-z0-9_=-]+")  # a query in an output's name: no dot (a suffix), slash or '?'
# a Mac-made zip's resource forks, a Synology NAS's thumbnails, a Windows disk's deleted files and its own
NO_PHOTOS_INSIDE = frozenset({"__MACOSX", "@eaDir", "$RECYCLE.BIN", "System Volume Information"})


class Item(NamedTuple):
    name: str  # what the outputs mirror, and the manifest's `source`
    origin: str  # what the source's `read` opens


def is_no_photo(name: str) -> bool:
    """A file or folder name that a tree's photos are never under: hidden ones (macOS's `._` twin of
    every file copied to a non-Mac disk, not an image: a batch failed once per photo; `.thumbnails`,
    a NAS's `.@__thumb`) and the folders in NO_PHOTOS_INSIDE."""
    return name.startswith(".") or name in NO_PHOTOS_INSIDE


@dataclass(frozen=True)
class Folder:
    """Every file of a tree, by its path under `root`, none under `leave_out` (a batch's output
    folder inside the tree: its outputs are no photos to do, and a second run would nest them) and
    none by a name `is_no_photo` leaves out; a linked folder is followed (`photos/2023 ->
    /mnt/disk/2023` was left out without a word), each folder once."""

    root: Path
    leave_out: Path | None = None

    def items(self, suffixes: frozenset[str]) -> list[Item]:
        found = []
        left_out = self.leave_out.resolve() if self.leave_out is not None else None
        seen = {self.root.resolve()}  # each folder once, however many links lead to it (a loop too)
        for directory, folders, files in os.walk(self.root, followlinks=True):
            kept = []
            for name in folders:
                real = (Path(directory) / name).resolve()
                if not is_no_photo(name) and real != left_out and real not in seen:
                    seen.add(real)
                    kept.append(name)
            folders[:] = kept
            for name in files:
                if not is_no_photo(name) and Path(name).suffix.lower() in suffixes:
                    relative = (Path(directory) / name).relative_to(self.root).as_posix()
                    found.append(Item(relative, relative))
        return sorted(found)

    def read(self, origin: str) -> bytes:
        return (self.root / origin).read_bytes()


class SourceError(ValueError):
    """A source that cannot be read as one (one line, naming it)."""


@dataclass(frozen=True)
class ListFile:
    """One path or http(s) URL per line (blank lines and `#` comments skipped; UTF-8, with or
    without a byte-order mark); relative paths are read from the list's folder. A path is taken
    where its suffix is a photo's (as in a folder); a URL always: the service judges what it
    serves. A URL's outputs mirror its host and path, and its query too where the path names no
    photo (`/photo?id=7`, whose query picks the photo)."""

    path: Path

    def items(self, suffixes: frozenset[str]) -> list[Item]:
        """Every photo listed once; SourceError where two lines would be one output (two URLs that
        differ only in their query, say)."""
        found: dict[str, tuple[int, Item]] = {}
        for number, line in enumerate(self.path.read_text(encoding="utf-8-sig").splitlines(), 1):
            origin = line.strip()
            if not origin or origin.startswith("#"):
                continue
            item = Item(self.name_of(origin, suffixes), origin)
            if not is_url(origin) and PurePosixPath(item.name).suffix.lower() not in suffixes:
                continue
            first, earlier = found.setdefault(item.name, (number, item))
            if earlier.origin != origin and (is_url(origin) or is_url(earlier.origin)):
                raise SourceError(
                    f"{self.path}: lines {first} and {number} would both be written as {item.name} "
                    f"({earlier.origin}, {origin}): list one of them"
                )
        return sorted(item for _, item in found.values())

    def name_of(self, origin: str, suffixes: frozenset[str]) -> str:
        """A URL's host and path (and query, where the path has none of `suffixes`); a path's place
        under the list's folder, else its whole path (two names are one file)."""
        if is_url(origin):
            parts = urlsplit(origin)
            name = f"{parts.hostname}{os.path.normpath(parts.path or '/')}".rstrip("/")
            if parts.query and PurePosixPath(name).suffix.lower() not in suffixes:
                name += "/" + QUERY_UNSAFE.sub("_", parts.query)  # a folder of its own: no suffix to replace
            return name
        folder = os.path.normpath(self.path.parent.absolute())
        full = os.path.normpath(os.path.join(folder, origin))
        inside = os.path.commonpath([folder, full]) == folder
        return Path(os.path.relpath(full, folder) if inside else full).as_posix().lstrip("/")

    def read(self, origin: str) -> bytes:
        if not is_url(origin):
            return (self.path.parent / origin).read_bytes()
        try:
            response = _http().request("GET", origin, timeout=READ_TIMEOUT_S, preload_content=False)
            try:
                if response.status != 200:
                    raise OSError(f"{origin}: HTTP {response.status}")
                return _body(response, origin)
            except BaseException:
                response.close()  # a body not read to its end: its connection is not reused
                raise
            finally:
                response.release_conn()
        except urllib3.exceptions.HTTPError as error:  # the body cut short, a read timed out
            raise OSError(f"{origin}: {error}") from error


@dataclass(frozen=True)
class ObjectStore:
    """Every object under a prefix (`s3://bucket/prefix`) but those `is_no_photo` leaves out (a key
    part by part, as a folder's path), through pyarrow's filesystems: the
    credentials, region and endpoint from the environment as the AWS tools read them
    (AWS_ENDPOINT_URL for an S3-compatible server), or as `?endpoint_override=...&scheme=http`."""

    url: str

    def filesystem(self) -> tuple[Any, str]:
        """The filesystem (one per process) and the prefix's path in it."""
        if self.url not in _FILESYSTEMS:
            from pyarrow import fs

            _FILESYSTEMS[self.url] = fs.FileSystem.from_uri(self.url)
        filesystem, prefix = _FILESYSTEMS[self.url]
        return filesystem, prefix.rstrip("/")

    def items(self, suffixes: frozenset[str]) -> list[Item]:
        from pyarrow import fs

        filesystem, prefix = self.filesystem()
        found = []
        for info in filesystem.get_file_info(fs.FileSelector(prefix, recursive=True)):
            relative = info.path[len(prefix) :].lstrip("/")
            key = PurePosixPath(relative)
            wanted = key.suffix.lower() in suffixes and not any(is_no_photo(part) for part in key.parts)
            if info.type == fs.FileType.File and wanted:
                found.append(Item(relative, relative))
        return sorted(found)

    def read(self, origin: str) -> bytes:
        filesystem, prefix = self.filesystem()
        with filesystem.open_input_file(f"{prefix}/{origin}") as stream:
            data = stream.read(MAX_READ_BYTES + 1)
        _check_size(len(data), origin)
        return data


Source = Union[Folder, ListFile, ObjectStore]
_FILESYSTEMS: dict[str, tuple[Any, str]] = {}


def is_url(origin: str) -> bool:
    return origin.startswith(("http://", "https://"))


def _body(response: urllib3.BaseHTTPResponse, url: str) -> bytes:
    """A URL's body, refused (OSError) past MAX_READ_BYTES or READ_TIMEOUT_S in all: a camera's endless
    stream (or a video) grew the batch's memory by 200 MB a second until the machine ran out."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    body = bytearray()
    while chunk := response.read1(READ_CHUNK_BYTES):  # what has come: a trickle is timed too
        body += chunk
        _check_size(len(body), url)
        if time.monotonic() > deadline:
            raise OSError(f"{url}: not read in {READ_TIMEOUT_S:g} s")
    return bytes(body)


def _check_size(size: int, origin: str) -> None:
    if size > MAX_READ_BYTES:
        raise OSError(f"{origin}: over {MAX_READ_BYTES >> 20} MiB, more than any photo the service takes")


@functools.cache
def _http() -> urllib3.PoolManager:
    """One pool per process, its reads retried three times (a connection refused or cut, a 503 that
    says Retry-After)."""
    return urllib3.PoolManager(retries=urllib3.Retry(3, backoff_factor=0.5))


def source_of(text: str, output: Path | None = None) -> Source:
    """The source an INPUT argument names (a folder's items leave out `output`, the batch's own);
    SourceError (one line) where it names none."""
    if text.startswith(OBJECT_STORE_SCHEMES):
        return ObjectStore(text)
    path = Path(text)
    if path.is_dir():
        if output is not None and output.resolve() == path.resolve():
            raise SourceError(f"{text}: the input folder is the output folder (its photos would pass for done)")
        return Folder(path, output)
    if path.is_file():
        return ListFile(path)
    raise SourceError(f"{text}: not a folder, a list of paths or URLs, or an s3:// prefix")
