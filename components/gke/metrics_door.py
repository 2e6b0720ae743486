"""The pod's metrics door: a second, tiny nginx that lets Managed Prometheus read vLLM's /metrics.

vLLM listens on 127.0.0.1 only and the front wants the API key on every path but /health, so a collector
scraping the pod's IP reaches neither. This door answers GET /metrics from vLLM on its own port and 404s
everything else, so the queue metric the HPA scales on leaves the pod without opening the API. The port is
on no Service; only the collector (PodMonitoring) reads it.
"""

from __future__ import annotations

from components.serving import front
from components.settings.facts import GKE_METRICS_PORT as METRICS_PORT

METRICS_PORT_NAME = "metrics"
METRICS_PATH = "/metrics"
CONFIG_KEY = "metrics.conf"
# Scratch space inside the container (nginx's official image runs as root with a writable /tmp).
RUN_DIR = "/tmp/tpu-vllm-metrics"
# The front's standard, sized for a door one collector reads every few seconds. Connections one worker may
# hold: idle ones are not counted by limit_conn (nginx counts a connection only once its request header is
# read), so room for a flood of them is what keeps a scrape from another address served; each closes within
# HEADER_TIMEOUT_SECONDS.
WORKER_CONNECTIONS = 4096
HEADER_TIMEOUT_SECONDS = 5
# The collector may keep its connection between scrapes this long; send_timeout drops a client that stops
# reading its answer; the upstream (vLLM on loopback) answers /metrics in milliseconds.
KEEPALIVE_SECONDS = 15
SEND_TIMEOUT_SECONDS = 10
UPSTREAM_TIMEOUT_SECONDS = 10
# Scrapes one address may have in flight at once (a collector makes one; its retries and a second replica fit).
REQUESTS_PER_CLIENT = 4


def nginx_config(*, listen_port: int = METRICS_PORT, upstream_port: int, run_dir: str = RUN_DIR) -> str:
    run = run_dir
    return f"""# tpu-vllm metrics door: GET {METRICS_PATH} from vLLM, nothing else.
worker_processes 1;
pid {run}/nginx.pid;
# As the front's: nginx's request errors carry the request line and Referer.
error_log stderr {front.ERROR_LOG_LEVEL};

worker_rlimit_nofile {WORKER_CONNECTIONS * 2};

events {{
    worker_connections {WORKER_CONNECTIONS};
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

    # Slow or idle clients are dropped: the whole header within {HEADER_TIMEOUT_SECONDS}s, a body read or an answer
    # written with no progress for the timeouts below, a kept connection after {KEEPALIVE_SECONDS}s idle.
    client_header_timeout {HEADER_TIMEOUT_SECONDS}s;
    client_body_timeout {HEADER_TIMEOUT_SECONDS}s;
    keepalive_timeout {KEEPALIVE_SECONDS}s;
    send_timeout {SEND_TIMEOUT_SECONDS}s;
    lingering_time {HEADER_TIMEOUT_SECONDS}s;
    reset_timedout_connection on;
    proxy_connect_timeout {UPSTREAM_TIMEOUT_SECONDS}s;
    proxy_read_timeout {UPSTREAM_TIMEOUT_SECONDS}s;
    proxy_send_timeout {UPSTREAM_TIMEOUT_SECONDS}s;

    # Requests in flight per client address: one address cannot take every upstream connection.
    limit_conn_zone $binary_remote_addr zone=tpu_vllm_metrics_per_client:1m;
    limit_conn_status 429;

    server {{
        listen {listen_port};
        limit_conn tpu_vllm_metrics_per_client {REQUESTS_PER_CLIENT};

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
