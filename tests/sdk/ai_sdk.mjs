// The Vercel AI SDK (`ai` with `@ai-sdk/openai`) against `llmprobe route
// --serve`, through the provider's default model, which speaks the
// Responses API with `store` unset: from the second turn on it sends the
// assistant's earlier message items as `item_reference`s to the ids route
// returned.
//
// Usage: node ai_sdk.mjs AI_SDK_DIR BASE_URL MODEL
//
// AI_SDK_DIR is where `ai` and `@ai-sdk/openai` are installed
// (.ci/npm/ai-sdk-*). For MODEL (a name route resolves) it holds:
// - a three-turn chat with generateText, each turn's response messages
//   kept for the next;
// - the same three turns with streamText;
// - an agent loop: a tool `add` that the fake upstream is told to call,
//   run by the SDK, and the answer after its result;
// - how many `item_reference`s the SDK sent, read from its own requests.
// Prints one JSON object for the Rust test to check; an exception fails.

import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const [dir, baseURL, modelName] = process.argv.slice(2);
const req = createRequire(path.join(path.resolve(dir), 'package.json'));
const load = async (name) => import(pathToFileURL(req.resolve(name)).href);
const { generateText, streamText, tool, stepCountIs } = await load('ai');
const { createOpenAI } = await load('@ai-sdk/openai');
const { z } = await load('zod');

// What the SDK sends, to show that later turns refer to earlier answers.
const sent = [];
const openai = createOpenAI({
  baseURL,
  apiKey: 'unused',
  fetch: async (url, init) => {
    if (init && typeof init.body === 'string') sent.push(JSON.parse(init.body));
    return fetch(url, init);
  },
});
const model = openai(modelName);
const questions = ['What is 2+2?', 'What is 3+4?', 'What is 5+6?'];

async function chat(stream) {
  const messages = [];
  const answers = [];
  for (const q of questions) {
    messages.push({ role: 'user', content: q });
    let text;
    let response;
    if (stream) {
      const r = streamText({ model, messages });
      text = await r.text;
      response = await r.response;
    } else {
      const r = await generateText({ model, messages });
      text = r.text;
      response = r.response;
    }
    answers.push(text);
    messages.push(...response.messages);
  }
  return answers;
}

const calls = [];
const add = tool({
  description: 'Add two numbers.',
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => {
    calls.push([a, b]);
    return a + b;
  },
});
const agent = await generateText({
  model,
  tools: { add },
  stopWhen: stepCountIs(5),
  prompt: 'What is 12 + 30? Use the add tool. [[call add {"a": 12, "b": 30}]]',
});

console.log(JSON.stringify({
  chat: await chat(false),
  chat_stream: await chat(true),
  agent: { text: agent.text, steps: agent.steps.length, calls },
  item_references: sent.flatMap((b) => (Array.isArray(b.input) ? b.input : []))
    .filter((i) => i.type === 'item_reference').length,
  stored: sent.filter((b) => b.store !== false).length,
  requests: sent.length,
}));
