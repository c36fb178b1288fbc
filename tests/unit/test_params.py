import pytest

from gateway.errors import InvalidParameter
from gateway.params import DetectOptions, parse_detect_options


def test_defaults():
    assert parse_detect_options({}) == DetectOptions(50.0, 100, 0.0, True)


def test_values_are_parsed():
    options = parse_detect_options({"min_confidence": "2.5", "max_faces": "1000", "min_face_size": "12", "landmarks": "False"})
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
        ("min_face_size", "-3"),
        ("min_face_size", "Infinity"),
        ("landmarks", "maybe"),
        ("landmarks", "ｔｒｕｅ"),
    ],
)
def test_bad_values_name_the_parameter(name, value):
    with pytest.raises(InvalidParameter) as error:
        parse_detect_options({name: value})
    assert error.value.parameter == name
    assert error.value.to_json()["error"]["code"] == "invalid_parameter"
