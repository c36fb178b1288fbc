"""A batch's sources as users give them: lists written by hand or by spreadsheets, URLs that misbehave
(served on loopback by evaluation/origins.py), objects too large to be photos."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evaluation.origins import hostile_origin
from facecrop_client import sources
from facecrop_client.batch import IMAGE_SUFFIXES, PictureSink
from facecrop_client.sources import Item, ListFile, ObjectStore, SourceError


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
    targets = [PictureSink(tmp_path / "out", None).target(name) for name in names]
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
    """`source.read(origin)`'s refusal; the origin stopped after 30 s at most, so that a read that
    goes on fails the test rather than hanging it."""
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(source.read, origin)
        try:
            error = reading.exception(timeout=30)
        finally:
            stop.set()
    assert isinstance(error, OSError), error
    return error


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
