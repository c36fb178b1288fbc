"""A batch's sources as users give them: lists written by hand or by spreadsheets, URLs that misbehave
(served on loopback by evaluation/origins.py), objects too large to be photos."""

import json
import re
import threading
from pathlib import Path

import pytest
from tqdm import tqdm

from evaluation.origins import hostile_origin, photo_origin
from facecrop_client import sources
from facecrop_client.batch import (
    IMAGE_SUFFIXES,
    DetectSink,
    OutputError,
    PictureSink,
    Summary,
    ledger_of,
    manifest_path,
    todo_of,
    videos_to_do,
)
from facecrop_client.sources import Folder, Item, ListFile, ObjectStore, SourceError, source_of


def listed(tmp_path: Path, text: str, encoding: str = "utf-8") -> list[Item]:
    (tmp_path / "photos.txt").write_bytes(text.encode(encoding))
    return ListFile(tmp_path / "photos.txt").items(IMAGE_SUFFIXES)


def test_a_list_saved_with_a_byte_order_mark_and_windows_line_ends_reads_its_first_line_too(tmp_path):
    """Notepad and Excel's "CSV UTF-8" begin the file with a byte-order mark: the first URL was read as
    a path named "\\ufeffhttp:/..." and failed."""
    items = listed(tmp_path, "https://cdn.example.com/a.jpg\r\nb.png\r\n", "utf-8-sig")
    assert items == [Item("b.png", "b.png"), Item("cdn.example.com/a.jpg", "https://cdn.example.com/a.jpg")]


def test_a_url_whose_query_picks_the_photo_is_named_by_its_query_and_each_is_its_own_output(tmp_path):
    """`/photo?id=1` and `/photo?id=2` are two photos: both listed (they were left out as having no
    photo's suffix), with outputs of their own; a URL naming a photo keeps its name whatever its
    query (a signed URL's signature changes between runs, its outputs stay done)."""
    items = listed(
        tmp_path,
        "https://h.example/photo?id=1\nhttps://h.example/photo?id=2\nhttps://h.example/img.php?id=3&s=a.b/c\n"
        "https://h.example/a.jpg?X-Amz-Signature=abc\nhttps://h.example/p/200\n",
    )
    names = [item.name for item in items]
    assert names == [
        "h.example/a.jpg",
        "h.example/img.php/id=3_s=a_b_c",
        "h.example/p/200",
        "h.example/photo/id=1",
        "h.example/photo/id=2",
    ]
    targets = [PictureSink(tmp_path / "out", None, "crop").target(name) for name in names]
    assert len(set(targets)) == len(targets), targets
    assert targets[1] == tmp_path / "out" / "h.example" / "img.php" / "id=3_s=a_b_c.jpg"


def test_two_urls_that_would_be_one_output_are_refused_naming_their_lines(tmp_path):
    """Two URLs with one host and path (the query not in the name) were read as one: the second
    dropped without a word."""
    with pytest.raises(SourceError) as refused:
        listed(tmp_path, "# two sizes\nhttps://h.example/b.jpg?w=100\n\nhttps://h.example/b.jpg?w=200\n")
    assert str(refused.value) == (
        f"{tmp_path / 'photos.txt'}: lines 2 and 4 would both be written as h.example/b.jpg "
        "(https://h.example/b.jpg?w=100, https://h.example/b.jpg?w=200): list one of them"
    )
    for lines in ("h.example/b.jpg\nhttps://h.example/b.jpg\n", "https://h.example/b.jpg\nh.example/b.jpg\n"):
        with pytest.raises(SourceError, match=r"lines 1 and 2 would both be written as h\.example/b\.jpg "):
            listed(tmp_path, lines)  # a relative path and a URL, in either order


def test_paths_are_taken_as_a_folder_takes_them_and_one_file_named_twice_is_one_photo(tmp_path):
    items = listed(
        tmp_path, "x.jpg\n./x.jpg\nsub/../x.jpg\nnotes.txt\n.DS_Store\nclip.mp4\nY.HEIC\nhttps://h.example/x.jpg\n"
    )
    assert items == [
        Item("Y.HEIC", "Y.HEIC"),
        Item("h.example/x.jpg", "https://h.example/x.jpg"),
        Item("x.jpg", "x.jpg"),
    ]


