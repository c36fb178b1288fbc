"""gunicorn settings for the gateway (environment variables, defaults in brackets).

FACECROP_BIND     address to listen on [127.0.0.1:8080]; the container sets 0.0.0.0:8080
FACECROP_WORKERS  worker processes [2]
FACECROP_THREADS  threads per worker (gthread) [4]
"""

import os

wsgi_app = "gateway.wsgi:app"
bind = os.environ.get("FACECROP_BIND", "127.0.0.1:8080")
workers = int(os.environ.get("FACECROP_WORKERS", "2"))
worker_class = "gthread"
threads = int(os.environ.get("FACECROP_THREADS", "4"))
timeout = 30
graceful_timeout = 10
accesslog = "-"
# gunicorn's runtime control socket is not used; it would be a file under $HOME.
control_socket_disable = True
