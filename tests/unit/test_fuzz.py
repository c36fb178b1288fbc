"""Property-based fuzzing of the decoder entry and the parameter parsers: only API errors escape."""

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.errors import ApiError, InvalidParameter
from gateway.params import CROP_PARAMETERS, DETECT_PARAMETERS
from gateway.request import crop_request
from tests.support import MAGIC, clean_images, decode


@settings(max_examples=400, deadline=None)
@given(
    prefix=st.deferred(lambda: st.sampled_from(MAGIC + [d[:64] for d in clean_images().values()])),
    body=st.binary(max_size=4096),
)
def test_decoder_raises_only_api_errors(prefix, body):
    try:
        image = decode(prefix + body, 4_000_000)
    except ApiError as error:
        assert error.status in (400, 413, 415)
    else:
        assert image.pixels.ndim == 3 and image.pixels.shape[2] == 3


@settings(max_examples=400, deadline=None)
@given(
    values=st.dictionaries(
        st.sampled_from(sorted(DETECT_PARAMETERS | CROP_PARAMETERS)),
        st.one_of(
            st.text(max_size=30), st.from_regex(r"-?[0-9]{1,600}(\.[0-9]{1,5})?([eE]-?[0-9]{1,4})?", fullmatch=True)
        ),
        max_size=6,
    )
)
def test_parsers_raise_only_invalid_parameter(values):
    try:
        crop_request(values)
    except InvalidParameter as error:
        assert error.parameter in values
