"""Group membership in parts, shaped after Java's new consumer. [bg, pure: takes now_ms]

A group protocol is two request managers that ``consumer/components.py`` builds apart and
registers side by side, as Java's ``RequestManagers`` does: a *membership* (the member's state
and decisions) and a *heartbeat request manager* (its requests and what their answers mean).
The heartbeat is given its membership and sees it only through the Protocols of
:mod:`.contracts`; the membership never sees its heartbeat. The protocols share the rest:

* :mod:`.member` and :mod:`.core` -- the protocol-neutral membership (Java's
  ``AbstractMembershipManager``). :class:`~.member.GroupMembership` is who the member is: its
  identity and :class:`MemberState` machine (``consumer/member_state.py``), its reports
  (``group_state()``, commit identity, rebalance metrics) and the topics it needs;
  :class:`~.core.MembershipCore` is what it does: joining, the assignment bookkeeping (revoke,
  then assign; pending revocation; lost partitions), fencing, fatal errors and leaving.
* :mod:`.heartbeat` -- :class:`~.heartbeat.HeartbeatRequestManagerBase` (Java's
  ``AbstractHeartbeatRequestManager``): the poll timer (:mod:`.poll_timer`,
  ``max.poll.interval.ms``), the start of every pass, the leave request's send deadline and the
  coordinator-error classes.
* :mod:`.callbacks` -- :class:`~.callbacks.RebalanceCallbacks`: rebalance listener methods
  requested from the application thread with a background event and continued when it
  acknowledges them with an application event.
* :mod:`.group` -- the settings the parts read, and what the member publishes.

The protocols:

* classic (``group.protocol=classic``): :mod:`.classic_membership` (eager or cooperative
  rebalances, the leader's assignment) and :mod:`.classic_heartbeat` (JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup);
* KIP-848 (``group.protocol=consumer``): :mod:`.consumer_membership` (the coordinator assigns;
  the member reconciles towards its target and acknowledges it) and :mod:`.consumer_heartbeat`
  (ConsumerGroupHeartbeat);

each with its own state table. Share groups (KIP-932) are a third pair on the same core, kept
with the rest of the share consumer: ``consumer/share/membership.py`` and
``consumer/share/heartbeat.py`` (built by ``components.build_share_group``).

How the parts talk: the heartbeat builds requests from the
membership's state and hands every response to a membership method (``on_join_succeeded``,
``fence``, ``fail``...); the membership never builds a request. The membership reaches the
application thread only through background events (callbacks to run, fatal errors) and hears
back through application events (``on_callback_completed``, ``on_poll``, ``leave``...).
"""
