// The OpenAI SDK (npm `openai`) against one kvprof server, each case asserting what the engine
// that server imitates answers: vLLM (`serve-sim`) or llama-server (`kvprof serve`).
//   node openai_sdk_test.mjs --base http://127.0.0.1:PORT --dialect vllm|llama-server
//                            --model ID --context TOKENS
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const require = createRequire(import.meta.url + '/../');
const { default: OpenAI } = await import(require.resolve('openai', { paths: [process.env.NODE_PATH] }));

const { values: arg } = parseArgs({
  options: { base: { type: 'string' }, dialect: { type: 'string' }, model: { type: 'string' },
    context: { type: 'string' } } });
const vllm = arg.dialect === 'vllm';
const model = arg.model;
const client = new OpenAI({ baseURL: `${arg.base}/v1`, apiKey: 'none', maxRetries: 0,
  timeout: 30000 });
let failed = 0;

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${arg.dialect}: ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${arg.dialect}: ${name}: ${e.message}`);
  }
}

// The error the SDK raised for a refused request (its class carries the HTTP status).
async function refusal(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('the request was not refused');
}

await check('models.list names the served model', async () => {
  const page = await client.models.list();
  assert.deepEqual(page.data.map((m) => m.id), [model]);
  assert.equal(page.data[0].object, 'model');
});

await check('chat completion', async () => {
  const r = await client.chat.completions.create({ model, max_tokens: 4,
    messages: [{ role: 'user', content: 'w1 w2 w3' }] });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 4);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 4);
});

await check('text completion', async () => {
  const r = await client.completions.create({ model, prompt: 'w1 w2 w3', max_tokens: 4 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.completion_tokens, 4);
});

await check('streamed chat with include_usage: a last chunk of usage and no choices', async () => {
  const stream = await client.chat.completions.create({ model, max_tokens: 5, stream: true,
    stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'w1 w2' }] });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 5);
  const finish = chunks.filter((c) => c.choices[0]?.finish_reason);
  assert.equal(finish.length, 1);
  assert.equal(finish[0].choices[0].finish_reason, 'length');
  assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk'));
});

await check('a stop string ends the answer before it', async () => {
  // Every token of both servers' vocabularies starts with " w": the first one stops it.
  const r = await client.completions.create({ model, prompt: 'w1 w2', max_tokens: 8,
    stop: [' w'] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].text, '');
  const s = await client.completions.create({ model, prompt: 'w1', max_tokens: 8, stream: true,
    stop: ['w'] });
  let text = '';
  let reason = null;
  for await (const c of s) {
    text += c.choices[0]?.text ?? '';
    reason = c.choices[0]?.finish_reason ?? reason;
  }
  assert.equal(reason, 'stop');
  assert.ok(!text.includes('w'), `streamed '${text}'`);
});

await check('n = 2', async () => {
  if (!vllm) {
    // llama-server samples one choice and refuses more, in its own words.
    const e = await refusal(client.completions.create({ model, prompt: 'w1', max_tokens: 2,
      n: 2 }));
    assert.equal(e.status, 400);
    assert.match(e.message, /Only one completion choice is allowed/);
    return;
  }
  // vLLM samples n sequences from the one prompt: choices 0 and 1, the prompt counted once.
  const r = await client.completions.create({ model, prompt: 'w1 w2', max_tokens: 3, n: 2 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  for (const c of r.choices) assert.equal(c.finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 6);
  const one = await client.completions.create({ model, prompt: 'w1 w2', max_tokens: 3 });
  assert.equal(r.usage.prompt_tokens, one.usage.prompt_tokens);
  const chat = await client.chat.completions.create({ model, max_tokens: 2, n: 3,
    messages: [{ role: 'user', content: 'w1' }] });
  assert.deepEqual(chat.choices.map((c) => c.index), [0, 1, 2]);
  for (const c of chat.choices) assert.equal(c.message.role, 'assistant');
  // Streamed: each chunk names its choice; each choice ends once; the usage sums them.
  const s = await client.chat.completions.create({ model, max_tokens: 3, n: 2, stream: true,
    stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'w1' }] });
  const roles = new Set();
  const ends = [];
  let usage = null;
  for await (const c of s) {
    for (const ch of c.choices) {
      if (ch.delta?.role) roles.add(ch.index);
      if (ch.finish_reason) ends.push(ch.index);
    }
    if (c.usage) usage = c.usage;
  }
  assert.deepEqual([...roles].sort(), [0, 1]);
  assert.deepEqual(ends.sort(), [0, 1]);
  assert.equal(usage.completion_tokens, 6);
  const zero = await refusal(client.completions.create({ model, prompt: 'w1', max_tokens: 2,
    n: 0 }));
  assert.equal(zero.status, 400);
  assert.match(zero.message, /n must be at least 1, got 0/);
});

await check('an unknown model', async () => {
  const request = client.completions.create({ model: 'no-such-model', prompt: 'w1',
    max_tokens: 2 });
  if (vllm) {
    const e = await refusal(request);
    assert.equal(e.status, 404);
    assert.match(e.message, /The model `no-such-model` does not exist/);
  } else {
    // llama-server serves one model whatever the request names.
    assert.equal((await request).choices.length, 1);
  }
});

await check('a prompt longer than the context', async () => {
  const context = Number(arg.context);
  const e = await refusal(client.completions.create({ model, max_tokens: 2,
    prompt: 'w1 '.repeat(context + 10) }));
  assert.equal(e.status, 400);
  assert.match(e.message, vllm ? /maximum context length is \d+ tokens/
    : /exceeds the available context size/);
});

await check('a cancelled stream frees its place; the server goes on', async () => {
  const ac = new AbortController();
  const s = await client.completions.create({ model, prompt: 'w1', max_tokens: 400,
    stream: true }, { signal: ac.signal });
  let n = 0;
  try {
    for await (const c of s) {
      void c;
      // Stop reading at once: chunks already received would still be handed out after abort().
      if (++n === 2) {
        ac.abort();
        break;
      }
    }
  } catch (e) {
    assert.match(e.constructor.name, /Abort/);
  }
  assert.equal(n, 2);
  const gauge = vllm ? 'vllm:num_requests_running' : 'llamacpp:requests_processing';
  let running = null;
  for (let i = 0; i < 100 && running !== 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const text = await (await fetch(`${arg.base}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(gauge));
    running = line === undefined ? null : Number(line.split(' ').at(-1));
  }
  assert.equal(running, 0, `${gauge} stayed at ${running}`);
  const r = await client.completions.create({ model, prompt: 'w1', max_tokens: 2 });
  assert.equal(r.usage.completion_tokens, 2);
});

await check('content types, HEAD and OPTIONS as the engine sends them', async () => {
  const models = await fetch(`${arg.base}/v1/models`);
  assert.equal(models.headers.get('content-type'),
    vllm ? 'application/json' : 'application/json; charset=utf-8');
  const body = await models.text();
  const head = await fetch(`${arg.base}/v1/models`, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(Number(head.headers.get('content-length')), Buffer.byteLength(body));
  assert.equal(await head.text(), '');
  const options = await fetch(`${arg.base}/v1/chat/completions`, { method: 'OPTIONS' });
  assert.equal(options.status, 200);
  assert.match(options.headers.get('allow'), /POST/);
  const metrics = await fetch(`${arg.base}/metrics`);
  assert.match(metrics.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const stream = await fetch(`${arg.base}/v1/completions`, { method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, prompt: 'w1', max_tokens: 1, stream: true }) });
  assert.match(stream.headers.get('content-type'), /^text\/event-stream/);
  await stream.text();
});

if (failed > 0) {
  console.log(`${failed} case(s) failed against ${arg.base}`);
  process.exit(1);
}
