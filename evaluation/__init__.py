"""The evaluation kit the tests and the benchmarks share: the shared labeled photos and test
images (images), average precision (ap50), hidden-face judging (hidden), loopback origins
(origins), the files image libraries test with (corpus, sources), Triton's counters (service)."""
