"""Run inside the vLLM venv (requirements-vllm.txt): judge serve commands with vLLM's own parser.

Usage: python tests/vllm_cli_check.py < request.json

Reads JSON on stdin: {"commands": {name: ["vllm", "serve", MODEL, ...]}, "env": {name: {VAR: value}},
"environments": {name: {VAR: value}}, "paddings": [[max_num_batched_tokens, gap], ...]}. Each command goes
through what `vllm serve` does before it loads anything: the `serve` subcommand's parser
(vllm/entrypoints/cli/main.py builds it with ServeSubcommand.subparser_init), the subcommand's validate
(validate_parsed_serve_args), the engine arguments (EngineArgs.from_cli_args) and, when given, vLLM's
SpeculativeConfig. Each `env` is laid over this process's environment and read back through vLLM's envs
(vllm/envs.py) and tpu-inference's (tpu_inference/envs.py, loaded by file: its package __init__ needs JAX).
Each of `environments` is a container's whole environment: it replaces this process's, then every
variable both backends know is read, and vLLM's enable_envs_cache runs (the engine core's startup step
that reads them all and lets the first error out). Each padding pair runs tpu-inference's own
get_token_paddings (tpu_inference/runner/utils.py), lifted out of that module by its syntax tree, since
the module imports JAX. Prints JSON: per command either the parsed values or the error vLLM raised; per
`env` what each backend read; per environment each variable that failed and how, and the startup step's
error; the registered tool and reasoning parsers; each padding ladder.
"""

import ast
import contextlib
import importlib.util
import io
import json
import os
import sys
from pathlib import Path

# No accelerator here: vLLM's platform detection would find none and refuse to build its configs.
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

from vllm.config import SpeculativeConfig  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.entrypoints.cli.serve import ServeSubcommand  # noqa: E402
from vllm.reasoning import ReasoningParserManager  # noqa: E402
from vllm.tool_parsers import ToolParserManager  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

SHOWN = ("model_tag", "dtype", "kv_cache_dtype", "max_model_len", "max_num_batched_tokens",
         "tensor_parallel_size", "gpu_memory_utilization", "enable_prefix_caching", "disable_chunked_mm_input",
         "limit_mm_per_prompt", "enable_auto_tool_choice", "tool_call_parser", "reasoning_parser",
         "speculative_config", "allowed_media_domains", "host", "port", "block_size", "max_num_seqs",
         "data_parallel_size", "api_server_count", "data_parallel_backend")


def serve_parser() -> FlexibleArgumentParser:
    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    ServeSubcommand().subparser_init(subparsers)
    return parser


def judge(parser: FlexibleArgumentParser, argv: list[str]) -> dict:
    if argv[:2] != ["vllm", "serve"]:
        return {"error": f"not a vllm serve command: {argv[:2]}"}
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = parser.parse_args(argv[1:])
        ServeSubcommand().validate(args)
        EngineArgs.from_cli_args(args)
        speculative = None
        if args.speculative_config:
            config = SpeculativeConfig(**args.speculative_config)
            speculative = {"method": config.method, "num_speculative_tokens": config.num_speculative_tokens,
                           "prompt_lookup_min": config.prompt_lookup_min,
                           "prompt_lookup_max": config.prompt_lookup_max}
    except SystemExit as error:  # argparse: an unknown flag or a bad value
        return {"error": f"argparse exit {error.code}: {stderr.getvalue().strip()[-600:]}"}
    except Exception as error:  # noqa: BLE001 - vLLM's own refusal, reported to the test
        return {"error": f"{type(error).__name__}: {error}"}
    shown = {name: getattr(args, name, None) for name in SHOWN}
    shown["speculative"] = speculative
    return {"parsed": json.loads(json.dumps(shown, default=str))}


def tpu_inference_envs():
    spec = importlib.util.find_spec("tpu_inference")
    path = Path(spec.submodule_search_locations[0]) / "envs.py"
    module_spec = importlib.util.spec_from_file_location("tpu_inference_envs", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def environ(values: dict[str, str], without: list[str]):
    """os.environ less `without`, plus `values`, for the block; restored whole after it."""
    saved = dict(os.environ)
    try:
        for name in without:
            os.environ.pop(name, None)
        os.environ.update(values)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def backends():
    import vllm.envs as vllm_envs

    return (("vllm", vllm_envs), ("tpu_inference", tpu_inference_envs()))


def read_variable(module, name: str):
    try:
        return module.environment_variables[name]()
    except Exception as error:  # noqa: BLE001 - how the backend refuses the value
        return f"error: {type(error).__name__}: {error}"


def read_env(values: dict[str, str], names: list[str]) -> dict:
    modules = backends()
    with environ(values, names):
        return {name: {backend: read_variable(module, name) for backend, module in modules
                       if name in module.environment_variables} for name in names}


def judge_environment(values: dict[str, str]) -> dict:
    """`values` as a container's whole environment: each variable either backend fails to read, and how."""
    modules = backends()
    vllm_envs = modules[0][1]
    errors = {}
    with environ(values, list(os.environ)):
        for backend, module in modules:
            for name, read in module.environment_variables.items():
                try:
                    read()
                except Exception as error:  # noqa: BLE001 - how the backend refuses the value
                    errors[f"{backend}:{name}"] = f"{type(error).__name__}: {error}"
        try:
            vllm_envs.enable_envs_cache()
            startup = None
        except Exception as error:  # noqa: BLE001 - the engine core would die of it
            startup = f"{type(error).__name__}: {error}"
        finally:
            vllm_envs.disable_envs_cache()
        port = errors.get("vllm:VLLM_PORT") or vllm_envs.VLLM_PORT
    return {"errors": errors, "startup": startup, "VLLM_PORT": port,
            "read": sum(len(module.environment_variables) for _, module in modules)}


def token_paddings_function():
    """tpu-inference's get_token_paddings, compiled from its source with a silent logger."""
    spec = importlib.util.find_spec("tpu_inference")
    source = (Path(spec.submodule_search_locations[0]) / "runner" / "utils.py").read_text()
    tree = ast.parse(source)
    node = next(item for item in tree.body
                if isinstance(item, ast.FunctionDef) and item.name == "get_token_paddings")
    namespace = {"logger": type("Silent", (), {"info": staticmethod(lambda *a, **k: None)})()}
    exec(compile(ast.Module(body=[node], type_ignores=[]), "tpu_inference/runner/utils.py", "exec"), namespace)
    return namespace["get_token_paddings"]


def main() -> None:
    request = json.load(sys.stdin)
    parser = serve_parser()
    names = sorted({name for values in request.get("env", {}).values() for name in values}
                   | set(request.get("env_names", [])))
    paddings = token_paddings_function()
    print(json.dumps({
        "commands": {name: judge(parser, argv) for name, argv in request.get("commands", {}).items()},
        "env": {name: read_env(values, names) for name, values in request.get("env", {}).items()},
        "environments": {name: judge_environment(values)
                         for name, values in request.get("environments", {}).items()},
        "tool_parsers": sorted(ToolParserManager.list_registered()),
        "reasoning_parsers": sorted(ReasoningParserManager.list_registered()),
        "tool_parser_gemma4": ToolParserManager.get_tool_parser("gemma4").__name__,
        "reasoning_parser_gemma4": ReasoningParserManager.get_reasoning_parser("gemma4").__name__,
        "paddings": [paddings(16, tokens, gap) for tokens, gap in request.get("paddings", [])],
    }))


if __name__ == "__main__":
    main()
