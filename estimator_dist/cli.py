"""What every ``python -m estimator_dist.*`` command shares: one-line errors, exit code 2.

A bad flag value or a ``UsageError`` from the command is one line on stderr,
``PROG: error: ...``, and exit code 2, with no traceback.
"""
import argparse
import sys

from estimator_dist.config import nearest_hint
from estimator_dist.errors import UsageError


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit code 2.

    An unknown flag gets the nearest known one as a hint.
    """

    def error(self, message):
        if message.startswith("unrecognized arguments: "):
            flags = [w for w in message.split()[2:] if w.startswith("--")]
            options = [o for o in self._option_string_actions if o.startswith("--")]
            message += nearest_hint(flags[0].split("=")[0], options) if flags else ""
        self.exit(2, f"{self.prog}: error: {message}\n")


def _int_at_least(minimum, rule):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"must be a {rule} int. Received: {text!r}")
        return value

    return parse


positive_int = _int_at_least(1, "positive")
non_negative_int = _int_at_least(0, "non-negative")


def run(parser, command, argv=None):
    """Parses ``argv`` and runs ``command(args)``; a ``UsageError`` becomes one line and 2.

    With ``--verbose`` (where a command has it) the error is raised with its traceback.
    """
    args = parser.parse_args(argv)
    try:
        return command(args)
    except UsageError as error:
        if getattr(args, "verbose", False):
            raise
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
