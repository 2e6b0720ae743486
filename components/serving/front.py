"""The key-checking front door: nginx in front of vLLM, one config for the VM and GKE alike.

vLLM's own `--api-key` guards only `/v1`, `/v2` and `/inference`; `/invocations` chats without it, and
`/tokenize`, `/metrics`, `/pause`, ... answer anyone. So vLLM listens on 127.0.0.1 only, and the serving
port belongs to nginx, which refuses every path but `/health` without `Authorization: Bearer <key>`.

The key never enters this config (it is rendered by the stack and shown in plans): the front's entry
command reads it at start from a root-only file mounted read-only, checks its characters, and writes
the one `map` line nginx includes into a private tmpfs.
"""

from __future__ import annotations

from dataclasses import dataclass

# Where the front container finds its pieces (same paths on a VM and in a pod).
CONFIG_PATH = "/etc/tpu-vllm-front/nginx.conf"
KEY_FILE = "/run/secrets/tpu-vllm/api-key"
RUN_DIR = "/run/tpu-vllm-front"
# The API key is generated alphanumeric. Nothing here is a regex or nginx metacharacter, so the key can
# stand inside the quoted, anchored regex it is written into.
KEY_CHARACTERS = "A-Za-z0-9_-"
# Long generations stream for minutes; an idle stream must not be cut.
STREAM_TIMEOUT_SECONDS = 3600
# Inline images and audio arrive base64-encoded in the JSON body.
MAX_BODY = "64m"
# Connections one worker may hold: the benchmark's 64 keyed clients need ~2 each (client + upstream);
# the rest is room for keyless clients, each of which this config closes within seconds (below).
WORKER_CONNECTIONS = 8192
# Keyed requests one client address may have in flight (64 agents behind one NAT, with room), and keyless
# ones: a keyless request is answered at once, so more than a few at a time from one address is a flood.
KEYED_REQUESTS_PER_CLIENT = 512
KEYLESS_REQUESTS_PER_CLIENT = 16
# A client must send its whole request header within this (nginx's timer is not restarted by each read).
HEADER_TIMEOUT_SECONDS = 10
# A refused request's body is read and thrown away for at most this long in all, and no longer than
# LINGER_READ_SECONDS between two reads, so a keyless client trickling a body cannot hold a connection.
LINGER_SECONDS = 10
LINGER_READ_SECONDS = 5

# The one access-log format of the front and the metrics door: method, path without its query, status,
# sizes and timings. Never $request (the query string), $remote_user (Basic auth), $http_referer or any
# header: a client that sends the key the wrong way must not have it written to docker logs or Cloud Logging.
LOG_FORMAT_NAME = "tpu_vllm"
LOG_FORMAT = ("'$time_iso8601 $remote_addr \"$request_method $uri\" $status $request_length $bytes_sent '\n"
              "        '$request_time $upstream_status $upstream_response_time'")
# nginx appends the full request line and the Referer to every error it logs about a request, so only
# errors that are not about one request (crit and up: a worker dying, files it cannot open) are logged;
# a request's failure shows in its access-log line (status 502/413/429..., upstream status).
ERROR_LOG_LEVEL = "crit"
# The front's refusal (nginx `return 401` with this body); tests/fakes/vllm.py's FakeFront answers with it too.
UNAUTHORIZED_BODY = '{"error":"missing or wrong API key: send Authorization: Bearer <key>"}'


def logging_directives() -> str:
    """The http-level log lines both nginx configs share (indented for the http block)."""
    return (f"    log_format {LOG_FORMAT_NAME} {LOG_FORMAT};\n"
            f"    access_log /dev/stdout {LOG_FORMAT_NAME};\n")


@dataclass(frozen=True)
class FrontLayout:
    """Runtime paths inside the front's environment; the defaults are the container's."""

    config_path: str = CONFIG_PATH
    key_file: str = KEY_FILE
    run_dir: str = RUN_DIR

    @property
    def key_map(self) -> str:
        return f"{self.run_dir}/api-key.map"


