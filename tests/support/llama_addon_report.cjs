// Asks a real prebuilt llama.cpp release for its own report of its buffers, through the Node.js
// addon its npm package ships (@node-llama-cpp/linux-x64's llama-addon.node: the C API of the
// release, wrapped the way node-llama-cpp itself calls it). The tests use it for the releases
// whose addon takes every setting (3.21.1 on); tests/llama_c_api/ reaches the older ones.
//
//   node llama_addon_report.cjs RELEASE_DIR MODEL.gguf SETTINGS_JSON
//
// SETTINGS_JSON: an array of {"n_ctx", "n_seq_max", "flash_attn", "n_batch", "type_k"?,
// "type_v"?} (ggml type ids; the addon sets n_ubatch = n_batch and leaves the KV cache per
// sequence, libllama's default). Prints one JSON object per setting: {"settings", "model_log",
// "context_log", "n_ctx"} (what llama.cpp logged up to info level while loading the model and
// while making the context, and the context size it reported) or {"settings", "error"}.
// Exit 1 when the model does not load.
'use strict';
const path = require('path');

const [dir, gguf, settingsJson] = process.argv.slice(2);
if (!dir || !gguf || !settingsJson) {
  console.error('usage: node llama_addon_report.cjs RELEASE_DIR MODEL.gguf SETTINGS_JSON');
  process.exit(2);
}
const addon = require(path.resolve(dir, 'llama-addon.node'));
let log = '';
addon.setLogger((level, message) => { log += message; });
addon.setLoggerLogLevel(5);  // up to info

// llama.cpp's own lines settle in the logger asynchronously; wait until the text stops growing.
async function settled() {
  let before = -1;
  while (before !== log.length) {
    before = log.length;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

(async () => {
  if (addon.loadBackends) addon.loadBackends(path.resolve(dir));
  await addon.init();
  const model = new addon.AddonModel(path.resolve(gguf), {gpuLayers: 0, useMmap: true});
  if (!(await model.init())) {
    await settled();
    const lines = log.trim().split('\n');
    const why = lines.filter((l) => /error loading|failed to load|unknown model/i.test(l)).slice(-3);
    console.error('error: the model did not load: ' + (why.length ? why : lines.slice(-2)).join(' | '));
    process.exit(1);
  }
  await settled();
  const modelLog = log;
  for (const s of JSON.parse(settingsJson)) {
    log = '';
    const ctx = new addon.AddonContext(model, {
      contextSize: s.n_ctx, sequences: s.n_seq_max, flashAttention: s.flash_attn,
      batchSize: s.n_batch, threads: 1,
      ...(s.type_k !== undefined && {kvCacheKeyType: s.type_k}),
      ...(s.type_v !== undefined && {kvCacheValueType: s.type_v}),
    });
    const ok = await ctx.init();
    await settled();
    if (!ok) {
      console.log(JSON.stringify({settings: s, error: log.trim().split('\n').slice(-1)[0] || 'failed'}));
      continue;
    }
    console.log(JSON.stringify(
        {settings: s, model_log: modelLog, context_log: log, n_ctx: ctx.getContextSize()}));
    await ctx.dispose();
  }
  await model.dispose();
})().catch((e) => {
  console.error('error: ' + e.message);
  process.exit(1);
});
