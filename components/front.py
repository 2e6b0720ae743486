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

# The official image (a well-kept, small proxy); pin a tag or digest for repeatable boots.
DEFAULT_IMAGE = "nginx:1.28.0-alpine"
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
pid {run}/nginx.pid;
error_log stderr warn;

events {{
    worker_connections 1024;
}}

http {{
    server_tokens off;
    # No request line or header is logged that could carry the key; the default format has neither.
    access_log /dev/stdout;
    client_body_temp_path {run}/client_body;
    proxy_temp_path {run}/proxy;
    fastcgi_temp_path {run}/fastcgi;
    uwsgi_temp_path {run}/uwsgi;
    scgi_temp_path {run}/scgi;
    client_max_body_size {MAX_BODY};

    # 1 only for the exact header "Bearer <key>": an anchored, case-sensitive regex, because nginx matches
    # plain map strings case-insensitively. The line is written from the key file at start.
    map $http_authorization $tpu_vllm_authorized {{
        default 0;
        include {layout.key_map};
    }}

    upstream tpu_vllm {{
        server 127.0.0.1:{upstream_port};
        keepalive 32;
    }}

    server {{
        listen {listen_port};

        # The probe path, and only it, is open; its upstream URI is pinned, whatever the client wrote.
        location = /health {{
            proxy_pass http://tpu_vllm/health;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}

        error_page 401 = @unauthorized;
        location @unauthorized {{
            default_type application/json;
            add_header WWW-Authenticate Bearer always;
            return 401 '{{"error":"missing or wrong API key: send Authorization: Bearer <key>"}}';
        }}

        location / {{
            if ($tpu_vllm_authorized != 1) {{
                return 401;
            }}
            proxy_pass http://tpu_vllm;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            # Server-sent events must reach the client token by token.
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