def read_from(source, origin: str, stop) -> OSError:
    """`source.read(origin)`'s refusal, read on this thread; the origin stopped after 30 s at most,
    so that a read that goes on ends (and fails the test) rather than hanging it."""
    timer = threading.Timer(30, stop.set)
    timer.start()
    try:
        with pytest.raises(OSError) as refused:
            source.read(origin)
    finally:
        timer.cancel()
        stop.set()
    return refused.value


def test_a_listed_url_that_never_ends_is_refused_at_a_bound_not_read_into_memory(tmp_path, monkeypatch):
    """A camera's endless stream (or a video) listed as a photo grew the batch's memory by ~200 MB a
    second, without end; one that trickles was read for ever. Both fail alone now (read_error)."""
    monkeypatch.setattr(sources, "MAX_READ_BYTES", 3 << 20)
    with hostile_origin(b"") as (base, state):
        error = read_from(ListFile(tmp_path / "photos.txt"), f"{base}endless", state.stop)
    assert str(error) == f"{base}endless: over 3 MiB, more than any photo the service takes"
    monkeypatch.setattr(sources, "READ_TIMEOUT_S", 0.5)
    with hostile_origin(b"") as (base, state):
        error = read_from(ListFile(tmp_path / "photos.txt"), f"{base}trickle-close", state.stop)
    assert str(error) == f"{base}trickle-close: not read in 0.5 s"


def test_a_listed_url_cut_short_is_a_read_error_naming_it(tmp_path):
    with hostile_origin(b"") as (base, state):
        error = read_from(ListFile(tmp_path / "photos.txt"), f"{base}cut-body", state.stop)
    assert str(error).startswith(f"{base}cut-body: ") and "IncompleteRead" in str(error)


def test_a_stored_object_larger_than_any_photo_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "MAX_READ_BYTES", 1000)
    (tmp_path / "small.jpg").write_bytes(b"j" * 1000)
    (tmp_path / "video.jpg").write_bytes(b"v" * 1001)
    store = ObjectStore(f"file://{tmp_path}")
    assert store.read("small.jpg") == b"j" * 1000
    with pytest.raises(OSError, match=r"^video\.jpg: over 0 MiB"):
        store.read("video.jpg")


def tree(root: Path, names: list[str]) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(name.encode())


NAMES = ["b.jpg", "a/c.PNG", "a/notes.txt", "a/d/e.heic", "out/x.jpg", "Xmas.jpg", "_DSC0001.JPG"]
# What a tree holds besides its photos: macOS's AppleDouble twin of every file copied to a non-Mac disk
# (not an image: each failed as unsupported), a Mac-made zip's, a NAS's and a desktop's thumbnails, a
# Windows disk's recycle bin and system folder (a drive's root given as the tree).
NO_PHOTOS = [
    "._b.jpg",
    "a/._c.PNG",
    "__MACOSX/._b.jpg",
    "__MACOSX/a/c.PNG",
    "a/@eaDir/c.PNG/SYNOPHOTO_THUMB_XL.jpg",
    ".@__thumb/b.jpg",
    "a/.thumbnails/e.jpg",
    ".hidden.webp",
    "$RECYCLE.BIN/S-1-5-21/$R0A1B2C.jpg",
    "System Volume Information/b.jpg",
]


def test_a_folder_is_its_photos_by_path_under_it_without_the_output_inside_it_or_what_is_no_photo(tmp_path):
    tree(tmp_path, NAMES + NO_PHOTOS)
    names = ["a/c.PNG", "a/d/e.heic", "Xmas.jpg", "_DSC0001.JPG", "b.jpg"]
    assert Folder(tmp_path, tmp_path / "out").items(IMAGE_SUFFIXES) == [Item(name, name) for name in sorted(names)]
    assert "out/x.jpg" in [item.name for item in Folder(tmp_path).items(IMAGE_SUFFIXES)]
    assert Folder(tmp_path).read("a/d/e.heic") == b"a/d/e.heic"


def test_a_linked_folder_is_followed_once_and_a_loop_ends(tmp_path):
    """`photos/2023 -> /mnt/disk/2023`: its photos are the tree's (they were left out without a
    word); a link back up the tree is not walked round."""
    tree(tmp_path / "disk", ["2023/a.jpg"])
    tree(tmp_path / "photos", ["b.jpg"])
    (tmp_path / "photos" / "2023").symlink_to(tmp_path / "disk" / "2023")
    (tmp_path / "photos" / "again").symlink_to(tmp_path / "photos")
    (tmp_path / "photos" / "twice").symlink_to(tmp_path / "disk" / "2023")
    names = [item.name for item in Folder(tmp_path / "photos").items(IMAGE_SUFFIXES)]
    assert names == ["2023/a.jpg", "b.jpg"], names


