# Old -> new module names after issue 17's "product and test doubles apart" (branch arch-layout).
# Apply to test, bench and tool files written against the old layout:
#     sed -i -E -f tools/migrate_test_imports.sed FILE...
# The embedded brokers are public, in kaflux.devbrokers; every test double and shared test helper
# is in the test-support package tests/support (imported as ``support.*``: pytest's pythonpath
# holds tests/). Test files themselves moved too: tests/unit/test_<area>_<topic>.py became
# tests/unit/<area>/test_<topic>.py (see git log --follow); that needs no import change.

# kaflux.testing: the brokers became kaflux.devbrokers ...
s/\bkaflux\.testing\.brokers\b/kaflux.devbrokers.brokers/g
s/\bkaflux\.testing\.mock_cluster\b/kaflux.devbrokers.mock_cluster/g
s/\bfrom kaflux\.testing import (sasl_front_door|tls|certs|fault_proxy|scenarios|group_member)\b/from support import \1/g
s/\bfrom kaflux\.testing import\b/from kaflux.devbrokers import/g
# ... and the doubles moved to the tests' support package.
s/\bkaflux\.testing\.(sasl_front_door|tls|certs|fault_proxy|scenarios|group_member)\b/support.\1/g

# Helpers that sat at the top of tests/ or next to their tests.
s/^(\s*)from (fakes|fake_group_coordinator|fake_consumer_group_coordinator|fake_transactions|socket_fake_broker|admin_rig|kafka_helpers|record_kernels|security_fixtures|group_helpers|fault_helpers|admin_helpers|cli_helpers|spark_helpers) import /\1from support.\2 import /
s/^(\s*)import (fakes|fake_group_coordinator|fake_consumer_group_coordinator|fake_transactions|socket_fake_broker|admin_rig|kafka_helpers|record_kernels|security_fixtures|group_helpers|fault_helpers|admin_helpers|cli_helpers|spark_helpers)$/\1from support import \2/
s/^(\s*)from kaflux_(assignors|protocol)_testutil import /\1from support.\2_testutil import /
s/(pytest_plugins = \[|register_assert_rewrite\()"security_fixtures"/\1"support.security_fixtures"/
