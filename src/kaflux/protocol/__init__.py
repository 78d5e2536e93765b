"""The Kafka wire protocol. [pure]

* :mod:`kaflux.protocol.primitives`: ``Reader`` / ``Writer`` for the wire primitives.
* :mod:`kaflux.protocol.messages`: request, response, header and consumer-protocol classes,
  generated from Kafka's JSON message specs by ``tools/generate_messages.py``.
* :mod:`kaflux.protocol.api`: ``ApiKey``, the versions kaflux implements, header versions
  and version negotiation.
"""
