from support.protos import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Order(_message.Message):
    __slots__ = ("id", "customer", "items", "ship_to", "quantities", "total")
    class QuantitiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    CUSTOMER_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    SHIP_TO_FIELD_NUMBER: _ClassVar[int]
    QUANTITIES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    id: int
    customer: str
    items: _containers.RepeatedScalarFieldContainer[str]
    ship_to: _common_pb2.Address
    quantities: _containers.ScalarMap[str, int]
    total: float
    def __init__(self, id: _Optional[int] = ..., customer: _Optional[str] = ..., items: _Optional[_Iterable[str]] = ..., ship_to: _Optional[_Union[_common_pb2.Address, _Mapping]] = ..., quantities: _Optional[_Mapping[str, int]] = ..., total: _Optional[float] = ...) -> None: ...
