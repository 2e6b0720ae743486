"""The real-nginx harness survives a port another process takes between the free-port check and the bind."""

from __future__ import annotations

import itertools
import socket

import pytest

from components.serving import front
from tests.fakes import nginx

pytestmark = pytest.mark.skipif(nginx.NGINX is None, reason=nginx.SKIP_REASON)


def test_a_taken_port_is_retried_with_another(monkeypatch, tmp_path):
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        # The taken port first, then free ones as the harness asks (one can be lost again to another process: a
        # busy machine's outgoing connections take ports from the same range).
        ports = itertools.chain([taken.getsockname()[1]], iter(nginx.free_port, None))
        monkeypatch.setattr(nginx, "free_port", lambda: next(ports))
        base = nginx.workdir("tpu-vllm-harness-")
        layout = front.FrontLayout(config_path=str(base / "nginx.conf"), key_file=str(base / "api-key"),
                                   run_dir=str(base / "run"))
        (base / "api-key").write_text("k" * 40 + "\n")
        written = []

        def write_config(port: int) -> None:
            written.append(port)
            (base / "nginx.conf").write_text(front.nginx_config(listen_port=port, upstream_port=1, layout=layout))

        running = nginx.start_on_a_free_port(front.entry_command(layout), base, write_config)
        try:
            assert written[0] == taken.getsockname()[1] and running.port == written[-1] != written[0]
        finally:
            running.stop()
