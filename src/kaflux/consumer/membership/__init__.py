"""Group membership in parts, shaped after Java's new consumer. [bg, pure: takes now_ms]

A consumer's membership in its group is split the way Java splits it, so that the classic and
the KIP-848 protocols can share everything but their requests:

* :mod:`.member` and :mod:`.core` -- the protocol-neutral part (Java's
  ``AbstractMembershipManager``). :class:`~.member.GroupMember` is who the member is: its
  identity and :class:`MemberState` machine (``consumer/member_state.py``), its reports
  (``group_state()``, commit identity, rebalance metrics) and the topics it needs;
  :class:`~.core.MembershipCore` is what it does: joining, the assignment bookkeeping (revoke,
  then assign; pending revocation; lost partitions), fencing, fatal errors and leaving.
* :mod:`.callbacks` -- :class:`~.callbacks.RebalanceCallbacks`: rebalance listener methods
  requested from the application thread with a background event and continued when it
  acknowledges them with an application event.
* :mod:`.poll_timer` -- :class:`~.poll_timer.PollTimer` for ``max.poll.interval.ms``.
* :mod:`.classic_heartbeat` -- :class:`~.classic_heartbeat.ClassicHeartbeatRequestManager`, the
  classic protocol's requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and its handling of
  their responses and errors (Java's heartbeat request manager, one per protocol).

``kaflux.consumer.membership_manager.MembershipManager`` puts them together for the classic
protocol: it is the membership core plus the classic decisions (eager or cooperative
rebalances, the leader's assignment), and the request manager the network thread polls (its
``poll`` is its heartbeat request manager's). The KIP-848 protocol (``group.protocol=consumer``)
has its own membership on the same core, :mod:`.consumer_membership` (the coordinator assigns;
the member reconciles towards its target and acknowledges it), and its own request manager,
:mod:`.consumer_heartbeat` (ConsumerGroupHeartbeat), each protocol with its own state table.

How the parts talk: the heartbeat request manager builds requests from the membership's state
and hands every response to a membership method (``on_join_succeeded``, ``fence``, ``fail``...);
the membership never builds a request. The membership reaches the application thread only
through background events (callbacks to run, fatal errors) and hears back through application
events (``on_callback_completed``, ``on_poll``, ``leave``...).
"""
