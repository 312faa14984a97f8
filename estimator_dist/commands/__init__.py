"""The ``python -m estimator_dist.*`` commands: each one's parser and command (``train``,
``launch``, ``report``, ``migrate``, ``doctor``), what they share (``cli``: the parser,
the exit codes, ``exit_with``) and TensorFlow's logging under them (``logs``).

Nothing in the library imports from here. Each command has one shape (``cli.py``):
``NAME_parser(subparsers=None)``, ``NAME_command(args)`` and ``main(argv=None)``; the
pinned entry points ``python -m estimator_dist.train``, ``.launch``, ``.report``,
``.migrate`` and ``.doctor`` are thin modules one level up that quiet TensorFlow's import
(``logs.quiet_unless_verbose``) and call ``main``.
"""
