"""The ``ordmix`` command line: ``fit`` (and the entry point), ``compare``,
``experiment``, ``next`` and what they share."""
