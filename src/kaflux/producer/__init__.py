"""The producer: an application-side accumulator and a background sender. [app]"""
