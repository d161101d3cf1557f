"""Typed keys of Vicar's custom search attributes (registered by the embedded server)."""

from temporalio.common import SearchAttributeIndexedValueType, SearchAttributeKey

STATUS = SearchAttributeKey.for_keyword("VicarStatus")
PRINCIPAL = SearchAttributeKey.for_keyword("VicarPrincipal")
STATE = SearchAttributeKey.for_keyword("VicarState")
TASK_TYPE = SearchAttributeKey.for_keyword("VicarTaskType")
CONFIDENCE = SearchAttributeKey.for_float("VicarConfidence")

ALL = (STATUS, PRINCIPAL, STATE, TASK_TYPE, CONFIDENCE)
# What the server registers (vicar/runtime/server.py, vicar/runtime/connect.py): name -> Temporal's type name.
SEARCH_ATTRIBUTES: dict[str, str] = {
    k.name: {SearchAttributeIndexedValueType.KEYWORD: "Keyword", SearchAttributeIndexedValueType.DOUBLE: "Double"}[
        k.indexed_value_type
    ]
    for k in ALL
}
