"""Serving by URL: GET /cdn-cgi/image/<options>/<source>, Cloudflare Images' grammar, for `<img src>`
behind a CDN. options (the grammar), signing (signed URLs), sources (where a source is read from),
fetch (HTTP sources, SSRF-safe), caching (ETag, Cache-Control, format negotiation) and views (the
blueprint, wiring them to the /v1/crop pipeline)."""
