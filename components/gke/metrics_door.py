"""The pod's metrics door: a second, tiny nginx that lets Managed Prometheus read vLLM's /metrics.

vLLM listens on 127.0.0.1 only and the front wants the API key on every path but /health, so a collector
scraping the pod's IP reaches neither. This door answers GET /metrics from vLLM on its own port and 404s
everything else, so the queue metric the HPA scales on leaves the pod without opening the API. The port is
on no Service; only the collector (PodMonitoring) reads it.
"""

from __future__ import annotations

from components import front
from components.settings.facts import GKE_METRICS_PORT as METRICS_PORT

METRICS_PORT_NAME = "metrics"
METRICS_PATH = "/metrics"
CONFIG_KEY = "metrics.conf"
# Scratch space inside the container (nginx's official image runs as root with a writable /tmp).
RUN_DIR = "/tmp/tpu-vllm-metrics"


def nginx_config(*, listen_port: int = METRICS_PORT, upstream_port: int, run_dir: str = RUN_DIR) -> str:
    run = run_dir
    return f"""# tpu-vllm metrics door: GET {METRICS_PATH} from vLLM, nothing else.
worker_processes 1;
pid {run}/nginx.pid;
# As the front's: nginx's request errors carry the request line and Referer.
error_log stderr {front.ERROR_LOG_LEVEL};

events {{
    worker_connections 64;
}}

http {{
    server_tokens off;
    # The front's format: no query string, Basic-auth user, Referer or header.
{front.logging_directives()}    client_body_temp_path {run}/client_body;
    proxy_temp_path {run}/proxy;
    fastcgi_temp_path {run}/fastcgi;
    uwsgi_temp_path {run}/uwsgi;
    scgi_temp_path {run}/scgi;
    client_max_body_size 1k;

    server {{
        listen {listen_port};

        location = {METRICS_PATH} {{
            limit_except GET {{
                deny all;
            }}
            proxy_pass http://127.0.0.1:{upstream_port}{METRICS_PATH};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}

        location / {{
            return 404;
        }}
    }}
}}
"""


def command(config_path: str, run_dir: str = RUN_DIR) -> list[str]:
    return ["sh", "-c", f"mkdir -p '{run_dir}' && exec nginx -e stderr -c '{config_path}' -g 'daemon off;'"]