def test_two_photos_one_of_whose_outputs_may_be_the_others_are_refused_not_overwritten(tmp_path):
    """x.avif's picture comes back a WebP where AVIF cannot be had, the name x.webp's takes: the
    second by name is refused (same_output), as x.jpeg's is beside x.jpg's, not written over the
    first's or passed for done once the first's exists."""
    tree(tmp_path / "in", ["x.avif", "x.webp", "y.avif"])
    sink = PictureSink(tmp_path / "out", None, "anonymize")
    todo_of(Folder(tmp_path / "in"), sink)
    assert sink.written_by == {"x.webp": "x.avif"}
    tree(tmp_path / "out", ["x.webp"])  # x.avif's, come back a WebP
    assert not sink.is_done("x.webp") and sink.is_done("x.avif")


def test_a_first_run_refuses_an_output_that_already_holds_its_outputs(tmp_path):
    """Copies of the photos already in the output folder were taken as done and listed as
    anonymized in the manifest; where a run began before (its manifest is there), an output it
    wrote but did not list is listed as done, as before."""
    tree(tmp_path / "photos", ["kid.jpg", "b.jpg", "c/d.jpg"])
    tree(tmp_path / "share", ["kid.jpg", "c/d.jpg"])
    sink = PictureSink(tmp_path / "share", None, "anonymize")
    images, todo = todo_of(Folder(tmp_path / "photos"), sink)
    assert [item.name for item in todo] == ["b.jpg"]
    run = (sink, images, todo, Summary(total=3), tmp_path / "failures.jsonl", tqdm(disable=True))
    said = re.escape("already holds the outputs of c/d.jpg, kid.jpg, and no run wrote them")
    with pytest.raises(OutputError, match=said), ledger_of(*run):
        pass
    assert not manifest_path(sink.output).exists()
    manifest_path(sink.output).write_text("")
    with ledger_of(*run):
        pass
    rows = [json.loads(line) for line in manifest_path(sink.output).read_text().splitlines()]
    assert [(row["source"], row["status"]) for row in rows] == [("c/d.jpg", "done"), ("kid.jpg", "done")]


@pytest.mark.parametrize("held", [b"a.jpg\nb.jpg", b'{"source": "a.jpg"}\n{"path": "b.jpg"', b"\x89PNG\r\n\x1a\n..."])
def test_a_detect_output_that_is_not_a_batch_s_is_refused_untouched(tmp_path, held):
    """`facecrop batch photos photos.txt --mode detect`, the list given as the output: its last line
    was cut off as a crash's half line, then a traceback; now one line, and the file as it was."""
    output = tmp_path / "photos.txt"
    output.write_bytes(held)
    with pytest.raises(OutputError, match="holds lines that are not a batch's"):
        DetectSink(output).load([])
    assert output.read_bytes() == held


def test_an_apng_and_an_avif_sequence_named_as_such_are_photos_that_keep_their_format(tmp_path):
    """`.apng` and `.avifs` (the names an APNG and an AVIF sequence may have) are picked up and go
    out as PNG and AVIF, animations kept, as `.png` and `.avif` files."""
    tree(tmp_path, ["a.apng", "b.avifs", "c.txt"])
    assert [item.name for item in Folder(tmp_path).items(IMAGE_SUFFIXES)] == ["a.apng", "b.avifs"]
    sink = PictureSink(tmp_path / "out", None, "anonymize")
    assert (sink.format_of("a.apng"), sink.format_of("b.avifs")) == ("png", "avif")
    assert sink.target("a.apng") == tmp_path / "out" / "a.png"


def test_an_object_store_prefix_is_its_photos_by_key_under_it(tmp_path):
    tree(tmp_path / "bucket" / "photos_X", NAMES + NO_PHOTOS)
    tree(tmp_path / "bucket", ["elsewhere.jpg", "photos/b.jpg"])
    store = ObjectStore(f"file://{tmp_path}/bucket/photos_X/")
    names = sorted(["a/c.PNG", "a/d/e.heic", "Xmas.jpg", "_DSC0001.JPG", "b.jpg", "out/x.jpg"])
    assert store.items(IMAGE_SUFFIXES) == [Item(name, name) for name in names]
    assert store.read("a/d/e.heic") == b"a/d/e.heic"


