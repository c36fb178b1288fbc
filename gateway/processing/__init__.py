"""One request, one ordered list of steps, as imgproxy writes its pipeline: the typed request every
front door builds (gateway/request.py) runs through STEPS (gateway/processing/steps.py), which
fill in its Work, then frame and plan settle the answer's picture (Planned); for a picture, each
frame is decoded, turned and cut, then runs FRAME_STEPS (gateway/processing/frames.py);
gateway/processing/answer.py writes the headers, the JSON and the encoded body."""
