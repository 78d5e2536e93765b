"""``python -m kaflux.cli``: the same as the ``kaflux`` command. [app]"""

from kaflux.cli.main import main

if __name__ == "__main__":
    main()
