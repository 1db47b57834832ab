"""``--kv-offloading-size`` on ``serve`` and ``generate``, as vLLM 0.33.0's flag: GiB of host memory for the
offloading tier, off by default, into the EngineConfig the command builds (no model load); a bad value is
one line and exit 2."""

from __future__ import annotations

import pytest

from kvviz.cli import build_parser, main
from kvviz.cli import generate as generate_cli
from kvviz.cli import serve as serve_cli

COMMANDS = {"serve": (serve_cli, []), "generate": (generate_cli, ["--prompt", "hi"])}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(("flags", "size", "nbytes"), [([], None, 0), (["--kv-offloading-size", "0.5"], 0.5, 1 << 29),
                                                       (["--kv-offloading-size=2"], 2.0, 2 << 30)])
def test_the_flag_reaches_the_engine_config(command, flags, size, nbytes):
    module, required = COMMANDS[command]
    config = module.engine_config(build_parser().parse_args([command, *required, *flags]))
    assert config.kv_offloading_size == size and config.kv_offloading_bytes == nbytes


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("value", ["0", "-1", "lots", "nan", "4096"])
def test_a_bad_size_is_one_line_exit_2(command, value, capsys):
    assert main([command, *COMMANDS[command][1], f"--kv-offloading-size={value}", "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "Traceback" not in err and "GiB" in err
