"""Framing: where a crop window goes and what it keeps. Cloudflare's fits and the face-aware window
(crop.py), where a window too small for every face goes (placement.py), and the most salient window
where there are no faces (saliency.py, gravity=auto)."""
