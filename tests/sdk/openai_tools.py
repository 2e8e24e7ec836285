"""The official OpenAI Python SDK calling tools and asking for JSON through
`llmprobe route --serve`, with each upstream dialect behind it.

Usage: openai_tools.py BASE_URL MODEL [MODEL ...]

For each MODEL (a pinned `provider::model`, one per upstream dialect), it
makes the calls an agent makes and records what came back:

- a tool call, not streamed: the call's name and parsed arguments, and
  `finish_reason`;
- the same, streamed: the call put together from its deltas (id and name
  from the first delta of its index, the arguments from every fragment);
- the round trip: the assistant's call and a tool result sent back, and
  the model's answer;
- JSON mode, `json_object` and `json_schema`: the content, parsed.

Then one `auto` request with `n: 2`, which only OpenAI-dialect models can
take, read with its headers. Prints one JSON object for the Rust test to
check; any exception fails the script.
"""

import json
import sys

import openai

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "a": {"type": "number", "description": "the first"},
                    "b": {"type": "number", "description": "the second"},
                },
                "required": ["a", "b"],
            },
        },
    }
]
QUESTION = [{"role": "user", "content": "What is 12 + 30? Use the add tool."}]
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}, "unit": {"type": "string"}},
    "required": ["answer", "unit"],
    "additionalProperties": False,
}


def call_of(message):
    call = message.tool_calls[0]
    return {
        "id": call.id,
        "name": call.function.name,
        "arguments": json.loads(call.function.arguments),
    }


def streamed_call(client, model):
    calls, finish = {}, None
    for chunk in client.chat.completions.create(
        model=model, messages=QUESTION, tools=TOOLS, stream=True
    ):
        for choice in chunk.choices:
            for d in choice.delta.tool_calls or []:
                c = calls.setdefault(d.index, {"id": None, "name": None, "arguments": ""})
                if d.id:
                    c["id"] = d.id
                if d.function and d.function.name:
                    c["name"] = d.function.name
                if d.function and d.function.arguments:
                    c["arguments"] += d.function.arguments
            if choice.finish_reason:
                finish = choice.finish_reason
    out = [dict(c, arguments=json.loads(c["arguments"])) for _, c in sorted(calls.items())]
    return {"calls": out, "finish_reason": finish}


def one_model(client, model):
    out = {}
    r = client.chat.completions.create(model=model, messages=QUESTION, tools=TOOLS)
    out["call"] = call_of(r.choices[0].message)
    out["finish_reason"] = r.choices[0].finish_reason
    out["stream"] = streamed_call(client, model)

    call = r.choices[0].message.tool_calls[0]
    args = json.loads(call.function.arguments)
    result = str(args.get("a", 0) + args.get("b", 0))
    back = QUESTION + [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": result},
    ]
    r = client.chat.completions.create(model=model, messages=back, tools=TOOLS)
    out["round_trip"] = {
        "sent": result,
        "content": r.choices[0].message.content,
        "finish_reason": r.choices[0].finish_reason,
    }

    r = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is 6 * 7? Answer in JSON."}],
        response_format={"type": "json_object"},
    )
    out["json_object"] = json.loads(r.choices[0].message.content)
    r = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is 6 * 7? Answer in JSON."}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
        },
    )
    out["json_schema"] = json.loads(r.choices[0].message.content)
    return out


def main() -> None:
    base_url, models = sys.argv[1], sys.argv[2:]
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=60)
    out = {"sdk_version": openai.__version__, "models": {}}
    for m in models:
        out["models"][m] = one_model(client, m)
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "What is 2 + 2?"}], n=2
    )
    out["skip"] = {
        "routed_via": raw.headers.get("x-routed-via"),
        "fallback_attempts": raw.headers.get("x-fallback-attempts"),
        "fallback_trail": raw.headers.get("x-fallback-trail"),
        "choices": len(raw.parse().choices),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
