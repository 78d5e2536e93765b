"""kaflux's test-support package: every test double and shared test helper, in one place. [test]

Not shipped: the wheel holds only ``src/`` (``tests/unit/test_wheel.py`` checks it).
Tests import these modules as ``support.<module>``: pytest's ``pythonpath = ["tests"]`` puts
``tests/`` on the path (child processes started by tests get it through ``PYTHONPATH``; scripts
in ``bench/`` add it themselves). The development brokers that users run are not here: they are
public, in :mod:`kaflux.devbrokers`.

In-memory doubles (unit tests, injected time, no sockets):

- :mod:`support.fakes`: a fake cluster and network (``FakeCluster``, ``FakeNetwork``, ``ClientSide``);
- :mod:`support.fake_group_coordinator`, :mod:`support.fake_consumer_group_coordinator`: classic and
  KIP-848 group coordinators with drivers of real memberships;
- :mod:`support.fake_transactions`: producer state and a transaction coordinator;
- :mod:`support.admin_rig`: the admin client's request manager on the fake network.

Doubles on loopback sockets:

- :mod:`support.socket_fake_broker`: ``FakeCluster`` served over TCP to the real clients;
- :mod:`support.fault_proxy`: a fault-injecting Kafka-framing proxy in front of a broker;
- :mod:`support.sasl_front_door`, :mod:`support.tls`, :mod:`support.certs`: a SASL front door, a
  TLS terminator (stunnel4) and a certificate builder, for the servers we cannot install;
- :mod:`support.kdc`: a throw-away MIT Kerberos KDC (a child process), for the GSSAPI tests;
- :mod:`support.service_process`: the life cycle the stunnel and KDC child processes share;
- :mod:`support.security_fixtures`: pytest fixtures putting those in front of Tansu;
- :mod:`support.scenarios`, :mod:`support.group_member`: fault scenarios on real brokers (also
  run by ``bench/soak.py``) and a consumer-group member in a child process.

Shared helpers: ``kafka_helpers``, ``group_helpers``, ``fault_helpers``, ``admin_helpers``,
``cli_helpers``, ``spark_helpers``, ``record_kernels``, ``record_columns``, ``assignors_testutil``,
``protocol_testutil``, ``secure_round_trips`` (what the TLS/SASL/Kerberos tests check once logged
in), ``doc_blocks`` (the code blocks of README.md and docs/*.md, run as examples).

The doubles' own tests are the ``test_*.py`` files of this package.
"""
