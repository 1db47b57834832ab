"""``--scheduler-reserve-full-isl`` / ``--no-scheduler-reserve-full-isl`` on ``serve`` and ``generate``, as
vLLM 0.33.0's flag: on by default, off on request, into the EngineConfig the command builds (no model load)."""

from __future__ import annotations

import pytest

from kvviz.cli import build_parser, main
from kvviz.cli import generate as generate_cli
from kvviz.cli import serve as serve_cli

COMMANDS = {"serve": (serve_cli, []), "generate": (generate_cli, ["--prompt", "hi"])}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(("flags", "expected"), [([], True), (["--scheduler-reserve-full-isl"], True),
                                                 (["--no-scheduler-reserve-full-isl"], False)])
def test_the_flag_reaches_the_engine_config(command, flags, expected):
    module, required = COMMANDS[command]
    args = build_parser().parse_args([command, *required, "--block-size", "32", *flags])
    config = module.engine_config(args)
    assert config.scheduler_reserve_full_isl is expected and config.block_size == 32


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_value_on_the_flag_is_one_line_exit_2(command, capsys):
    assert main([command, *COMMANDS[command][1], "--scheduler-reserve-full-isl=no", "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "Traceback" not in err
