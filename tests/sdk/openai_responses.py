"""The official OpenAI Python SDK's Responses API through
`llmprobe route --serve`, with each upstream dialect behind it.

Usage: openai_responses.py BASE_URL MODEL [MODEL ...]

For each MODEL (a pinned `provider::model`, one per upstream dialect), it
records what came back from:

- `responses.create`, not streamed: `output_text`, `status`, the usage;
- the same with `stream=True`: the event types in order, the text put
  together from `response.output_text.delta`s, and the final
  `response.completed` event's response;
- a function call: the `function_call` item (name, call_id, parsed
  arguments), then the round trip with the call and its
  `function_call_output` sent back in full (`store=False`), and the
  answer; and the call streamed, its arguments put together from
  `response.function_call_arguments.delta`s;
- the SDK's `responses.stream` helper, which rebuilds the response from
  the events and checks their order, on the function call;
- `previous_response_id` naming the plain answer: the next turn, chained;
  an `item_reference` to the plain answer's message item, resolved; and
  `previous_response_id` naming a response route does not hold: the
  `BadRequestError`.

Prints one JSON object for the Rust test to check; any other exception
fails the script.
"""

import json
import sys

import openai

TOOLS = [
    {
        "type": "function",
        "name": "add",
        "description": "Add two numbers.",
        "strict": True,
        "parameters": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "a": {"type": "number", "description": "the first"},
                "b": {"type": "number", "description": "the second"},
            },
            "required": ["a", "b"],
        },
    }
]
QUESTION = "What is 7 + 7? Reply with only the number."
ASK = "What is 12 + 30? Use the add tool."
NEXT = "What is 2 + 2? Reply with only the number."


def streamed_text(client, model):
    kinds, text, final, seqs = [], "", None, []
    stream = client.responses.create(
        model=model, input=QUESTION, instructions="You are terse.", stream=True
    )
    for event in stream:
        kinds.append(event.type)
        seqs.append(event.sequence_number)
        if event.type == "response.output_text.delta":
            text += event.delta
        elif event.type == "response.completed":
            final = event.response
    return {
        "kinds": kinds,
        "sequence_ok": seqs == list(range(len(seqs))),
        "text": text,
        "completed": {
            "status": final.status,
            "output_text": final.output_text,
            "output_tokens": final.usage.output_tokens if final.usage else None,
        },
    }


def streamed_call(client, model):
    args, name, final = "", None, None
    for event in client.responses.create(model=model, input=ASK, tools=TOOLS, stream=True):
        if event.type == "response.output_item.added" and event.item.type == "function_call":
            name = event.item.name
        elif event.type == "response.function_call_arguments.delta":
            args += event.delta
        elif event.type == "response.completed":
            final = event.response
    calls = [o for o in final.output if o.type == "function_call"]
    return {
        "name": name,
        "arguments": json.loads(args),
        "final_arguments": json.loads(calls[0].arguments),
    }


def one_model(client, model):
    out = {}
    r = client.responses.create(model=model, input=QUESTION, max_output_tokens=64)
    plain = r
    out["plain"] = {
        "id": r.id,
        "status": r.status,
        "output_text": r.output_text,
        "input_tokens": r.usage.input_tokens,
        "output_tokens": r.usage.output_tokens,
    }
    out["stream"] = streamed_text(client, model)
    with client.responses.stream(model=model, input=ASK, tools=TOOLS) as stream:
        final = stream.get_final_response()
    helper_call = next(o for o in final.output if o.type == "function_call")
    out["stream_helper"] = {
        "status": final.status,
        "name": helper_call.name,
        "arguments": json.loads(helper_call.arguments),
    }

    r = client.responses.create(model=model, input=ASK, tools=TOOLS)
    call = next(o for o in r.output if o.type == "function_call")
    args = json.loads(call.arguments)
    out["call"] = {"name": call.name, "call_id": call.call_id, "arguments": args}
    result = str(args.get("a", 0) + args.get("b", 0))
    back = [
        {"role": "user", "content": ASK},
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
        },
        {"type": "function_call_output", "call_id": call.call_id, "output": result},
    ]
    r = client.responses.create(model=model, input=back, tools=TOOLS, store=False)
    out["round_trip"] = {"sent": result, "output_text": r.output_text, "status": r.status}
    out["stream_call"] = streamed_call(client, model)

    first = out["plain"]["id"]
    r = client.responses.create(model=model, input=NEXT, previous_response_id=first)
    out["previous"] = {
        "first": first,
        "previous_response_id": r.previous_response_id,
        "store": r.store,
        "output_text": r.output_text,
    }
    answer = next(o for o in plain.output if o.type == "message")
    r = client.responses.create(
        model=model,
        input=[
            {"role": "user", "content": QUESTION},
            {"type": "item_reference", "id": answer.id},
            {"role": "user", "content": NEXT},
        ],
    )
    out["reference"] = {"id": answer.id, "output_text": r.output_text}
    try:
        client.responses.create(model=model, input=QUESTION, previous_response_id="resp_" + "0" * 32)
        out["unknown_previous"] = {"status": None}
    except openai.BadRequestError as e:
        out["unknown_previous"] = {"status": e.status_code, "message": e.message, "code": e.code}
    return out


def main() -> None:
    base_url, models = sys.argv[1], sys.argv[2:]
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=60)
    out = {"sdk_version": openai.__version__, "models": {}}
    for m in models:
        out["models"][m] = one_model(client, m)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
