"""The consumer: an application-thread facade over a background network thread. [app]"""
