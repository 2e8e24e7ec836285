"""The official Anthropic Python SDK against `llmprobe route --serve`'s
Messages surface, with each upstream dialect behind it.

Usage: anthropic_client.py BASE_URL MODEL [MODEL ...]

For each MODEL (a pinned `provider::model`, one per upstream dialect), it
makes the calls a client of the Messages API makes and records what came
back:

- `messages.create`: the text, `stop_reason`, `usage`, the id, and the
  headers route adds (read with `with_raw_response`);
- `messages.stream`: the text events joined, and `get_final_message()`;
- a tool call, not streamed and streamed (`get_final_message()`): the
  `tool_use` block's id, name and input, and `stop_reason`;
- the round trip: the assistant's `tool_use` and a `tool_result` sent
  back, not streamed and streamed, and the model's answer.

Then `messages.count_tokens`, and an unknown model, which must raise
`NotFoundError`. Prints one JSON
object for the Rust test to check; any other exception fails the script.
"""

import json
import sys

import anthropic

QUESTION = [{"role": "user", "content": "What is 7 + 7? Reply with only the number."}]
TOOL_QUESTION = [{"role": "user", "content": "What is 12 + 30? Use the add tool."}]
TOOLS = [
    {
        "name": "add",
        "description": "Add two numbers.",
        "input_schema": {
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "the first"},
                "b": {"type": "number", "description": "the second"},
            },
            "required": ["a", "b"],
        },
        "cache_control": {"type": "ephemeral"},
    }
]
SYSTEM = [{"type": "text", "text": "You are a calculator.", "cache_control": {"type": "ephemeral"}}]


def tool_use_of(message):
    blocks = [b for b in message.content if b.type == "tool_use"]
    empty_text = [b for b in message.content if b.type == "text" and not b.text]
    b = blocks[0]
    return {
        "id": b.id,
        "name": b.name,
        "input": b.input,
        "calls": len(blocks),
        "empty_text_blocks": len(empty_text),
        "stop_reason": message.stop_reason,
    }


def text_of(message):
    return "".join(b.text for b in message.content if b.type == "text")


def one_model(client, model):
    out = {}
    raw = client.messages.with_raw_response.create(
        model=model, max_tokens=256, system=SYSTEM, messages=QUESTION
    )
    m = raw.parse()
    out["create"] = {
        "id": m.id,
        "text": text_of(m),
        "stop_reason": m.stop_reason,
        "model": m.model,
        "input_tokens": m.usage.input_tokens,
        "output_tokens": m.usage.output_tokens,
        "routed_via": raw.headers.get("x-routed-via"),
    }

    texts = []
    with client.messages.stream(model=model, max_tokens=256, messages=QUESTION) as stream:
        for t in stream.text_stream:
            texts.append(t)
        final = stream.get_final_message()
    out["stream"] = {
        "text_events": "".join(texts),
        "final_text": text_of(final),
        "stop_reason": final.stop_reason,
        "id": final.id,
        "input_tokens": final.usage.input_tokens,
    }

    m = client.messages.create(model=model, max_tokens=256, messages=TOOL_QUESTION, tools=TOOLS)
    out["tool"] = tool_use_of(m)
    with client.messages.stream(
        model=model, max_tokens=256, messages=TOOL_QUESTION, tools=TOOLS
    ) as stream:
        streamed = stream.get_final_message()
    out["tool_stream"] = tool_use_of(streamed)

    call = out["tool"]
    result = str(call["input"].get("a", 0) + call["input"].get("b", 0))
    back = TOOL_QUESTION + [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": result}],
        },
    ]
    r = client.messages.create(model=model, max_tokens=256, messages=back, tools=TOOLS)
    out["round_trip"] = {"sent": result, "text": text_of(r), "stop_reason": r.stop_reason}
    with client.messages.stream(model=model, max_tokens=256, messages=back, tools=TOOLS) as stream:
        r = stream.get_final_message()
    out["round_trip_stream"] = {"text": text_of(r), "stop_reason": r.stop_reason}
    return out


def main() -> None:
    base_url, models = sys.argv[1], sys.argv[2:]
    client = anthropic.Anthropic(base_url=base_url, api_key="unused", max_retries=0, timeout=60)
    out = {"sdk_version": anthropic.__version__, "models": {}}
    for m in models:
        out["models"][m] = one_model(client, m)
    counted = client.messages.count_tokens(model=models[0], messages=QUESTION, tools=TOOLS)
    out["count_tokens"] = counted.input_tokens
    try:
        client.messages.create(model="no-such-model", max_tokens=16, messages=QUESTION)
        out["unknown_model"] = "served"
    except anthropic.NotFoundError as e:
        out["unknown_model"] = {
            "status": e.status_code,
            "type": e.body["error"]["type"] if isinstance(e.body, dict) else None,
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
