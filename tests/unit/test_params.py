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
