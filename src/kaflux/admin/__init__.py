"""``kaflux.AdminClient``: topics, partitions, consumer groups and the cluster. [app: the client's
public methods]

:mod:`kaflux.admin.client` is the application-side facade (group calls in
:mod:`kaflux.admin.group_calls`); :mod:`kaflux.admin.request_manager` drives its calls on the
network thread (lookups, fan-out, retries until each call's deadline) from the requests described
in :mod:`kaflux.admin.groups`, :mod:`kaflux.admin.group_describe` and :mod:`kaflux.admin.topics`.
The calls return the frozen dataclasses of :mod:`kaflux.admin.results`.
"""

from kaflux.admin.client import AdminClient, NewTopic
from kaflux.admin.results import (
    ClusterDescription,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    MemberDescription,
    PartitionDescription,
    TopicDescription,
)

__all__ = [
    "AdminClient",
    "ClusterDescription",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "MemberDescription",
    "NewTopic",
    "PartitionDescription",
    "TopicDescription",
]
