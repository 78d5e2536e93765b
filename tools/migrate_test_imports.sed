# Old -> new names after issue 17's "product and test doubles apart" (branch arch-layout).
# Apply to test, bench and tool files written against the old layout, then let ruff sort the imports
# (the support package sorts after kaflux):
#     sed -i -E -f tools/migrate_test_imports.sed FILE...
#     .venv/bin/ruff check --fix FILE... && .venv/bin/ruff format FILE...
# The development brokers are public, in kaflux.devbrokers. Every test double and shared test helper
# is in the test-support package tests/support, imported as ``support.<module>`` (pytest's
# pythonpath holds tests/; a child process needs PYTHONPATH=tests, a bench/ script inserts tests/).
# A new flat tests/unit/test_<area>_<topic>.py from another branch belongs in
# tests/unit/<area>/test_<topic>.py (consumer/assignors for the assignors); no import changes then.
#
# Files moved by git mv (for merges; git log --follow shows their history):
#   src/kaflux/testing/brokers.py -> src/kaflux/devbrokers/brokers.py
#   src/kaflux/testing/certs.py -> tests/support/certs.py
#   src/kaflux/testing/fault_proxy.py -> tests/support/fault_proxy.py
#   src/kaflux/testing/group_member.py -> tests/support/group_member.py
#   src/kaflux/testing/mock_cluster.py -> src/kaflux/devbrokers/mock_cluster.py
#   src/kaflux/testing/sasl_front_door.py -> tests/support/sasl_front_door.py
#   src/kaflux/testing/scenarios.py -> tests/support/scenarios.py
#   src/kaflux/testing/tls.py -> tests/support/tls.py
#   tests/admin_rig.py -> tests/support/admin_rig.py
#   tests/cli/cli_helpers.py -> tests/support/cli_helpers.py
#   tests/fake_consumer_group_coordinator.py -> tests/support/fake_consumer_group_coordinator.py
#   tests/fake_group_coordinator.py -> tests/support/fake_group_coordinator.py
#   tests/fake_transactions.py -> tests/support/fake_transactions.py
#   tests/fakes.py -> tests/support/fakes.py
#   tests/integration/admin_helpers.py -> tests/support/admin_helpers.py
#   tests/integration/fault_helpers.py -> tests/support/fault_helpers.py
#   tests/integration/group_helpers.py -> tests/support/group_helpers.py
#   tests/integration/test_fault_proxy.py -> tests/support/test_fault_proxy.py
#   tests/integration/test_security_doubles.py -> tests/support/test_security_doubles.py
#   tests/kafka_helpers.py -> tests/support/kafka_helpers.py
#   tests/record_kernels.py -> tests/support/record_kernels.py
#   tests/security_fixtures.py -> tests/support/security_fixtures.py
#   tests/socket_fake_broker.py -> tests/support/socket_fake_broker.py
#   tests/spark/spark_helpers.py -> tests/support/spark_helpers.py
#   tests/unit/assignors/kaflux_assignors_testutil.py -> tests/support/assignors_testutil.py
#   tests/unit/assignors/test_assignors_consumer_protocol.py -> tests/unit/consumer/assignors/test_consumer_protocol.py
#   tests/unit/assignors/test_assignors_properties.py -> tests/unit/consumer/assignors/test_properties.py
#   tests/unit/assignors/test_assignors_range_roundrobin.py -> tests/unit/consumer/assignors/test_range_roundrobin.py
#   tests/unit/assignors/test_assignors_registry.py -> tests/unit/consumer/assignors/test_registry.py
#   tests/unit/assignors/test_assignors_sticky.py -> tests/unit/consumer/assignors/test_sticky.py
#   tests/unit/protocol/kaflux_protocol_testutil.py -> tests/support/protocol_testutil.py
#   tests/unit/protocol/test_protocol_api.py -> tests/unit/protocol/test_api.py
#   tests/unit/protocol/test_protocol_framing.py -> tests/unit/protocol/test_framing.py
#   tests/unit/protocol/test_protocol_generator.py -> tests/unit/protocol/test_generator.py
#   tests/unit/protocol/test_protocol_messages.py -> tests/unit/protocol/test_messages.py
#   tests/unit/protocol/test_protocol_oracles.py -> tests/unit/protocol/test_oracles.py
#   tests/unit/protocol/test_protocol_primitives.py -> tests/unit/protocol/test_primitives.py
#   tests/unit/protocol/test_protocol_tagged_fields.py -> tests/unit/protocol/test_tagged_fields.py
#   tests/unit/test_admin_groups.py -> tests/unit/admin/test_groups.py
#   tests/unit/test_admin_request_manager.py -> tests/unit/admin/test_request_manager.py
#   tests/unit/test_admin_topics.py -> tests/unit/admin/test_topics.py
#   tests/unit/test_backoff.py -> tests/unit/network/test_backoff.py
#   tests/unit/test_clients_over_tls.py -> tests/unit/network/test_clients_over_tls.py
#   tests/unit/test_clients_survive_broker_crash.py -> tests/unit/network/test_clients_survive_broker_crash.py
#   tests/unit/test_cluster.py -> tests/unit/network/test_cluster.py
#   tests/unit/test_consumer_application_event_processor.py -> tests/unit/consumer/test_application_event_processor.py
#   tests/unit/test_consumer_commit_request_manager.py -> tests/unit/consumer/test_commit_request_manager.py
#   tests/unit/test_consumer_coordinator_request_manager.py -> tests/unit/consumer/test_coordinator_request_manager.py
#   tests/unit/test_consumer_fetch_collector.py -> tests/unit/consumer/test_fetch_collector.py
#   tests/unit/test_consumer_fetch_request_manager.py -> tests/unit/consumer/test_fetch_request_manager.py
#   tests/unit/test_consumer_fetch_session.py -> tests/unit/consumer/test_fetch_session.py
#   tests/unit/test_consumer_offsets_request_manager.py -> tests/unit/consumer/test_offsets_request_manager.py
#   tests/unit/test_consumer_poll_arrow.py -> tests/unit/consumer/test_poll_arrow.py
#   tests/unit/test_consumer_position_validation.py -> tests/unit/consumer/test_position_validation.py
#   tests/unit/test_consumer_subscription_state.py -> tests/unit/consumer/test_subscription_state.py
#   tests/unit/test_consumer_topic_errors.py -> tests/unit/consumer/test_topic_errors.py
#   tests/unit/test_fault_proxy_rewrite.py -> tests/support/test_fault_proxy_rewrite.py
#   tests/unit/test_hostile_frames.py -> tests/unit/network/test_hostile_frames.py
#   tests/unit/test_metrics.py -> tests/unit/metrics/test_metrics.py
#   tests/unit/test_network_client.py -> tests/unit/network/test_network_client.py
#   tests/unit/test_network_delegate.py -> tests/unit/network/test_network_client_delegate.py
#   tests/unit/test_network_metadata_manager.py -> tests/unit/network/test_metadata_manager.py
#   tests/unit/test_network_thread.py -> tests/unit/network/test_network_thread.py
#   tests/unit/test_producer_accumulator.py -> tests/unit/producer/test_accumulator.py
#   tests/unit/test_producer_arrow.py -> tests/unit/producer/test_arrow.py
#   tests/unit/test_producer_encode.py -> tests/unit/records/test_encode.py
#   tests/unit/test_producer_futures.py -> tests/unit/producer/test_futures.py
#   tests/unit/test_producer_idempotence.py -> tests/unit/producer/test_idempotence.py
#   tests/unit/test_producer_partitioner.py -> tests/unit/producer/test_partitioner.py
#   tests/unit/test_producer_sender.py -> tests/unit/producer/test_sender.py
#   tests/unit/test_producer_transactions.py -> tests/unit/producer/test_transactions.py
#   tests/unit/test_request_typing.py -> tests/unit/network/test_requests_typing.py
#   tests/unit/test_sasl.py -> tests/unit/network/test_sasl.py
#   tests/unit/test_sasl_front_door.py -> tests/support/test_sasl_front_door.py

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
# test_columns' record-batch strategies and column reader are shared through the support package.
s/^(\s*)from test_columns import /\1from support.record_columns import /
