"""WSGI entry point for gunicorn: `gateway.web.wsgi:app`."""

from gateway.web.app import create_app

app = create_app()
