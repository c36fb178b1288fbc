"""Pixels in and out, one module per concern: decode (the header checked, the pixels decoded, as
small as the work allows) and encode (every output format), formats (what is read, and the colour
facts of a header), normalise (pixels as the pipeline takes them), orientation, profiles (ICC
profiles written from primaries), colour (what goes out is sRGB), metadata (EXIF, as Cloudflare
keeps it), animation (frames in and out), geometry (trim, flip, rotate) and filters."""
