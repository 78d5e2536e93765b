"""The ``kaflux`` command line tool, built on click and rich. [app]

``kaflux consume``, ``produce``, ``topics``, ``groups``, ``broker`` and ``demo``; the entry point is
:func:`kaflux.cli.main.main` (the ``kaflux`` console script, or ``python -m kaflux.cli``).
"""
