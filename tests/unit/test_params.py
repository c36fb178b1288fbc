import pytest

from gateway.errors import InvalidParameter
from gateway.params import DetectOptions, parse_detect_options


def test_defaults():
    assert parse_detect_options({}) == DetectOptions(50.0, 100, 0.0, True)


def test_values_are_parsed():
    options = parse_detect_options(
        {"min_confidence": "2.5", "max_faces": "1000", "min_face_size": "12", "landmarks": "false"}
    )
    assert options == DetectOptions(2.5, 1000, 12.0, False)


@pytest.mark.parametrize(
    "name,value",
    [
        ("min_confidence", "abc"),
        ("min_confidence", "101"),
        ("min_confidence", "-1"),
        ("min_confidence", "nan"),
        ("min_confidence", "inf"),
        ("max_faces", "0"),
        ("max_faces", "1001"),
        ("max_faces", "2.5"),
        ("max_faces", "1e400"),
        ("max_faces", "1" * 400),
        ("max_faces", "1" * 5000),
        ("min_confidence", "1" * 400),
        ("min_confidence", "1e999"),
        ("min_face_size", "-3"),
        ("min_face_size", "Infinity"),
        ("landmarks", "maybe"),
        ("landmarks", "ｔｒｕｅ"),
        ("landmarks", "True"),
        ("min_confidence", " 50"),
        ("min_confidence", "1_0"),
        ("max_faces", "٣"),
        ("detail", "AUTO"),
        ("detail", "ultra"),
        ("detail", ""),
    ],
)
def test_bad_values_name_the_parameter(name, value):
    with pytest.raises(InvalidParameter) as error:
        parse_detect_options({name: value})
    assert error.value.parameter == name
    assert error.value.to_json()["error"]["code"] == "invalid_parameter"


@pytest.mark.parametrize("detail", ["standard", "auto", "high", "fast"])
def test_every_detail_is_accepted(detail):
    assert parse_detect_options({"detail": detail}).detail == detail


def test_option_defaults_are_the_table_defaults():
    from gateway.params import CROP, DETECT, MAX_CROP_SIDE, CropOptions, parse

    assert parse({}, DETECT) == DetectOptions().__dict__
    window = CropOptions().__dict__
    assert window.pop("max_side") == MAX_CROP_SIDE  # no parameter: /v1/crop's bound
    assert {name: value for name, value in parse({}, CROP).items() if name in CropOptions.__dataclass_fields__} == (
        window
    )


@pytest.mark.parametrize(
    "name,value,says",
    [
        ("max_faces", "2.5", "parameter 'max_faces' must be a whole number, got '2.5'"),
        ("min_confidence", "abc", "parameter 'min_confidence' must be a number, got 'abc'"),
        ("min_confidence", "101", "parameter 'min_confidence' must be between 0 and 100, got '101'"),
        ("max_faces", "1001", "parameter 'max_faces' must be between 1 and 1000, got '1001'"),
        ("landmarks", "yes", "parameter 'landmarks' must be true or false, got 'yes'"),
        ("detail", "ultra", "parameter 'detail' must be one of standard, auto, high, fast, got 'ultra'"),
    ],
)
def test_a_refusal_says_what_is_allowed_and_what_was_sent(name, value, says):
    with pytest.raises(InvalidParameter) as error:
        parse_detect_options({name: value})
    assert str(error.value) == says


@pytest.mark.parametrize(
    "name,value",
    [("max_faces", "9" * 41), ("min_confidence", "x" * 41), ("landmarks", "y" * 41), ("detail", "z" * 41)],
)
def test_a_refusal_quotes_at_most_40_characters_of_the_value(name, value):
    with pytest.raises(InvalidParameter) as error:
        parse_detect_options({name: value})
    assert str(error.value).endswith(f"got {value[:40]!r}")


def test_a_number_of_40_characters_is_read_and_one_of_41_refused():
    read = parse_detect_options({"min_face_size": "1." + "0" * 38})
    assert read.min_face_size == 1.0
    with pytest.raises(InvalidParameter, match="must be a number"):
        parse_detect_options({"min_face_size": "1." + "0" * 39})


@pytest.mark.parametrize(
    "raw,point",
    [("0.5x0.33", (0.5, 0.33)), ("0x1", (0.0, 1.0)), ("1x0", (1.0, 0.0)), ("0.25x0.75", (0.25, 0.75))],
)
def test_a_focal_point_is_x_then_y(raw, point):
    from gateway.request import crop_request

    gravity = crop_request({"gravity": raw}).window.gravity
    assert (gravity.follows, gravity.point) == ("point", point)


@pytest.mark.parametrize("raw", ["0.5x1.5", "-0.1x0.5", "0.5", "0.5x0.5x0.5", "x0.5", "0.5x", "nanx0.5", "auto"])
def test_a_bad_focal_point_is_refused_naming_gravity_and_its_forms(raw):
    from gateway.request import crop_request

    with pytest.raises(InvalidParameter) as error:
        crop_request({"gravity": raw})
    assert error.value.parameter == "gravity"
    assert str(error.value) == f"parameter 'gravity' must be face, center or XxY with X and Y in 0-1, got {raw!r}"
