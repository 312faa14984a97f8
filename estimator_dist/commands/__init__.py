"""What only the ``python -m estimator_dist.*`` commands use: their parsers, the run's
settings and orchestration, the progress hooks, logging, reports, the launcher and the
doctor.

Nothing in the library imports from here. Each command has one shape (``cli.py``):
``NAME_parser(subparsers=None)``, ``NAME_command(args)`` and ``main(argv=None)``; the
pinned entry points ``python -m estimator_dist.train``, ``.launch``, ``.report``,
``.migrate`` and ``.doctor`` are thin modules one level up that call ``main``.
"""
import os
import sys

# TensorFlow reads its C++ log level once, when first imported, and a command's modules
# import it before its flags are parsed: quiet its INFO lines (oneDNN, cpu_feature_guard)
# unless the command line asks for --verbose. A level the user set is kept. TensorFlow
# 2.16+ logs its import's lines before any level applies: they go to /dev/null.
if "--verbose" not in sys.argv[1:]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from estimator_dist.commands import logs as _logs

    _logs.quiet_import()
