"""Network layer, owned by one background thread per client: connections, the selector loop,
cluster metadata and the request queue managers send through. [bg]"""
