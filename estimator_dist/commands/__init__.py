"""What only the ``python -m estimator_dist.*`` commands use: their parsers, the run's
settings and orchestration, the progress hooks, logging, reports, the launcher and the
doctor.

Nothing in the library imports from here. Each command has one shape (``cli.py``):
``NAME_parser(subparsers=None)``, ``NAME_command(args)`` and ``main(argv=None)``; the
pinned entry points ``python -m estimator_dist.train``, ``.launch``, ``.report``,
``.migrate`` and ``.doctor`` are thin modules one level up that call ``main``.
"""
