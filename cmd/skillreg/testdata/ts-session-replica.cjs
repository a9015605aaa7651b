// A 2025-11-25 session of the official TypeScript MCP SDK's client whose
// requests a balancer moves to another replica. Run by cmd/skillreg's
// TestSessionOnAnotherReplicaTypeScript:
//
//   node ts-session-replica.cjs URL NODE_MODULES
//
// It connects, lists skills, prints "ready" and waits for a line on
// stdin (the test moves the balancer to the other replica meanwhile);
// then lists again in the same session, which must fail with the
// transport's HTTP 404, and re-initializes as a host does on that answer:
// a new transport and client, which must list the skills. It prints one
// JSON summary line and exits 1 on the first failed check.
"use strict";
const path = require("path");
const readline = require("readline");
const [url, nodeModules] = process.argv.slice(2);
const req = require("module").createRequire(path.join(nodeModules, "resolve.js"));
const { Client } = req("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport, StreamableHTTPError } = req("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ResultSchema } = req("@modelcontextprotocol/sdk/types.js");

function fail(msg) {
  console.error("ts-session-replica: " + msg);
  process.exit(1);
}

async function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const client = new Client({ name: "skillreg-ts-session", version: "1" });
  await client.connect(transport);
  return { client, transport };
}

async function list(client) {
  const page = await client.request({ method: "skills/list", params: {} }, ResultSchema);
  return page.skills.length;
}

async function main() {
  const first = await connect();
  const sum = { protocol: first.transport.protocolVersion || "", session: first.transport.sessionId || "", before: await list(first.client) };
  console.log("ready");
  const rl = readline.createInterface({ input: process.stdin });
  await new Promise((resolve) => rl.once("line", resolve));
  rl.close();
  try {
    await list(first.client);
    fail("the session's request at the other replica succeeded");
  } catch (e) {
    if (!(e instanceof StreamableHTTPError)) fail("the session's request at the other replica: " + e);
    sum.status = e.code;
  }
  await first.client.close().catch(() => {});
  const second = await connect();
  sum.newSession = second.transport.sessionId || "";
  sum.after = await list(second.client);
  await second.client.close();
  console.log(JSON.stringify(sum));
}

main().catch((e) => fail(String(e && e.stack || e)));
