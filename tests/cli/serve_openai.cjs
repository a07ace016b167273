// lmc serve driven by the official `openai` npm package (a client nobody
// here wrote). Run by test_serve_openai.py with OPENAI_MODULE (the installed
// package's folder), LMC_BASE_URL (http://127.0.0.1:PORT/v1) and LMC_API_KEY.
"use strict";
const assert = require("node:assert/strict");
const OpenAI = require(process.env.OPENAI_MODULE);

const baseURL = process.env.LMC_BASE_URL;
const client = new OpenAI({ baseURL, apiKey: process.env.LMC_API_KEY, maxRetries: 0, timeout: 60000 });
const MODEL = "kjv:11m";
const messages = [
  { role: "system", content: "Answer as the scripture." },
  { role: "user", content: "Who was Moses?" },
];

const tests = [];
const test = (name, fn) => tests.push({ name, fn });

async function expectError(promise, Type, status, check) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof Type, `expected ${Type.name}, got ${e && e.constructor.name}: ${e}`);
    assert.ok(e instanceof OpenAI.APIError);
    assert.equal(e.status, status);
    if (check) check(e);
    return e;
  }
  assert.fail(`expected ${Type.name}`);
}

test("models", async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [MODEL]);
  const m = await client.models.retrieve(MODEL);
  assert.equal(m.id, MODEL);
  assert.equal(m.object, "model");
});

test("chat: non-streamed and streamed text are the same at temperature 0", async () => {
  const params = { model: MODEL, messages, temperature: 0, max_tokens: 48 };
  const full = await client.chat.completions.create(params);
  assert.equal(full.object, "chat.completion");
  const text = full.choices[0].message.content;
  assert.equal(full.choices[0].message.role, "assistant");
  assert.ok(text.length > 0);
  assert.ok(["stop", "length"].includes(full.choices[0].finish_reason));
  const u = full.usage;
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
  assert.ok(u.completion_tokens > 0 && u.completion_tokens <= 48);

  const stream = await client.chat.completions.create({
    ...params,
    stream: true,
    stream_options: { include_usage: true },
  });
  let streamed = "";
  let finish = null;
  let usage = null;
  let n = 0;
  for await (const chunk of stream) {
    n++;
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta && c.delta.content) streamed += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(n > 3, `only ${n} chunks`);
  assert.equal(streamed, text);
  assert.equal(finish, full.choices[0].finish_reason);
  assert.equal(usage.prompt_tokens, u.prompt_tokens);
  assert.equal(usage.completion_tokens, u.completion_tokens);
  assert.equal(usage.total_tokens, u.total_tokens);

  // the helper that assembles a stream into a completion
  const runner = client.chat.completions.stream(params);
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content, text);
});

test("completions: streamed and not", async () => {
  const params = { model: MODEL, prompt: "And God said,", temperature: 0, max_tokens: 32 };
  const full = await client.completions.create(params);
  assert.equal(full.object, "text_completion");
  const text = full.choices[0].text;
  assert.ok(text.length > 0);
  let streamed = "";
  let usage = null;
  const stream = await client.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) streamed += c.text;
  }
  assert.equal(streamed, text);
  assert.deepEqual(
    [usage.prompt_tokens, usage.completion_tokens],
    [full.usage.prompt_tokens, full.usage.completion_tokens],
  );
});

test("stop strings", async () => {
  const params = { model: MODEL, messages, temperature: 0, max_tokens: 48 };
  const full = (await client.chat.completions.create(params)).choices[0].message.content;
  const cut = full.indexOf(" the ");
  assert.ok(cut > 0, full);
  for (const stop of [" the ", [" the ", "zzz"]]) {
    const r = await client.chat.completions.create({ ...params, stop });
    assert.equal(r.choices[0].message.content, full.slice(0, cut));
    assert.equal(r.choices[0].finish_reason, "stop");
    let streamed = "";
    for await (const chunk of await client.chat.completions.create({ ...params, stop, stream: true }))
      for (const c of chunk.choices) streamed += (c.delta && c.delta.content) || "";
    assert.equal(streamed, full.slice(0, cut));
  }
});

