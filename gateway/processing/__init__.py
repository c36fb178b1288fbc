"""One request, one ordered list of steps, as imgproxy writes its pipeline: the typed request every
front door builds (gateway/request.py) runs through STEPS (gateway/processing/steps.py), then, for a
picture, FRAME_STEPS on each frame (gateway/processing/frames.py); gateway/processing/answer.py
writes the headers, the JSON and the encoded body."""