def test_an_input_names_a_folder_a_list_or_a_store_else_it_is_one_line(tmp_path):
    tree(tmp_path, ["photos/a.jpg", "list.txt"])
    assert source_of(str(tmp_path / "photos"), tmp_path / "out") == Folder(tmp_path / "photos", tmp_path / "out")
    assert source_of(str(tmp_path / "list.txt")) == ListFile(tmp_path / "list.txt")
    assert source_of("s3://bucket/prefix") == ObjectStore("s3://bucket/prefix")
    assert source_of("gs://bucket/prefix") == ObjectStore("gs://bucket/prefix")
    with pytest.raises(SourceError, match=r"photos: the input folder is the output folder"):
        source_of(str(tmp_path / "photos"), tmp_path / "photos" / ".." / "photos")
    with pytest.raises(SourceError, match=r"nowhere: not a folder, a list of paths or URLs, or an s3:// prefix"):
        source_of(str(tmp_path / "nowhere"))


def test_a_lists_paths_and_urls_are_named_and_read_where_they_are(tmp_path):
    tree(tmp_path, ["list/here/a.jpg", "list/Xmas/a.jpg", "elsewhere/b.jpg"])
    text = (
        "# a comment about b.jpg\n  # an indented one: https://h.example/old.jpg\n\nhere/a.jpg\nXmas/a.jpg\n"
        f"{tmp_path}/elsewhere/b.jpg\nhttps://h.example/\nhttps://h.example/dir/c.jpg/\nhttps://h.example/IMG_X\n"
        "https://other.example\n"
    )
    (tmp_path / "list" / "photos.txt").write_text(text)
    source = ListFile(tmp_path / "list" / "photos.txt")
    names = [item.name for item in source.items(IMAGE_SUFFIXES)]
    assert names == sorted(
        [
            "here/a.jpg",
            "Xmas/a.jpg",
            f"{tmp_path}/elsewhere/b.jpg".lstrip("/"),
            "h.example",
            "h.example/dir/c.jpg",
            "h.example/IMG_X",
            "other.example",
        ]
    )
    assert source.read("here/a.jpg") == b"list/here/a.jpg"  # from the list's folder, not the working one
    with photo_origin(tmp_path) as (base, _):
        assert source.read(f"{base}elsewhere/b.jpg") == b"elsewhere/b.jpg"
        with pytest.raises(OSError, match=rf"^{base}missing\.jpg: HTTP 404$"):
            source.read(f"{base}missing.jpg")


def test_a_listed_url_whose_server_hangs_up_is_tried_four_times_then_refused(tmp_path):
    """Three retries (with backoff) of a read that fails, counted at the origin; then a read_error."""
    sources._http.cache_clear()  # the pool as this process's first read makes it
    with hostile_origin(b"") as (base, state):
        error = read_from(ListFile(tmp_path / "photos.txt"), f"{base}dead", state.stop)
    assert str(error).startswith(f"{base}dead: ") and state.seen["/dead"] == 4


def test_a_listed_url_whose_server_says_nothing_is_refused_after_the_read_timeout(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "READ_TIMEOUT_S", 0.5)
    with hostile_origin(b"a photo, after 8 s") as (base, state):
        error = read_from(ListFile(tmp_path / "photos.txt"), f"{base}late", state.stop)
    assert "Read timed out" in str(error), error


def test_the_videos_to_do_are_those_of_the_tree_not_yet_written(tmp_path):
    """batch --mode anonymize's videos: every video suffix in any case, in subfolders too, none
    already in the output (a re-run continues), none under the output inside the tree, no photos."""
    tree = tmp_path
    for name in ("a.mp4", "b.MOV", "c/d.webm", "c/e.mkv", "f.jpg", "g.txt", "out/h.mp4"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes(b"x")
    (tree / "out" / "c").mkdir(parents=True)
    (tree / "out" / "c" / "d.webm").write_bytes(b"done")
    assert sorted(videos_to_do(tree, tree / "out")) == ["a.mp4", "b.MOV", "c/e.mkv"]
