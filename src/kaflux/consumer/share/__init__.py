"""Share groups (KIP-932): ``kaflux.ShareConsumer`` and its background parts. [pure: package]

* :mod:`~kaflux.consumer.share.membership` -- the member's state table and assignment;
* :mod:`~kaflux.consumer.share.heartbeat` -- ShareGroupHeartbeat;
* :mod:`~kaflux.consumer.share.acknowledgements` -- acquired records and their acknowledgements;
* :mod:`~kaflux.consumer.share.consume_request_manager` -- ShareFetch / ShareAcknowledge, one
  share session per broker;
* :mod:`~kaflux.consumer.share.consumer` -- the facade.
"""
