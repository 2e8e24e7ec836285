"""The official OpenAI Python SDK as a client of `llmprobe route --serve`.

Usage: openai_client.py BASE_URL API_KEY

Makes the calls an application makes, and prints one JSON object with what
came back, for the Rust test to check: chat.completions.create with and
without stream=True, with_raw_response (to read route's headers), and
models.list. Any exception fails the script (non-zero exit).
"""

import json
import sys

import openai


def main() -> None:
    base_url, api_key = sys.argv[1], sys.argv[2]
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)
    out = {"sdk_version": openai.__version__}

    msgs = [{"role": "user", "content": "What is 7 + 7? Reply with only the number."}]
    r = client.chat.completions.create(model="auto", messages=msgs)
    out["plain"] = {"content": r.choices[0].message.content, "model": r.model}

    raw = client.chat.completions.with_raw_response.create(model="auto", messages=msgs)
    parsed = raw.parse()
    out["raw"] = {
        "routed_via": raw.headers.get("x-routed-via"),
        "fallback_attempts": raw.headers.get("x-fallback-attempts"),
        "fallback_trail": raw.headers.get("x-fallback-trail"),
        "content": parsed.choices[0].message.content,
    }

    pieces = []
    finish = None
    for chunk in client.chat.completions.create(model="auto", messages=msgs, stream=True):
        for choice in chunk.choices:
            if choice.delta and choice.delta.content:
                pieces.append(choice.delta.content)
            if choice.finish_reason:
                finish = choice.finish_reason
    out["stream"] = {"content": "".join(pieces), "finish_reason": finish}

    out["models"] = sorted(m.id for m in client.models.list())

    try:
        client.chat.completions.create(model="no-such-model", messages=msgs)
        out["unknown_model"] = None
    except openai.NotFoundError as e:
        out["unknown_model"] = {"status": e.status_code, "code": e.code}

    print(json.dumps(out))


if __name__ == "__main__":
    main()
