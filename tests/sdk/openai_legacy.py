"""The official OpenAI and Anthropic Python SDKs against what else
`llmprobe route --serve` serves: legacy Completions, one model by id, and
the Anthropic-shaped model list.

Usage: openai_legacy.py BASE_URL API_KEY MODEL...

BASE_URL is the server's root (no /v1). For each MODEL (one per upstream
dialect), the OpenAI SDK's completions.create, without and with
stream=True. Then models.retrieve for the first MODEL, for one whose id
holds a slash (`or::meta-llama/llama-3.3-70b:free`) and for an unknown one
(NotFoundError); completions.create with a suffix (no model can take one:
BadRequestError) and with echo=True (BadRequestError); embeddings.create
(NotFoundError). Then the Anthropic SDK's models.list() and
models.retrieve(). Prints one JSON object with what came back, for the
Rust test to check; any other exception fails the script (non-zero exit).
"""

import json
import sys

import anthropic
import openai

PROMPT = "What is 7 + 7? Reply with only the number."


def main() -> None:
    base_url, api_key, models = sys.argv[1], sys.argv[2], sys.argv[3:]
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key=api_key, max_retries=0, timeout=60)
    out = {"sdk_version": openai.__version__, "models": {}}

    for model in models:
        r = client.completions.create(model=model, prompt=PROMPT, max_tokens=16, temperature=0)
        plain = {
            "id": r.id,
            "object": r.object,
            "model": r.model,
            "text": r.choices[0].text,
            "finish_reason": r.choices[0].finish_reason,
            "total_tokens": r.usage.total_tokens if r.usage else None,
        }
        pieces, finish, objects, ids, usage = [], None, set(), set(), None
        stream = client.completions.create(
            model=model,
            prompt=[PROMPT],
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            objects.add(chunk.object)
            ids.add(chunk.id)
            if chunk.usage:
                usage = chunk.usage.total_tokens
            for choice in chunk.choices:
                pieces.append(choice.text)
                if choice.finish_reason:
                    finish = choice.finish_reason
        out["models"][model] = {
            "plain": plain,
            "stream": {
                "text": "".join(pieces),
                "finish_reason": finish,
                "objects": sorted(objects),
                "ids": len(ids),
                "total_tokens": usage,
            },
        }

    m = client.models.retrieve(models[0])
    out["retrieve"] = {"id": m.id, "owned_by": m.owned_by, "object": m.object}
    # What clients read beyond OpenAI's fields (OpenRouter's names), as the
    # SDK keeps them: the context window and the probed capabilities.
    listed = {x.id: x for x in client.models.list()}
    extra = listed[models[0]].model_extra or {}
    out["extra"] = {k: extra.get(k) for k in ("context_length", "capabilities", "supported_parameters")}
    m = client.models.retrieve("or::meta-llama/llama-3.3-70b:free")
    out["retrieve_slash"] = {"id": m.id, "owned_by": m.owned_by}
    try:
        client.models.retrieve("no-such-model")
        out["retrieve_unknown"] = None
    except openai.NotFoundError as e:
        out["retrieve_unknown"] = {"status": e.status_code, "code": e.code}

    try:
        client.completions.create(model="auto", prompt="fn main() {", suffix="}")
        out["suffix"] = None
    except openai.BadRequestError as e:
        out["suffix"] = {"status": e.status_code, "code": e.code, "message": e.message}
    try:
        client.completions.create(model="auto", prompt=PROMPT, echo=True)
        out["echo"] = None
    except openai.BadRequestError as e:
        out["echo"] = {"status": e.status_code, "message": e.message}
    try:
        client.embeddings.create(model="auto", input="hello")
        out["embeddings"] = None
    except openai.NotFoundError as e:
        out["embeddings"] = {"status": e.status_code, "message": e.message}

    a = anthropic.Anthropic(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)
    listed = list(a.models.list())
    out["anthropic_list"] = [
        {"id": x.id, "type": x.type, "display_name": x.display_name, "year": x.created_at.year}
        for x in listed
    ]
    info = a.models.retrieve(models[0])
    out["anthropic_retrieve"] = {"id": info.id, "display_name": info.display_name}
    try:
        a.models.retrieve("no-such-model")
        out["anthropic_unknown"] = None
    except anthropic.NotFoundError as e:
        out["anthropic_unknown"] = {"status": e.status_code, "type": e.body["error"]["type"]}

    print(json.dumps(out))


if __name__ == "__main__":
    main()
