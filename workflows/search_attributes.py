"""Typed keys of Vicar's custom search attributes (registered by the embedded server)."""

from temporalio.common import SearchAttributeKey

STATUS = SearchAttributeKey.for_keyword("VicarStatus")
PRINCIPAL = SearchAttributeKey.for_keyword("VicarPrincipal")
STATE = SearchAttributeKey.for_keyword("VicarState")
TASK_TYPE = SearchAttributeKey.for_keyword("VicarTaskType")
CONFIDENCE = SearchAttributeKey.for_float("VicarConfidence")

ALL = (STATUS, PRINCIPAL, STATE, TASK_TYPE, CONFIDENCE)
