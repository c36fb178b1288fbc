"""WSGI entry point for gunicorn: `gateway.wsgi:app`."""

from gateway.app import create_app

app = create_app()
