"""Image work beside the pipeline's stages (gateway/decode.py, gateway/encode.py), one module per
concern: formats (what is read, and the colour facts of a header), profiles (ICC profiles written
from primaries), colour (what goes out is sRGB), metadata (EXIF, as Cloudflare keeps it) and
animation (frames in and out)."""
