"""The old ``kaflux.testing`` package, kept only to say where its contents went. [pure]

Importing it (or any of its former submodules) raises :class:`ImportError` with the new places:
the development brokers are public in :mod:`kaflux.devbrokers`; the test doubles were never meant
for users and are no longer shipped (they live in kaflux's own test-support code, ``tests/support``
in the source repository).
"""

_NOT_SHIPPED = "not shipped; it is test-support code, tests/support/{}.py in the kaflux repository"

MOVED = {
    "kaflux.testing.brokers (start_broker, TansuBroker, NoidaBroker, Broker, ...)": "kaflux.devbrokers",
    "kaflux.testing.mock_cluster (MockCluster)": "kaflux.devbrokers (or kaflux.devbrokers.mock_cluster)",
    **{
        f"kaflux.testing.{name}": _NOT_SHIPPED.format(name)
        for name in ("fault_proxy", "scenarios", "group_member", "sasl_front_door", "tls", "certs")
    },
}

raise ImportError(
    "kaflux.testing was split up: the development brokers are now public in kaflux.devbrokers, and the "
    "test doubles are no longer part of the kaflux package. Where each module went: "
    + "; ".join(f"{old} -> {new}" for old, new in MOVED.items()),
    name="kaflux.testing",
)
