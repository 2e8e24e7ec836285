"""The Anthropic Python SDK's `beta.messages.tool_runner`, with its default
settings, against `llmprobe route --serve`.

Usage: anthropic_tool_runner.py BASE_URL MODEL

By default the runner keeps its conversation in a message thread on the
server (`thread: {"type": "create"}`, then `continue` with only the new
tool result). Route keeps none, and answers the first request with the
400 the SDK falls back on (`error.details.error_code` of
`thread_unsupported_request`): the runner then sends the whole history
without `thread`. The fake upstream is told to call the tool `add`; the
runner runs it and sends its result; the model answers.

Prints one JSON object: the final message's text and stop reason, how
many messages the runner produced, and the tool's calls.
"""

import json
import sys

import anthropic
from anthropic import beta_tool

base_url, model = sys.argv[1], sys.argv[2]
client = anthropic.Anthropic(base_url=base_url, api_key="unused", max_retries=0)
calls = []


@beta_tool
def add(a: float, b: float) -> str:
    """Add two numbers.

    Args:
        a: the first
        b: the second
    """
    calls.append([a, b])
    return str(int(a + b))


runner = client.beta.messages.tool_runner(
    model=model,
    max_tokens=256,
    tools=[add],
    messages=[
        {
            "role": "user",
            "content": 'What is 12 + 30? Use the add tool. [[call add {"a": 12, "b": 30}]]',
        }
    ],
)
messages = list(runner)
final = messages[-1]
print(
    json.dumps(
        {
            "text": "".join(b.text for b in final.content if b.type == "text"),
            "stop_reason": final.stop_reason,
            "messages": len(messages),
            "calls": calls,
        }
    )
)
