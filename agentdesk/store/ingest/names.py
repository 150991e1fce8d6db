"""The attribute names agentdesk reads, taken from the conventions' own packages instead of string literals.

- OpenTelemetry GenAI: `opentelemetry-semantic-conventions`'
  `opentelemetry.semconv._incubating.attributes.gen_ai_attributes` (the GenAI conventions are still
  "development", hence `_incubating`), and the stable `service.name`, `error.type`, `exception.*`.
- OpenInference: `openinference-semantic-conventions` (`SpanAttributes`, `ResourceAttributes`).

What the packages do not name is kept here, once, with where it comes from: the GenAI *event* names (the
installed semconv release ships no events module), the indexed `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`
prefixes of the conventions before 1.37 (the package has only the deprecated whole-attribute names), and
agentdesk's own `agentdesk.*` keys. docs/otel.md lists the convention versions this covers.
"""

from __future__ import annotations

from openinference.semconv.resource import ResourceAttributes as _OIResource
from openinference.semconv.trace import SpanAttributes as _OI
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _g
from opentelemetry.semconv.attributes import error_attributes as _err
from opentelemetry.semconv.attributes import exception_attributes as _exc
from opentelemetry.semconv.attributes import service_attributes as _svc

# -- OpenTelemetry GenAI ------------------------------------------------------------------------
OPERATION = _g.GEN_AI_OPERATION_NAME
REQUEST_MODEL = _g.GEN_AI_REQUEST_MODEL
RESPONSE_MODEL = _g.GEN_AI_RESPONSE_MODEL
AGENT_ID = _g.GEN_AI_AGENT_ID
AGENT_NAME = _g.GEN_AI_AGENT_NAME
CONVERSATION_ID = _g.GEN_AI_CONVERSATION_ID
INPUT_TOKENS = _g.GEN_AI_USAGE_INPUT_TOKENS
OUTPUT_TOKENS = _g.GEN_AI_USAGE_OUTPUT_TOKENS
PROMPT_TOKENS = _g.GEN_AI_USAGE_PROMPT_TOKENS  # deprecated name, still sent by older instrumentations
COMPLETION_TOKENS = _g.GEN_AI_USAGE_COMPLETION_TOKENS  # deprecated name, likewise
INPUT_MESSAGES = _g.GEN_AI_INPUT_MESSAGES
OUTPUT_MESSAGES = _g.GEN_AI_OUTPUT_MESSAGES
SYSTEM_INSTRUCTIONS = _g.GEN_AI_SYSTEM_INSTRUCTIONS
TOOL_NAME = _g.GEN_AI_TOOL_NAME
TOOL_CALL_ARGUMENTS = _g.GEN_AI_TOOL_CALL_ARGUMENTS
TOOL_CALL_RESULT = _g.GEN_AI_TOOL_CALL_RESULT
PROVIDER_NAME = _g.GEN_AI_PROVIDER_NAME
SYSTEM = _g.GEN_AI_SYSTEM  # the provider's older name
CACHE_READ_TOKENS = _g.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS
CACHE_WRITE_TOKENS = _g.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
REASONING_TOKENS = _g.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS
PROMPT_PREFIX = _g.GEN_AI_PROMPT + "."  # gen_ai.prompt.N.role / .content (before 1.37)
COMPLETION_PREFIX = _g.GEN_AI_COMPLETION + "."  # gen_ai.completion.N.*

_ops = _g.GenAiOperationNameValues
MODEL_OPERATIONS = frozenset({_ops.CHAT.value, _ops.TEXT_COMPLETION.value, _ops.GENERATE_CONTENT.value,
                              _ops.EMBEDDINGS.value})
AGENT_OPERATION = _ops.INVOKE_AGENT.value
CHAT_OPERATION = _ops.CHAT.value
AGENT_OPERATIONS = frozenset({AGENT_OPERATION})
TOOL_OPERATION = _ops.EXECUTE_TOOL.value

# GenAI events (log records with an event name, or span events): not in the installed semconv package.
INFERENCE_DETAILS_EVENT = "gen_ai.client.inference.operation.details"  # 1.37+
MESSAGE_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                  "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}  # up to 1.36
CHOICE_EVENT = "gen_ai.choice"  # up to 1.36

# -- stable OpenTelemetry ------------------------------------------------------------------------
SERVICE_NAME = _svc.SERVICE_NAME
ERROR_TYPE = _err.ERROR_TYPE
EXCEPTION_TYPE = _exc.EXCEPTION_TYPE
EXCEPTION_MESSAGE = _exc.EXCEPTION_MESSAGE

# -- OpenInference -------------------------------------------------------------------------------
OI_SPAN_KIND = _OI.OPENINFERENCE_SPAN_KIND
OI_PROJECT = _OIResource.PROJECT_NAME
OI_MODEL_NAME = _OI.LLM_MODEL_NAME
OI_PROMPT_TOKENS = _OI.LLM_TOKEN_COUNT_PROMPT
OI_COMPLETION_TOKENS = _OI.LLM_TOKEN_COUNT_COMPLETION
OI_COST_TOTAL = _OI.LLM_COST_TOTAL
OI_PROVIDER = _OI.LLM_PROVIDER
OI_SYSTEM = _OI.LLM_SYSTEM
OI_CACHE_READ_TOKENS = _OI.LLM_TOKEN_COUNT_PROMPT_DETAILS_CACHE_READ
OI_CACHE_WRITE_TOKENS = _OI.LLM_TOKEN_COUNT_PROMPT_DETAILS_CACHE_WRITE
OI_REASONING_TOKENS = _OI.LLM_TOKEN_COUNT_COMPLETION_DETAILS_REASONING
OI_INPUT_MESSAGES_PREFIX = _OI.LLM_INPUT_MESSAGES + "."
OI_OUTPUT_MESSAGES_PREFIX = _OI.LLM_OUTPUT_MESSAGES + "."
OI_INPUT_VALUE = _OI.INPUT_VALUE
OI_OUTPUT_VALUE = _OI.OUTPUT_VALUE
OI_TOOL_PARAMETERS = _OI.TOOL_PARAMETERS
OI_SESSION_ID = _OI.SESSION_ID
OI_AGENT_NAME = _OI.AGENT_NAME
OI_REQUEST_TYPE = "llm.request.type"  # OpenLLMetry (Traceloop), not an OpenInference name
