"""The web wing: the service over HTTP. The app factory (app.py) wires the front doors (the upload
API, api.py; the URL form, url/) to processing, with what every door shares: admission, API keys and
CORS (access.py), request ids, logs and metrics (observe.py), the uploads kept in memory
(uploads.py), the answer as a response (responses.py), health, the demo page and the API's
document (health.py, pages.py, openapi.py), and gunicorn's settings (gunicorn.conf.py, wsgi.py)."""
