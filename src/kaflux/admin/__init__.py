"""``kaflux.AdminClient``: topics and cluster administration. [app: the client's public methods]

:mod:`kaflux.admin.client` is the application-side facade; :mod:`kaflux.admin.request_manager`
turns its calls into requests on the network thread, retrying retriable failures until each
call's deadline.
"""

from kaflux.admin.client import AdminClient, NewTopic

__all__ = ["AdminClient", "NewTopic"]
