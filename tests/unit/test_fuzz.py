"""Property-based fuzzing of the decoder entry and the parameter parsers: only API errors escape."""

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.errors import ApiError, InvalidParameter
from gateway.params import ANONYMIZE_PARAMETERS, CROP_PARAMETERS, DETECT_PARAMETERS
from gateway.request import anonymize_request, crop_request
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
        st.sampled_from(sorted(DETECT_PARAMETERS | CROP_PARAMETERS | ANONYMIZE_PARAMETERS)),
        st.one_of(
            st.text(max_size=30), st.from_regex(r"-?[0-9]{1,600}(\.[0-9]{1,5})?([eE]-?[0-9]{1,4})?", fullmatch=True)
        ),
        max_size=6,
    )
)
def test_parsers_raise_only_invalid_parameter(values):
    endpoints = ((crop_request, DETECT_PARAMETERS | CROP_PARAMETERS), (anonymize_request, ANONYMIZE_PARAMETERS))
    for endpoint, names in endpoints:
        given_here = {name: value for name, value in values.items() if name in names}
        try:
            endpoint(given_here)
        except InvalidParameter as error:
            assert error.parameter in given_here
