"""The one shape of every command: parser(subparsers=None), command(args), main -> cli.run."""
import argparse

import pytest

from estimator_dist.commands import cli, doctor, launch, migrate, report, train
from estimator_dist.errors import EnvironmentFault, UsageError

_PARSERS = {"train": train.train_parser, "launch": launch.launch_parser,
            "migrate": migrate.migrate_parser, "report": report.report_parser,
            "doctor": doctor.doctor_parser}


def _run(error, capsys, **options):
    def command(args):
        del args  # Unused.
        raise error

    code = cli.run(cli.command_parser("demo", "A demo."), command, [], **options)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(_PARSERS))
def test_command_parser_standalone_prog_names_the_module(name):
    assert _PARSERS[name]().prog == f"python -m estimator_dist.{name}"


@pytest.mark.parametrize("name", sorted(_PARSERS))
def test_command_parser_added_to_subparsers(name):
    root = argparse.ArgumentParser(prog="estimator-dist")
    parser = _PARSERS[name](root.add_subparsers(dest="command"))
    assert parser.prog == f"estimator-dist {name}"


def test_run_usage_error_one_line_exit_2(capsys):
    code, err = _run(UsageError("steps must be positive. Received: steps=0"), capsys)
    assert (code, err) == (2, "python -m estimator_dist.demo: error: steps must be positive. "
                              "Received: steps=0\n")


def test_run_environment_fault_one_line_exit_1(capsys):
    code, err = _run(EnvironmentFault("model_dir needs free disk space."), capsys)
    assert code == 1 and err.count("\n") == 1


def test_run_sigint_one_line_with_note_exit_130(capsys):
    code, err = _run(KeyboardInterrupt(), capsys, interrupted_note="nothing was lost")
    assert (code, err) == (130, "python -m estimator_dist.demo: interrupted by SIGINT; "
                                "nothing was lost\n")


def test_run_sigterm_one_line_exit_143(capsys):
    code, err = _run(cli.Terminated(), capsys)
    assert (code, err) == (143, "python -m estimator_dist.demo: interrupted by SIGTERM\n")