test("usage counts the prompt's tokens", async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Amen" }], temperature: 0, max_tokens: 1 });
  // <s> <|user|> \n Amen <|end|> \n <|assistant|> \n
  const tok = await fetch(baseURL.replace(/\/v1$/, "") + "/tokenize", {
    method: "POST",
    headers: { Authorization: `Bearer ${process.env.LMC_API_KEY}`, "Content-Type": "application/json" },
    body: JSON.stringify({ content: "<s><|user|>\nAmen<|end|>\n<|assistant|>\n" }),
  }).then((x) => x.json());
  assert.equal(r.usage.prompt_tokens, tok.tokens.length);
  assert.equal(r.usage.completion_tokens, 1);
  assert.equal(r.choices[0].finish_reason, "length");
});

test("sampling parameters and seeds", async () => {
  const params = {
    model: MODEL, messages, temperature: 0.9, top_p: 0.95, seed: 11, max_tokens: 24,
    presence_penalty: 0.3, frequency_penalty: 0.3, logit_bias: { 5: -50 },
  };
  const a = await client.chat.completions.create(params);
  const b = await client.chat.completions.create(params);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  // mlx_lm.server's extensions travel as extra body fields
  const c = await client.chat.completions.create({ ...params, top_k: 20, min_p: 0.05, repetition_penalty: 1.2 });
  assert.ok(c.choices[0].message.content.length > 0);
});

test("authentication failure", async () => {
  const bad = new OpenAI({ baseURL, apiKey: "wrong-key", maxRetries: 0 });
  await expectError(bad.chat.completions.create({ model: MODEL, messages }), OpenAI.AuthenticationError, 401,
    (e) => assert.equal(e.code, "invalid_api_key"));
  await expectError(bad.models.list(), OpenAI.AuthenticationError, 401);
});

test("errors surface as the client's error types", async () => {
  await expectError(client.chat.completions.create({ model: "gpt-4o", messages }), OpenAI.NotFoundError, 404,
    (e) => { assert.equal(e.code, "model_not_found"); assert.equal(e.param, "model"); });
  await expectError(client.chat.completions.create({ model: MODEL, messages, n: 2 }), OpenAI.BadRequestError, 400,
    (e) => assert.equal(e.param, "n"));
  await expectError(client.chat.completions.create({ model: MODEL, messages, temperature: 5 }), OpenAI.BadRequestError, 400,
    (e) => assert.equal(e.param, "temperature"));
  await expectError(client.chat.completions.create({ model: MODEL, messages: [] }), OpenAI.BadRequestError, 400);
  await expectError(client.chat.completions.create({ model: MODEL, messages, max_tokens: "many" }), OpenAI.BadRequestError, 400,
    (e) => assert.equal(e.code, "invalid_type"));
  const long = "And God said, Let there be light. ".repeat(200);
  await expectError(client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: long }] }),
    OpenAI.BadRequestError, 400, (e) => assert.equal(e.code, "context_length_exceeded"));
  await expectError(client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: long }], stream: true }),
    OpenAI.BadRequestError, 400, (e) => assert.equal(e.code, "context_length_exceeded"));
  await expectError(client.completions.create({ model: MODEL, prompt: ["a", "b"] }), OpenAI.BadRequestError, 400);
});

test("a stream aborted by the client", async () => {
  const ac = new AbortController();
  const stream = await client.completions.create(
    { model: MODEL, prompt: "And", temperature: 0, max_tokens: 1000, stream: true, logit_bias: { 1: -100, 6: -100 } },
    { signal: ac.signal },
  );
  let n = 0;
  try {
    for await (const chunk of stream) {
      if (++n === 3) ac.abort(); // the client's stream ends quietly, or throws its abort error
    }
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === "AbortError", String(e));
  }
  assert.ok(n < 100, `${n} chunks after the abort`);
  // the server is free for the next request at once
  const r = await client.completions.create({ model: MODEL, prompt: "And", temperature: 0, max_tokens: 4 });
  assert.equal(r.choices[0].finish_reason, "length");
});

(async () => {
  let failed = 0;
  for (const t of tests) {
    try {
      await t.fn();
      console.log(`ok - ${t.name}`);
    } catch (e) {
      failed++;
      console.log(`FAIL - ${t.name}\n${e && e.stack ? e.stack : e}`);
    }
  }
  console.log(`${tests.length - failed}/${tests.length} passed`);
  process.exit(failed ? 1 : 0);
})();
