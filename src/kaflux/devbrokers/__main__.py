"""``python -m kaflux.devbrokers resolve [VERSION ...]``: fill Apache Kafka's jar cache. [io]

See :func:`kaflux.devbrokers.apache_kafka.main`.
"""

import sys

from kaflux.devbrokers.apache_kafka import main

sys.exit(main())
