"""Test-support code: doubles of servers the tests cannot install. [test]"""
