"""facecrop gateway: every front door (api.py, url/) parses into one typed request (request.py) that
processing/ answers: the header read once, then its steps (load, detect: decode -> preprocess ->
infer on Triton -> postprocess and fusion, trim, frame, plan), then each frame's (decode, turn, cut,
hide, colour, filters, pad), then encoding; responses.py makes the answer an HTTP response."""
