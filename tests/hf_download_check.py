"""Run inside the vLLM venv (requirements-vllm.txt pins huggingface_hub): one checkpoint file through
huggingface_hub's own download step into a fake Cloud Storage FUSE mount (tests/fakes/gcsfuse_mount.py).

Usage: python tests/hf_download_check.py REQUEST_JSON

REQUEST_JSON: {"root": local directory standing for the mount, "only_dir": the bucket prefix it shows,
"grants": [[role, object-name prefix or null], ...]}. huggingface_hub's `_download_to_tmp_and_move` (what
hf_hub_download calls for each file: write `<blob>.<id>.incomplete`, then `_chmod_and_move` it to the blob) runs
with its HTTP fetch replaced by a fixed body. Prints JSON: huggingface_hub's version, the error it raised (or
null), whether the blob holds the body, and every file left under the mount.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import huggingface_hub  # noqa: E402
from huggingface_hub import file_download  # noqa: E402

from tests.fakes.gcsfuse_mount import Mount, mounted  # noqa: E402

BODY = b"safetensors bytes " * 64


def main(request: dict) -> dict:
    root = Path(request["root"])
    mount = Mount(str(root), request["only_dir"], tuple((role, prefix) for role, prefix in request["grants"]))
    blob = root / "hub" / "models--org--model" / "blobs" / "0123abcd"
    blob.parent.mkdir(parents=True, exist_ok=True)

    def http_get(url, temp_file, **kwargs):  # no network: the body the Hub would send
        temp_file.write(BODY)

    file_download.http_get = http_get
    error = None
    try:
        with mounted(mount):
            file_download._download_to_tmp_and_move(
                incomplete_path=Path(f"{blob}.incomplete"), destination_path=blob,
                url_to_download="https://huggingface.co/org/model/resolve/main/model.safetensors", headers={},
                expected_size=len(BODY), filename="model.safetensors", force_download=False, etag="0123abcd",
                xet_file_data=None)
    except OSError as raised:
        error = f"{type(raised).__name__}: [Errno {raised.errno}]"
    return {"version": huggingface_hub.__version__, "error": error,
            "blob": blob.is_file() and blob.read_bytes() == BODY,
            "files": sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
