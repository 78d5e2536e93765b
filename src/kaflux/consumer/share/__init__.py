"""Share groups (KIP-932): ``kaflux.ShareConsumer`` and its background parts. [pure: package]

* :mod:`~kaflux.consumer.share.membership` -- the member and its assignment, on the shared
  membership core (its state table is in ``consumer/member_state.py``);
* :mod:`~kaflux.consumer.share.heartbeat` -- ShareGroupHeartbeat, on the shared heartbeat base;
* :mod:`~kaflux.consumer.share.acknowledgements` -- acquired records and their acknowledgements;
* :mod:`~kaflux.consumer.share.consume_request_manager` -- ShareFetch / ShareAcknowledge, one
  share session per broker;
* :mod:`~kaflux.consumer.share.consumer` -- the facade.
"""
