// The official TypeScript SDK client (pinned in package.json) against `pgrag serve`:
// a search, a resource read and paged walks (search continuation tokens, resources/list
// cursors). Prints one JSON summary on stdout; tests/test_conformance.py drives it.
//
//   node sdk_client.mjs stdio <command> [args...]     (PGRAG_* settings from the environment)
//   node sdk_client.mjs http|sse <url> [bearer key]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [kind, target, ...rest] = process.argv.slice(2);
const query = process.env.PGRAG_TS_QUERY ?? "contract";

function transport() {
  if (kind === "stdio") {
    return new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: "ignore" });
  }
  const headers = rest[0] ? { Authorization: `Bearer ${rest[0]}` } : {};
  const url = new URL(target);
  if (kind === "http") {
    return new StreamableHTTPClientTransport(url, { requestInit: { headers } });
  }
  if (kind === "sse") {
    return new SSEClientTransport(url, {
      requestInit: { headers },
      eventSourceInit: {
        fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers ?? {}), ...headers } }),
      },
    });
  }
  throw new Error(`unknown transport ${kind}`);
}

const client = new Client({ name: "pgrag-ts-sdk-test", version: "1.0.0" });
await client.connect(transport());
try {
  const tools = (await client.listTools()).tools.map((t) => t.name);

  const first = await client.callTool({ name: "search", arguments: { query, limit: 3 } });
  const hits = first.structuredContent.data.results;

  // every page of one search: each hit once, one total
  const walked = [];
  const totals = new Set();
  let token = null;
  for (let pages = 0; pages < 200; pages++) {
    const args = { query, limit: 2, max_tokens: 300 };
    if (token) args.continuation_token = token;
    const page = await client.callTool({ name: "search", arguments: args });
    if (page.isError) throw new Error(JSON.stringify(page.structuredContent.error));
    const env = page.structuredContent;
    totals.add(env.data.total_matches);
    walked.push(...env.data.results.map((h) => h.chunk_id));
    if (!env.continuation.has_more) break;
    token = env.continuation.token;
  }

  // every page of resources/list
  const uris = [];
  let cursor;
  do {
    const page = await client.listResources(cursor ? { cursor } : {});
    uris.push(...page.resources.map((r) => r.uri));
    cursor = page.nextCursor;
  } while (cursor);

  const read = await client.readResource({ uri: `${hits[0] ? `pgrag://documents/${hits[0].document_id}` : uris[0]}/content` });

  process.stdout.write(
    JSON.stringify({
      tools,
      first_hit: hits[0] ?? null,
      walked,
      totals: [...totals],
      uris,
      read_text_length: read.contents[0].text.length,
      read_mime: read.contents[0].mimeType,
    }),
  );
} finally {
  await client.close();
}
