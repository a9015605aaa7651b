// Walks a skillreg catalog with the official TypeScript MCP SDK's client,
// as a host built on it would: every skill of skills/list, every file of
// every skill through resources/read (checked against the skill's
// manifest: size, sha256 digest, text or blob present), the read_skill_file
// tool for each file, and every prompt with its embedded SKILL.md. Run by
// cmd/skillreg's TestTypeScriptClientReadsEveryFile:
//
//   node ts-client-walk.cjs URL NODE_MODULES
//
// It prints one JSON summary line and exits 1 on the first failed check.
"use strict";
const path = require("path");
const crypto = require("crypto");
const [url, nodeModules] = process.argv.slice(2);
const req = require("module").createRequire(path.join(nodeModules, "resolve.js"));
const { Client } = req("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = req("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ResultSchema } = req("@modelcontextprotocol/sdk/types.js");

function fail(msg) {
  console.error("ts-client-walk: " + msg);
  process.exit(1);
}

async function main() {
  const client = new Client({ name: "skillreg-ts-walk", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const sum = { protocol: client.transport.protocolVersion || "", skills: 0, files: 0, text: 0, blob: 0, empty: 0, toolReads: 0, prompts: 0, uris: [] };
  let cursor;
  do {
    const page = await client.request({ method: "skills/list", params: cursor ? { cursor } : {} }, ResultSchema);
    for (const skill of page.skills) {
      sum.skills++;
      for (const r of skill.resources) {
        await checkFile(client, r, sum);
      }
    }
    cursor = page.nextCursor;
  } while (cursor);

  let pcursor;
  do {
    const page = await client.listPrompts(pcursor ? { cursor: pcursor } : {});
    for (const p of page.prompts) {
      const got = await client.getPrompt({ name: p.name });
      const res = got.messages[0].content.resource;
      if (!res || typeof res.text !== "string" || res.text.length === 0) fail(`prompt ${p.name}: no embedded SKILL.md text`);
      sum.prompts++;
    }
    pcursor = page.nextCursor;
  } while (pcursor);
  await client.close();
  console.log(JSON.stringify(sum));
}

// checkFile reads one file (resources/read, then the tool) and holds both
// to the manifest entry r ({uri, size, digest}).
async function checkFile(client, r, sum) {
  let got;
  try {
    got = await client.readResource({ uri: r.uri });
  } catch (e) {
    fail(`resources/read ${r.uri}: ${e.message}`);
  }
  if (got.contents.length !== 1) fail(`${r.uri}: ${got.contents.length} contents`);
  const c = got.contents[0];
  if (c.uri !== r.uri) fail(`${r.uri}: contents for ${c.uri}`);
  const hasText = typeof c.text === "string", hasBlob = typeof c.blob === "string";
  if (hasText === hasBlob) fail(`${r.uri}: text ${hasText}, blob ${hasBlob}: want exactly one`);
  const bytes = hasText ? Buffer.from(c.text, "utf8") : Buffer.from(c.blob, "base64");
  check(r, bytes, "resources/read");
  sum.files++;
  sum.uris.push(r.uri);
  if (hasText) sum.text++; else sum.blob++;
  if (bytes.length === 0) sum.empty++;

  // The tool pages files over 256 KiB; every file here is smaller.
  const tool = await client.callTool({ name: "read_skill_file", arguments: { uri: r.uri } });
  if (tool.isError) fail(`read_skill_file ${r.uri}: ${JSON.stringify(tool.content)}`);
  const out = tool.structuredContent;
  if (out.size < 256 * 1024) {
    if (out.next_offset) fail(`read_skill_file ${r.uri}: paged a small file`);
    const tb = out.encoding === "text" ? Buffer.from(out.content, "utf8") : Buffer.from(out.content, "base64");
    check(r, tb, "read_skill_file");
    if ((out.encoding === "text") !== hasText) fail(`${r.uri}: read_skill_file says ${out.encoding}, resources/read ${hasText ? "text" : "blob"}`);
  }
  sum.toolReads++;
}

function check(r, bytes, how) {
  const digest = "sha256:" + crypto.createHash("sha256").update(bytes).digest("hex");
  if (bytes.length !== r.size) fail(`${how} ${r.uri}: ${bytes.length} bytes, manifest says ${r.size}`);
  if (digest !== r.digest) fail(`${how} ${r.uri}: digest ${digest}, manifest says ${r.digest}`);
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