def nginx_config(*, listen_port: int, upstream_port: int, layout: FrontLayout = FrontLayout()) -> str:
    """The whole nginx.conf. No secret: the key arrives through `layout.key_map` at start."""
    run = layout.run_dir
    return f"""# tpu-vllm front: every path but /health needs Authorization: Bearer <key>.
worker_processes 1;
# Room for every connection below, plus the files each may touch.
worker_rlimit_nofile {WORKER_CONNECTIONS * 2};
pid {run}/nginx.pid;
# crit: nginx writes a request's full line (query string included) and Referer into its error messages.
error_log stderr {ERROR_LOG_LEVEL};

events {{
    worker_connections {WORKER_CONNECTIONS};
}}

http {{
    server_tokens off;
    # A format without the query string, Basic-auth user, Referer or any header: nothing that can carry the key.
{logging_directives()}
    client_body_temp_path {run}/client_body;
    proxy_temp_path {run}/proxy;
    fastcgi_temp_path {run}/fastcgi;
    uwsgi_temp_path {run}/uwsgi;
    scgi_temp_path {run}/scgi;
    client_max_body_size {MAX_BODY};

    # Slow or idle clients: the whole header within {HEADER_TIMEOUT_SECONDS}s; a refused request's body thrown away
    # within {LINGER_SECONDS}s; a client that stops reading its answer dropped without a lingering close.
    client_header_timeout {HEADER_TIMEOUT_SECONDS}s;
    lingering_time {LINGER_SECONDS}s;
    lingering_timeout {LINGER_READ_SECONDS}s;
    reset_timedout_connection on;

    # 1 only for the exact header "Bearer <key>": an anchored, case-sensitive regex, because nginx matches
    # plain map strings case-insensitively. The line is written from the key file at start.
    map $http_authorization $tpu_vllm_authorized {{
        default 0;
        include {layout.key_map};
    }}

    # Requests in flight per client address; a keyless request counts against the small limit only, so
    # keyless floods from the keyed clients' own address cannot use up their share.
    map $tpu_vllm_authorized $tpu_vllm_keyless_client {{
        1 "";
        default $binary_remote_addr;
    }}
    limit_conn_zone $binary_remote_addr zone=tpu_vllm_per_client:1m;
    limit_conn_zone $tpu_vllm_keyless_client zone=tpu_vllm_keyless:1m;
    limit_conn_status 429;

    # WebSocket upgrades (vLLM's /v1/realtime) pass through with the key; every other request keeps the
    # upstream connection alive.
    map $http_upgrade $tpu_vllm_upstream_connection {{
        default upgrade;
        "" "";
    }}

    upstream tpu_vllm {{
        server 127.0.0.1:{upstream_port};
        keepalive 32;
    }}

    server {{
        listen {listen_port};
        limit_conn tpu_vllm_per_client {KEYED_REQUESTS_PER_CLIENT};
        limit_conn tpu_vllm_keyless {KEYLESS_REQUESTS_PER_CLIENT};

        # The probe path, and only it, is open: GET or HEAD without a body, its upstream URI pinned whatever
        # the client wrote, and the connection closed after it (a keyless client cannot keep one open).
        location = /health {{
            if ($request_method !~ ^(GET|HEAD)$) {{
                return 405;
            }}
            if ($http_transfer_encoding != "") {{
                return 400;
            }}
            if ($http_content_length !~ "^0?$") {{
                return 400;
            }}
            keepalive_timeout 0;
            proxy_pass http://tpu_vllm/health;
            proxy_pass_request_body off;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Content-Length "";
            proxy_max_temp_file_size 0;
        }}

        error_page 401 = @unauthorized;
        location @unauthorized {{
            default_type application/json;
            add_header WWW-Authenticate Bearer always;
            # Closed after the answer: a keyless client gets no idle connection to hold.
            keepalive_timeout 0;
            return 401 '{UNAUTHORIZED_BODY}';
        }}

        location / {{
            if ($tpu_vllm_authorized != 1) {{
                return 401;
            }}
            proxy_pass http://tpu_vllm;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $tpu_vllm_upstream_connection;
            proxy_set_header Host $host;
            # Server-sent events must reach the client token by token; request bodies stream to vLLM as they
            # arrive, so no body is ever written into the front's small working space.
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_cache off;
            proxy_read_timeout {STREAM_TIMEOUT_SECONDS}s;
            proxy_send_timeout {STREAM_TIMEOUT_SECONDS}s;
        }}
    }}
}}
"""


def entry_script(layout: FrontLayout = FrontLayout()) -> str:
    """POSIX sh run as the front's command: key file -> map line (private), then nginx in the foreground.

    `printf` is a shell builtin, so the key is never an argument of any process.
    """
    return f"""set -eu
umask 077
key="$(cat '{layout.key_file}')"
case "$key" in
  '' | *[!{KEY_CHARACTERS}]*)
    echo 'tpu-vllm front: the API key file {layout.key_file} is empty or has characters outside [{KEY_CHARACTERS}]' >&2
    exit 1 ;;
esac
mkdir -p '{layout.run_dir}'
printf '"~^Bearer %s$" 1;\\n' "$key" >'{layout.key_map}'
unset key
exec nginx -e stderr -c '{layout.config_path}' -g 'daemon off;'
"""


def entry_command(layout: FrontLayout = FrontLayout()) -> list[str]:
    """The container's command (argv): no secret, no file the stack must ship besides the config."""
    return ["sh", "-c", entry_script(layout)]
