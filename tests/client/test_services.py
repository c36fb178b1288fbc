"""Several service URLs as one client (`--url a,b`): calls spread in turn, a service unreachable,
unavailable or not facecrop's skipped for the next, facecrop's refusal not sent elsewhere."""

import pytest

from facecrop_client.client import Client, FacecropError, Services, connect
from tests.support import ONE_FACE, json_answer, refusal, scripted_service


class Stub:
    def __init__(self, name: str, down: bool = False, refuses: bool = False, unavailable: bool = False):
        self.name, self.down, self.refuses, self.unavailable, self.calls = name, down, refuses, unavailable, 0

    def detect(self, image, **params):
        self.calls += 1
        if self.down:
            raise FacecropError(0, "connection_error", f"cannot reach {self.name}")
        if self.refuses:
            raise FacecropError(415, "unsupported_media_type", "not an image")
        if self.unavailable:
            raise FacecropError(503, "backend_unavailable", f"{self.name}'s Triton is down")
        return self.name

    def check(self):
        if self.down:
            raise FacecropError(0, "connection_error", f"cannot reach {self.name}")


def test_calls_spread_over_the_services_in_turn():
    services = Services([Stub("a"), Stub("b"), Stub("c")])
    assert [services.detect(b"x") for _ in range(6)] == ["a", "b", "c", "a", "b", "c"]


def test_an_unreachable_service_is_skipped_for_the_next():
    a, b = Stub("a", down=True), Stub("b")
    services = Services([a, b])
    assert [services.detect(b"x") for _ in range(4)] == ["b"] * 4
    assert a.calls == 2 and b.calls == 4  # a tried on its turns only
    services.check()  # one answers: usable


def test_a_service_unavailable_past_its_retries_is_skipped_for_the_next():
    """One host's Triton down (503 after the client's retries): its photos go to the other host."""
    a, b = Stub("a", unavailable=True), Stub("b")
    assert [Services([a, b]).detect(b"x") for _ in range(2)] == ["b", "b"]
    with pytest.raises(FacecropError, match="b's Triton is down"):
        Services([Stub("a", unavailable=True), Stub("b", unavailable=True)]).detect(b"x")


def test_a_refusal_is_not_sent_elsewhere_and_all_down_is_a_connection_error():
    a, b = Stub("a", refuses=True), Stub("b")
    with pytest.raises(FacecropError, match="415"):
        Services([a, b]).detect(b"x")
    assert b.calls == 0
    down = Services([Stub("a", down=True), Stub("b", down=True)])
    with pytest.raises(FacecropError) as error:
        down.detect(b"x")
    assert error.value.code == "connection_error"
    with pytest.raises(FacecropError, match="cannot reach a; cannot reach b"):
        down.check()


def test_connect_takes_one_url_or_several():
    assert isinstance(connect("http://127.0.0.1:8080"), Client)
    several = connect("http://10.0.0.1:8080, http://10.0.0.2:8080")
    assert isinstance(several, Services) and several.base_url == "http://10.0.0.1:8080, http://10.0.0.2:8080"


def test_an_answer_that_is_not_facecrops_is_tried_on_the_next_service():
    """One address behind a sign-in page (200, HTML), one another application's (its own 500 page), one
    an older gateway without the route (facecrop's 404): each photo is answered by the facecrop after
    them, each of the others asked once from its turn on; with no facecrop among them, a call fails."""
    sign_in = (200, {"Content-Type": "text/html"}, b"<html>Sign in to the guest network</html>")
    other_app = (500, {"Content-Type": "text/html"}, b"<html>Whitelabel Error Page</html>")
    with (
        scripted_service(lambda turn: sign_in) as login,
        scripted_service(lambda turn: other_app) as other,
        scripted_service(lambda turn: refusal(404, "not_found")) as older,
        scripted_service(lambda turn: json_answer(200, ONE_FACE)) as facecrop,
    ):
        services = connect(",".join(s.url for s in (login, other, older, facecrop)), timeout=10)
        assert [len(services.detect(b"photo").faces) for _ in range(4)] == [1, 1, 1, 1]
        assert (login.posts, other.posts, older.posts, facecrop.posts) == (1, 2, 3, 4)
        with pytest.raises(FacecropError) as error:
            connect(f"{other.url},{login.url}", timeout=10).detect(b"photo")
    assert (error.value.status, error.value.code) == (200, "unreadable_answer")  # the last one's
