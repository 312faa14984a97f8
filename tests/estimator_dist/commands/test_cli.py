"""The one shape of every command: parser(subparsers=None), command(args), main -> cli.run,
and one way to end its process, the same for ``python -m`` and the console script."""
import argparse
import ast
import contextlib
import os
import signal
import subprocess
import sys
import time
import weakref

import pytest

from estimator_dist.commands import cli, doctor, launch, migrate, report, train
from estimator_dist.errors import EnvironmentFault, TaskEnd, UsageError
from tests.support import REPO_ROOT, run_python

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


class _Cached:
    """An object whose weakref callback runs a while, as TensorFlow's caches' do."""


def test_sigterm_inside_a_weakref_callback_raises_after_it(capsys):
    """SIGTERM landing in a weakref callback, where Python only reports an exception and
    goes on after the callback, still raises ``Terminated``, outside the callback and
    without a report; outside the block SIGTERM is the previous handler's again."""
    ran = []

    def callback(reference):
        del reference  # Unused.
        os.kill(os.getpid(), signal.SIGTERM)  # The handler runs at the next line.
        ran.append("callback went on")

    cached = _Cached()
    reference = weakref.ref(cached, callback)
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(cli.Terminated):
        with cli.sigterm_raises():
            del cached
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                pass
    assert reference() is None and not ran
    assert capsys.readouterr().err == ""
    assert signal.getsignal(signal.SIGTERM) is previous


def test_run_task_end_one_line_its_exit_code(capsys):
    code, err = _run(TaskEnd("rendezvous: stopped by SIGTERM while waiting for worker 1", 143),
                     capsys)
    assert (code, err) == (143, "python -m estimator_dist.demo: rendezvous: stopped by "
                                "SIGTERM while waiting for worker 1\n")


@pytest.fixture
def reports(monkeypatch):
    """What Python reports as "Exception ignored in ..." during the test, as a list of
    exceptions; ``sys.unraisablehook`` is the previous one again after it."""
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda report: reported.append(report.exc_value))
    return reported


@pytest.mark.parametrize("stop, code", [(cli.Terminated(), 143), (KeyboardInterrupt(), 130),
                                        (TaskEnd("stopped by SIGTERM", 143), 143)])
def test_run_error_raised_while_a_stop_unwinds_is_the_stop(stop, code, capsys, reports):
    """A scope's exit failing on the scopes a signal left out of order (TensorFlow's
    "Exiting device scope without proper scope nesting") ends as the signal did."""
    try:
        try:
            raise stop
        finally:
            raise RuntimeError("Exiting device scope without proper scope nesting.")
    except RuntimeError as error:
        unwinding = error
    assert _run(unwinding, capsys) == _run(stop, capsys)
    assert _run(stop, capsys)[0] == code and not reports


def test_run_raises_an_error_no_stop_is_behind():
    with pytest.raises(RuntimeError, match="nesting"):
        _run(RuntimeError("Exiting device scope without proper scope nesting."), None)


_scopes = []


@contextlib.contextmanager
def _scope():
    """A scope as TensorFlow's ``Graph.device``: its exit checks the stack it pushed on."""
    _scopes.append("device")
    try:
        yield
    finally:
        _scopes.pop()  # IndexError once the stack is gone.


def test_scope_a_stop_left_open_reports_nothing_when_its_frame_goes(capsys, reports):
    """SIGTERM landing in ``__enter__`` after the generator entered its scope: the ``with``
    never exits it, and the generator closes when its frame goes, after the scopes under it
    were unwound. Its ``IndexError`` ("Exception ignored in ...") is the signal's doing:
    the command's one line stays the only one."""
    def command(args):
        del args  # Unused.
        scope = _scope()
        scope.__enter__()
        _scopes.clear()
        raise cli.Terminated()

    code = cli.run(cli.command_parser("demo", "A demo."), command, [])
    assert (code, capsys.readouterr().err) == (
        143, "python -m estimator_dist.demo: interrupted by SIGTERM\n")
    assert not reports and not _scopes
    scope = _scope()
    scope.__enter__()
    _scopes.clear()
    del scope
    assert [type(report) for report in reports] == [IndexError]  # Reported again after.


def _console_scripts():
    """{script name: "module:function"} of setup.py's ``console_scripts``."""
    with open(os.path.join(REPO_ROOT, "setup.py"), encoding="utf-8") as file:
        tree = ast.parse(file.read())
    listed = next(value for node in ast.walk(tree) if isinstance(node, ast.Dict)
                  for key, value in zip(node.keys, node.values)
                  if getattr(key, "value", None) == "console_scripts")
    return dict(entry.value.split("=") for entry in listed.elts)


def test_console_scripts_are_the_entry_points_of_python_m():
    assert _console_scripts() == {f"estimator-dist-{name}": f"estimator_dist.{name}:script"
                                  for name in sorted(_PARSERS)}


def _console_script(name, target, argv):
    """Runs console script ``name`` (``target``, "module:function") as the wrapper pip
    installs does: ``sys.exit(function())`` with ``argv``."""
    module, function = target.split(":")
    code = (f"import sys\nfrom {module} import {function}\n"
            f"sys.argv[0] = {name!r}\nsys.exit({function}())\n")
    return run_python(["-c", code, *argv], timeout=60)


@pytest.mark.parametrize("argv, exit_code", [(["--help"], 0), (["--no-such-flag"], 2)])
@pytest.mark.parametrize("name", sorted(_PARSERS))
def test_console_script_ends_as_python_m(name, argv, exit_code):
    script = f"estimator-dist-{name}"
    by_script = _console_script(script, _console_scripts()[script], argv)
    by_module = run_python(["-m", f"estimator_dist.{name}", *argv], timeout=60)
    assert by_module.returncode == exit_code, by_module.stderr
    assert ((by_script.returncode, by_script.stdout, by_script.stderr)
            == (by_module.returncode, by_module.stdout, by_module.stderr))


def test_exit_with_reader_gone_ends_quietly_with_code_1():
    """stdout's last flush, after the command returned, into a pipe whose reader left."""
    code = ("from estimator_dist.commands import cli\n"
            "def main():\n"
            "    print('x' * 100)  # Buffered: written at the flush.\n"
            "    return 0\n"
            "cli.exit_with(main)\n")
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run([sys.executable, "-c", code], stdout=write,
                                stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, timeout=60)
    finally:
        os.close(write)
    assert (result.returncode, result.stderr) == (1, "")


def test_exit_with_system_exit_of_main_is_the_exit_code():
    code = ("from estimator_dist.commands import cli\n"
            "def main():\n"
            "    raise SystemExit(5)\n"
            "cli.exit_with(main)\n")
    assert run_python(["-c", code], timeout=60).returncode == 5
